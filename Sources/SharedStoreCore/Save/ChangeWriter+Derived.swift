import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// Derived attributes (``Derivation``) in the save path: every write through ``ChangeWriter`` —
/// a context's save, a batch, any process's — keeps them right in its own transaction.
///
/// - an insert or update computes the object's own: `now`, `canonical` (when its source is
///   written), `related` (when its relationship is written), counts and sums start at zero;
/// - an object that feeds a count or sum (through its to-one) adds or takes away from its
///   target's when it is inserted, deleted, moved, or its summed attribute changes — tallied
///   per target and written once before the transaction commits;
/// - an update of an attribute that other objects copy (`related`) sets their copies, and a
///   delete that nullifies a relationship clears the copies made through it.
///
/// Every object a derived change touches is recorded in history as an update of that property.
extension ChangeWriter {
    var derivations: DerivationMap { container.derivations }

    /// The object's own derived values for an insert (`written` nil: all of them) or an update
    /// that writes the attributes and relationships in `written`.
    mutating func ownDerived(
        _ e: Entity, _ index: Int, values: (String) -> Value, target: (String) -> Int64?, written: Set<String>?
    ) throws -> [String: Value] {
        var out: [String: Value] = [:]
        for own in derivations.own[index] {
            switch own {
            case .now(let a):
                out[a] = .date(saveTime)
            case .canonical(let a, let source):
                guard written?.contains(source) ?? true else { continue }
                out[a] = values(source).stringValue.map { .string(DerivationMap.canonical($0)) } ?? .null
            case .related(let a, let via, let entity, let source):
                guard written?.contains(via) ?? true else { continue }
                out[a] = try target(via).map { try related(entity, $0)[source] } ?? .null
            case .zero(let a, let type):
                guard written == nil else { continue }
                out[a] = type == .double ? .double(0) : .integer(0)
            }
        }
        return out
    }

    /// The object's own derived values for an insert, written into its row (the hot path of a
    /// batch: no dictionary of its own, no closures).
    mutating func deriveForInsert(_ e: Entity, _ index: Int, _ row: inout InsertRow) throws {
        let own = derivations.own[index]
        let places = derivations.ownPlaces[index]
        for k in own.indices {
            let at = places[k].attribute
            switch own[k] {
            case .now:
                row.values[at] = .date(saveTime)
            case .canonical(_, let source):
                let v = places[k].source.map { row.value($0, of: e) } ?? row.value(source, of: e)
                row.values[at] = v.stringValue.map { .string(DerivationMap.canonical($0)) } ?? .null
            case .related(_, let via, let entity, let source):
                row.values[at] = try row.target(via, of: e).map { try related(entity, $0)[source] } ?? .null
            case .zero(_, let type):
                row.values[at] = type == .double ? .double(0) : .integer(0)
            }
        }
    }

    /// What the object `pk` of entity `index` holds now (read once per transaction).
    mutating func related(_ index: Int, _ pk: Int64) throws -> Snapshot {
        let key = ObjectKey(entity: index, pk: pk)
        if let known = relatedCache[key] { return known }
        let e = model.entities[index]
        guard let snapshot = try s.snapshot(e, pk) else {
            throw StoreError(.objectNotFound, "no object \(e.name)/\(pk) in the store (never saved, or deleted)")
        }
        relatedCache[key] = snapshot
        return snapshot
    }

    /// An object of entity `index` that feeds counts or sums comes (`sign` 1) or goes (-1).
    mutating func feed(_ index: Int, sign: Int64, target: (String) -> Int64?, value: (String) -> Value) {
        aggregates.feed(derivations, index, sign: sign, target: target, value: value)
    }

    /// An update of object `pk` (from `current` to `after`): what it feeds moves with it.
    mutating func refeed(_ index: Int, current: Snapshot, after: Snapshot) {
        for f in derivations.feeds[index] {
            let was = current.relationships[f.via]?.primaryKey
            let now = after.relationships[f.via]?.primaryKey
            let old = f.sum.map { current[$0] } ?? .integer(1)
            let new = f.sum.map { after[$0] } ?? .integer(1)
            guard was != now || old != new else { continue }
            if let was {
                aggregates.add(ObjectKey(entity: f.target, pk: was), f.attribute, AggregateDeltas.negated(old))
            }
            if let now { aggregates.add(ObjectKey(entity: f.target, pk: now), f.attribute, new) }
        }
    }

    /// An update of object `pk` wrote attributes others copy: their copies follow.
    mutating func propagate(_ index: Int, _ pk: Int64, written: [String: Value]) throws {
        let byAttribute = derivations.dependents[index]
        guard !byAttribute.isEmpty else { return }
        for (attribute, value) in written {
            for d in byAttribute[attribute] ?? [] {
                let x = model.entities[d.entity]
                let type = x.attribute(named: d.attribute)?.type ?? .string
                let stored = try SQLMapping.sqlValue(value, type, object: x.name, property: d.attribute)
                for other in try s.propagate(x, d.attribute, via: d.via, to: pk, stored) {
                    recorder.updated(d.entity, other, properties: [x.historyIndex(of: d.attribute)])
                    relatedCache[ObjectKey(entity: d.entity, pk: other)] = nil
                }
            }
        }
    }

    /// Writes the tallied counts and sums, and records each target object that changed (one
    /// made in this transaction is recorded as inserted already). Called last, before history.
    mutating func writeAggregates() throws {
        let deleted = self.deleted
        for (key, attributes) in aggregates.byObject where !deleted.contains(key) {
            let e = model.entities[key.entity]
            var changed: [Int] = []
            for (position, amount) in attributes {
                if amount == .integer(0) || amount == .double(0) { continue }
                let a = e.attributes[position]
                let stored: SQLValue =
                    a.type == .double ? .double(amount.doubleValue ?? 0) : .integer(amount.integerValue ?? 0)
                try s.addToDerived(e, key.pk, a.name, stored)
                changed.append(e.historyIndex(of: a.name))
            }
            if !changed.isEmpty && !insertedTargets.contains(key) {
                recorder.updated(key.entity, key.pk, properties: changed)
            }
        }
    }
}
