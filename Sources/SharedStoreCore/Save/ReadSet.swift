import Foundation

/// What a context has read of each object: the base of conflict detection when it saves.
///
/// Objects are kept by entity, then by key (an integer hashes far faster than a whole id), as
/// they are read: a changed version replaces what was kept; the same version read again keeps the
/// first snapshot (replacing it would only free one copy to keep another, and keep both their
/// fetches' rows alive), so a fetch of objects already read costs one lookup each and the new
/// rows are freed while they are still in the cache. A foreign write that changed a row without
/// its version leaves the older read here: the save then sees more changed in the store, never
/// less.
struct ReadSet {
    private var indexed: [String: [Int64: Snapshot]] = [:]

    /// The last snapshot read of `id` (of two reads at one version, the first).
    subscript(id: ObjectID) -> Snapshot? { read(id) }

    /// The last snapshot read of `id`.
    func read(_ id: ObjectID) -> Snapshot? {
        indexed[id.entity]?[id.primaryKey].flatMap { $0.id == id ? $0 : nil }
    }

    /// Records a fetch's result (or one object read).
    mutating func record(_ batch: [Snapshot]) {
        guard let entity = batch.first?.id.entity else { return }
        // A fetch reads one entity: its objects go into one table, looked up once.
        var table = indexed.removeValue(forKey: entity) ?? [:]
        for s in batch where s.id.entity == entity {
            if let kept = table[s.id.primaryKey], kept.version == s.version { continue }
            table[s.id.primaryKey] = s
        }
        indexed[entity] = table
        for s in batch where s.id.entity != entity { indexed[s.id.entity, default: [:]][s.id.primaryKey] = s }
    }

    /// Starts again from `snapshots` (what a save wrote), or from nothing.
    mutating func reset(_ snapshots: [ObjectID: Snapshot] = [:]) {
        indexed = [:]
        for s in snapshots.values { indexed[s.id.entity, default: [:]][s.id.primaryKey] = s }
    }
}
