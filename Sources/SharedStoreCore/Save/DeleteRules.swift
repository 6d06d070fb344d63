import Foundation
import SharedStoreSupport

/// Deletes objects and applies their relationships' delete rules: nullify (recorded as an update
/// of the related object), cascade (recorded as its delete) and deny (the save fails). Many-to-many
/// links go in every case; the rule says what happens to the objects on the other side.
struct DeleteRules {
    let s: TransactionSQL
    /// The objects the caller asked to delete: deny lets a related object go only when it is one.
    private var requested: Set<ObjectKey> = []
    /// Objects to delete, in order (the requested ones, then cascades).
    private var work: [(Entity, Int64)] = []

    /// The entities' lifecycle events and rules (nil: none registered).
    private let hooks: HookTable?

    init(_ s: TransactionSQL) {
        self.s = s
        self.hooks = s.container.hookRegistry.all()
    }

    var model: Model { s.model }

    /// Deletes `pks` of `e` and what cascades from them; `deleted` holds the objects already
    /// deleted in this transaction (each goes once).
    mutating func delete(
        _ e: Entity, pks: [Int64], deleted: inout Set<ObjectKey>, recorder: inout ChangeRecorder,
        counter: inout KeptCounter, aggregates: inout AggregateDeltas
    ) throws {
        requested = Set(pks.map { ObjectKey(entity: model.index(of: e), pk: $0) })
        work = pks.map { (e, $0) }
        var i = 0
        while i < work.count {
            let (entity, pk) = work[i]
            i += 1
            guard deleted.insert(ObjectKey(entity: model.index(of: entity), pk: pk)).inserted else { continue }
            guard let row = try s.snapshot(entity, pk) else {
                throw StoreError(
                    .objectNotFound, "no object \(entity.name)/\(pk) in the store (never saved, or deleted)")
            }
            for r in entity.relationships {
                try apply(r, of: entity, row, deleted: deleted, recorder: &recorder)
            }
            var tombstone: [(Int, Value)] = []
            for (ai, a) in entity.attributes.enumerated() where a.preservesValueInHistoryOnDeletion {
                tombstone.append((ai, row[a.name]))
            }
            let index = model.index(of: entity)
            if let h = hooks?[index]?.hooks {
                if let prepare = h.prepareForDeletion {
                    try EntityHooks.run("prepareForDeletion", row.id.description) { try prepare(row) }
                }
                try h.check(row, .delete, object: row.id.description)
            }
            if !entity.keptCounts.isEmpty, !counter.isNew(index, pk) {
                counter.add(index, try s.keptCountFlags(entity, pk), sign: -1)
            }
            // What it fed (counts, sums of the objects it points at) goes with it.
            let map = s.container.derivations
            if !map.isEmpty, !map.feeds[index].isEmpty {
                aggregates.feed(map, index, sign: -1, target: { row.relationships[$0]?.primaryKey }, value: { row[$0] })
            }
            let globalID = try s.deleteRow(entity, pk)
            recorder.deleted(index, pk, tombstone: tombstone, globalID: globalID)
        }
    }

    /// The rule of relationship `r` for the object `row` about to be deleted.
    private mutating func apply(
        _ r: Relationship, of entity: Entity, _ row: Snapshot, deleted: Set<ObjectKey>,
        recorder: inout ChangeRecorder
    ) throws {
        let dest = try model.entity(r.destination)
        let destIndex = model.index(of: dest)
        let pk = row.id.primaryKey
        let object = row.id.description
        func denied(_ related: [Int64]) -> StoreError {
            StoreError(
                .deleteDenied,
                "cannot delete \(object): \(entity.name).\(r.name) still has \(related.count) \(dest.name) "
                    + "object(s) (delete rule deny)"
            )
        }
        func outside(_ related: [Int64]) -> Bool {
            related.contains { !requested.contains(ObjectKey(entity: destIndex, pk: $0)) }
        }
        if let join = model.joinTable(entity, r) {
            let related = try s.linked(join, to: pk).filter { !deleted.contains(ObjectKey(entity: destIndex, pk: $0)) }
            if r.deleteRule == .deny, outside(related) { throw denied(related) }
            try s.unlinkAll(join, from: pk)
            switch r.deleteRule {
            case .cascade: work += related.map { (dest, $0) }
            case .nullify, .deny:
                for other in related {
                    recorder.updated(destIndex, other, properties: [dest.historyIndex(of: r.inverse)])
                }
            }
        } else if r.isToMany {
            let related = try s.objects(dest, whose: r.inverse, is: pk).filter {
                !deleted.contains(ObjectKey(entity: destIndex, pk: $0))
            }
            guard !related.isEmpty else { return }
            switch r.deleteRule {
            case .deny:
                if outside(related) { throw denied(related) }
            case .cascade:
                work += related.map { (dest, $0) }
            case .nullify:
                // Copies made through the relationship (`related` derived attributes) go too.
                let copies =
                    s.container.derivations.isEmpty ? [] : s.container.derivations.copies(destIndex, via: r.inverse)
                try s.nullify(dest, r.inverse, pointingTo: pk, alsoClearing: copies)
                let properties = [dest.historyIndex(of: r.inverse)] + copies.map(dest.historyIndex(of:))
                for other in related {
                    recorder.updated(destIndex, other, properties: properties)
                }
            }
        } else if let target = row.relationships[r.name] {
            switch r.deleteRule {
            case .deny:
                throw StoreError(
                    .deleteDenied,
                    "cannot delete \(object): \(entity.name).\(r.name) is set to \(target) (delete rule deny)")
            case .cascade: work.append((dest, target.primaryKey))
            case .nullify: break  // the to-many side stores nothing
            }
        }
    }
}
