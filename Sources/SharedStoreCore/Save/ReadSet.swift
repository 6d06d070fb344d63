import Foundation

/// What a context has read of each object: the base of conflict detection when it saves.
///
/// A fetch is recorded as its array of snapshots (one reference), not object by object: a
/// context that fetches the same fifty objects again and again (a widget, a list page) keeps
/// the newest array in place of the previous one, and objects are indexed by id only when a
/// save or an update needs them, or when many fetches have piled up. A lookup reads the recent
/// fetches newest first, then the index: the last read of an object wins, as before.
struct ReadSet {
    private var indexed: [ObjectID: Snapshot] = [:]
    /// Recent fetches not yet indexed, oldest first.
    private var recent: [[Snapshot]] = []
    /// How many fetches stay unindexed, and how large one may be to stay so.
    private static let recentLimit = 8
    private static let smallFetch = 512

    /// The last snapshot read of `id`.
    subscript(id: ObjectID) -> Snapshot? {
        for batch in recent.reversed() {
            if let s = batch.last(where: { $0.id == id }) { return s }
        }
        return indexed[id]
    }

    /// Records a fetch's result (or one object read).
    mutating func record(_ batch: [Snapshot]) {
        guard !batch.isEmpty else { return }
        guard batch.count <= Self.smallFetch else {
            settle()
            for s in batch { indexed[s.id] = s }
            return
        }
        if let last = recent.last, Self.sameObjects(last, batch) {
            recent[recent.count - 1] = batch
            return
        }
        recent.append(batch)
        if recent.count > Self.recentLimit {
            for s in recent.removeFirst() { indexed[s.id] = s }
        }
    }

    /// Every object read, by id (a save plans from it).
    mutating func all() -> [ObjectID: Snapshot] {
        settle()
        return indexed
    }

    /// Starts again from `snapshots` (what a save wrote), or from nothing.
    mutating func reset(_ snapshots: [ObjectID: Snapshot] = [:]) {
        indexed = snapshots
        recent.removeAll()
    }

    /// Whether two fetches read the same objects in the same order. A fetch reads one entity of
    /// one store: the first ids compared whole, the rest by key.
    private static func sameObjects(_ a: [Snapshot], _ b: [Snapshot]) -> Bool {
        guard a.count == b.count, let first = a.first, first.id == b[0].id else { return false }
        for i in 1..<a.count where a[i].id.primaryKey != b[i].id.primaryKey { return false }
        return true
    }

    private mutating func settle() {
        for batch in recent {
            for s in batch { indexed[s.id] = s }
        }
        recent.removeAll()
    }
}
