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
    /// The snapshots kept, in the order their objects were first read; `positions` finds them.
    /// Kept apart from the tables so that a table grows by small entries (a key and a position),
    /// not by whole snapshots moved on every resize.
    private var kept: [Snapshot] = []
    /// Entity, then primary key → position in `kept`.
    private var positions: [String: [Int64: Int]] = [:]

    /// The last snapshot read of `id` (of two reads at one version, the first).
    subscript(id: ObjectID) -> Snapshot? { read(id) }

    /// The last snapshot read of `id`.
    func read(_ id: ObjectID) -> Snapshot? {
        guard let i = positions[id.entity]?[id.primaryKey] else { return nil }
        return kept[i].id == id ? kept[i] : nil
    }

    /// Records a fetch's result (or one object read).
    mutating func record(_ batch: [Snapshot]) {
        guard let entity = batch.first?.id.entity else { return }
        // A fetch reads one entity: its objects go into one table, looked up once.
        var table = positions.removeValue(forKey: entity) ?? [:]
        for s in batch where s.id.entity == entity { Self.keep(s, in: &table, &kept) }
        positions[entity] = table
        for s in batch where s.id.entity != entity {
            Self.keep(s, in: &positions[s.id.entity, default: [:]], &kept)
        }
    }

    /// Keeps `s` unless `kept` holds its object at the same version.
    private static func keep(_ s: Snapshot, in table: inout [Int64: Int], _ kept: inout [Snapshot]) {
        if let i = table[s.id.primaryKey] {
            if kept[i].version != s.version || kept[i].id != s.id { kept[i] = s }
        } else {
            table[s.id.primaryKey] = kept.count
            kept.append(s)
        }
    }

    /// Starts again from `snapshots` (what a save wrote), or from nothing.
    mutating func reset(_ snapshots: [ObjectID: Snapshot] = [:]) {
        kept = []
        positions = [:]
        for s in snapshots.values { Self.keep(s, in: &positions[s.id.entity, default: [:]], &kept) }
    }
}
