import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// A fetch that sees the context's unsaved changes (``FetchRequest/includesPendingChanges``, as
/// in Core Data): an object this context deleted is left out, one it changed is tested with its
/// changes, one it inserted is tested too — each by SQL, as a one-row table, so that it matches
/// and sorts exactly as it will once saved. A `canonical` derived attribute of an unsaved object
/// is computed from its source here, as the save will (a search by a canonical title found no
/// unsaved article); counts, sums, copies and times are the save's, as in Core Data. A condition
/// that reads other entities sees them as stored.
extension ObjectContext {
    /// Whether this context holds unsaved inserts, updates or deletes of `entity`'s objects.
    func hasPendingChanges(of entity: String) -> Bool {
        inserts.contains { $0.id.entity == entity } || updates.keys.contains { $0.entity == entity }
            || deleteSet.contains { $0.entity == entity }
    }

    /// This context's unsaved changes of `e`'s objects: deleted ids, changed objects, new ones.
    private func pending(_ e: Entity) -> (
        deleted: Set<ObjectID>, updated: [ObjectID: PendingUpdate], added: [PendingInsert]
    ) {
        let deleted = deleteSet.filter { $0.entity == e.name }
        let updated = updates.filter { $0.key.entity == e.name && !deleted.contains($0.key) }
        return (deleted, updated, inserts.filter { $0.id.entity == e.name && !deleted.contains($0.id) })
    }

    /// The changed and new objects that match `request` as they would be saved, with their sort
    /// keys (each tested by SQL as a one-row table).
    private func matchingPending(
        _ s: TransactionSQL, _ e: Entity, _ request: FetchRequest, updated: [ObjectID: PendingUpdate],
        added: [PendingInsert]
    ) throws -> [(Snapshot, [SQLValue])] {
        var out: [(Snapshot, [SQLValue])] = []
        for (id, pending) in updated {
            guard var object = try s.snapshot(e, id.primaryKey) else { continue }
            for (name, value) in pending.values { object[name] = value }
            for (name, source) in Self.canonicalAttributes(e) { object[name] = Self.canonical(object[source]) }
            for (name, target) in pending.relationships { object.relationships[name] = target }
            let (matches, keys) = try s.evaluate(
                e, pk: id.primaryKey, values: object.values, keys: object.relationships.mapValues { $0.primaryKey },
                request)
            if matches { out.append((object, keys)) }
        }
        for insert in added {
            var values: [String: Value] = [:]
            for a in e.attributes where !a.isDerived { values[a.name] = insert.values[a.name] ?? a.defaultValue }
            for (name, source) in Self.canonicalAttributes(e) { values[name] = Self.canonical(values[source] ?? .null) }
            let targets = insert.relationships.compactMapValues { $0 }
            let (matches, keys) = try s.evaluate(
                e, pk: insert.id.primaryKey, values: values, keys: targets.mapValues { $0.primaryKey }, request)
            if matches {
                out.append((Snapshot(id: insert.id, version: 0, values: values, relationships: targets), keys))
            }
        }
        return out
    }

    /// The `canonical` derived attributes of `e`, each with its source.
    private static func canonicalAttributes(_ e: Entity) -> [(name: String, source: String)] {
        e.attributes.compactMap { a in
            guard case .canonical(let source)? = a.derivation else { return nil }
            return (a.name, source)
        }
    }

    /// A canonical value of `source`'s, as the save derives it (nil text: nil).
    private static func canonical(_ source: Value) -> Value {
        source.stringValue.map { .string(Attribute.canonical($0)) } ?? .null
    }

    func fetchIncludingPending(_ request: FetchRequest, _ e: Entity) throws -> [Snapshot] {
        let (deleted, updated, added) = pending(e)
        var rows: [(snapshot: Snapshot, keys: [SQLValue], pending: Bool)] = []
        // Stored rows only as far as the window can reach: a deleted or changed object leaves
        // a gap of at most one row each (a fetch of 50 reads 50 and a few, not the whole table).
        let reach = request.limit.map { request.offset + $0 + deleted.count + updated.count }
        try readStore { s in
            for (snapshot, keys) in try s.fetchWithSortKeys(request, limit: reach)
            where !deleted.contains(snapshot.id) && updated[snapshot.id] == nil {
                rows.append((snapshot, keys, false))
            }
            for (object, keys) in try matchingPending(s, e, request, updated: updated, added: added) {
                rows.append((object, keys, true))
            }
        }
        // Ties go the way SQL breaks them: by key, in the direction an index on the keys is read.
        let backward = !request.sort.isEmpty && QueryBuilder.readsBackward(e, request.sort)
        rows.sort { order($0.snapshot, $0.keys, $1.snapshot, $1.keys, request.sort, backward: backward) }
        let window = rows.dropFirst(request.offset).prefix(request.limit ?? Int.max)
        registered.record(window.filter { !$0.pending }.map(\.snapshot))
        return window.map(\.snapshot)
    }

    /// How many objects match `request` with this context's unsaved changes: the store's count
    /// (a kept count when one matches), less the stored objects deleted or changed that match,
    /// plus the changed and new ones that match — never a scan of the table.
    func countIncludingPending(_ request: FetchRequest, _ e: Entity) throws -> Int {
        let (deleted, updated, added) = pending(e)
        var whole = request
        (whole.limit, whole.offset, whole.sort) = (nil, 0, [])
        let total = try readStore { s -> Int in
            var n = try s.count(whole)
            for id in deleted.union(updated.keys) {
                guard let stored = try s.snapshot(e, id.primaryKey) else { continue }
                let keys = stored.relationships.mapValues { Optional($0.primaryKey) }
                if try s.evaluate(e, pk: id.primaryKey, values: stored.values, keys: keys, whole).0 { n -= 1 }
            }
            return n + (try matchingPending(s, e, whole, updated: updated, added: added)).count
        }
        return min(max(0, total - request.offset), request.limit ?? Int.max)
    }

    /// SQL's order: by each sort key in its direction, then by key (an unsaved object after the
    /// stored ones, as its key will be higher), descending when `backward`
    /// (``QueryBuilder/readsBackward(_:_:)``).
    private func order(
        _ a: Snapshot, _ ka: [SQLValue], _ b: Snapshot, _ kb: [SQLValue], _ sort: [SortKey], backward: Bool
    ) -> Bool {
        for (i, key) in sort.enumerated() where i < ka.count && i < kb.count {
            if SQLValue.precedes(ka[i], kb[i]) { return key.ascending }
            if SQLValue.precedes(kb[i], ka[i]) { return !key.ascending }
        }
        let rank = { (id: ObjectID) -> Int64 in id.isTemporary ? Int64.max / 2 - id.primaryKey : id.primaryKey }
        return backward ? rank(a.id) > rank(b.id) : rank(a.id) < rank(b.id)
    }
}
