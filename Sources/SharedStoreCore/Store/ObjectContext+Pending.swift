import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// A fetch that sees the context's unsaved changes (``FetchRequest/includesPendingChanges``, as
/// in Core Data): an object this context deleted is left out, one it changed is tested with its
/// changes, one it inserted is tested too — each by SQL, as a one-row table, so that it matches
/// and sorts exactly as it will once saved. Derived attributes of unsaved objects are computed
/// by the save, as in Core Data; a condition that reads other entities sees them as stored.
extension ObjectContext {
    /// Whether this context holds unsaved inserts, updates or deletes of `entity`'s objects.
    func hasPendingChanges(of entity: String) -> Bool {
        inserts.contains { $0.id.entity == entity } || updates.keys.contains { $0.entity == entity }
            || deleteSet.contains { $0.entity == entity }
    }

    func fetchIncludingPending(_ request: FetchRequest, _ e: Entity) throws -> [Snapshot] {
        let deleted = deleteSet.filter { $0.entity == e.name }
        let updated = updates.filter { $0.key.entity == e.name && !deleted.contains($0.key) }
        let added = inserts.filter { $0.id.entity == e.name && !deleted.contains($0.id) }
        var rows: [(snapshot: Snapshot, keys: [SQLValue], pending: Bool)] = []
        try container.read { s in
            for (snapshot, keys) in try s.fetchWithSortKeys(request)
            where !deleted.contains(snapshot.id) && updated[snapshot.id] == nil {
                rows.append((snapshot, keys, false))
            }
            for (id, pending) in updated {
                guard var object = try s.snapshot(e, id.primaryKey) else { continue }
                for (name, value) in pending.values { object[name] = value }
                for (name, target) in pending.relationships { object.relationships[name] = target }
                let (matches, keys) = try s.evaluate(
                    e, pk: id.primaryKey, values: object.values, keys: object.relationships.mapValues { $0.primaryKey },
                    request)
                if matches { rows.append((object, keys, true)) }
            }
            for insert in added {
                var values: [String: Value] = [:]
                for a in e.attributes where !a.isDerived { values[a.name] = insert.values[a.name] ?? a.defaultValue }
                let targets = insert.relationships.compactMapValues { $0 }
                let (matches, keys) = try s.evaluate(
                    e, pk: insert.id.primaryKey, values: values, keys: targets.mapValues { $0.primaryKey }, request)
                let object = Snapshot(id: insert.id, version: 0, values: values, relationships: targets)
                if matches { rows.append((object, keys, true)) }
            }
        }
        rows.sort { order($0.snapshot, $0.keys, $1.snapshot, $1.keys, request.sort) }
        let window = rows.dropFirst(request.offset).prefix(request.limit ?? Int.max)
        registered.record(window.filter { !$0.pending }.map(\.snapshot))
        return window.map(\.snapshot)
    }

    /// SQL's order: by each sort key in its direction, then by key (an unsaved object after the
    /// stored ones, as its key will be higher) in the last key's direction.
    private func order(_ a: Snapshot, _ ka: [SQLValue], _ b: Snapshot, _ kb: [SQLValue], _ sort: [SortKey]) -> Bool {
        for (i, key) in sort.enumerated() where i < ka.count && i < kb.count {
            if SQLValue.precedes(ka[i], kb[i]) { return key.ascending }
            if SQLValue.precedes(kb[i], ka[i]) { return !key.ascending }
        }
        let rank = { (id: ObjectID) -> Int64 in id.isTemporary ? Int64.max / 2 - id.primaryKey : id.primaryKey }
        let ascending = sort.last?.ascending ?? true
        return ascending ? rank(a.id) < rank(b.id) : rank(a.id) > rank(b.id)
    }
}
