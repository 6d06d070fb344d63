import Foundation

/// What a context has read of each object: the base of conflict detection when it saves.
///
/// A fetch is recorded as its array of snapshots (one reference), not object by object: reading
/// costs nothing more (a context that only reads never indexes what it read), and a context that
/// fetches the same fifty objects again and again (a widget, a list page) keeps the newest array
/// in place of the previous one. Objects are indexed — by entity, then by key, which hashes far
/// faster than a whole id — when a save or an update asks for one, or when unindexed fetches
/// hold more objects than the index (so that objects read again and again are kept once). The
/// last read of an object wins (of two reads at one version, the first is kept).
struct ReadSet {
    private var indexed: [String: [Int64: Snapshot]] = [:]
    private var indexedCount = 0
    /// Recent fetches not yet indexed, oldest first, and how many snapshots they hold.
    private var recent: [[Snapshot]] = []
    private var recentCount = 0
    /// How many unindexed snapshots may wait while the index is smaller.
    private static let waiting = 8192

    /// The last snapshot read of `id` (what was read since the last lookup is indexed first).
    subscript(id: ObjectID) -> Snapshot? {
        mutating get {
            settle()
            return read(id)
        }
    }

    /// The last snapshot read of `id`, without indexing: the newest unindexed fetch first, then
    /// the index (one lookup when everything is indexed: ``settled()``).
    func read(_ id: ObjectID) -> Snapshot? {
        for batch in recent.reversed() {
            if let s = batch.last(where: { $0.id == id }) { return s }
        }
        return indexed[id.entity]?[id.primaryKey].flatMap { $0.id == id ? $0 : nil }
    }

    /// Records a fetch's result (or one object read).
    mutating func record(_ batch: [Snapshot]) {
        guard !batch.isEmpty else { return }
        if let last = recent.last, Self.sameObjects(last, batch) {
            recent[recent.count - 1] = batch
            return
        }
        // The fetches before this one are indexed once they hold more objects than the index
        // (and than `waiting`): then an object read again and again is kept once, and each
        // object recorded is indexed once at most. The newest fetch waits (a large one read
        // again is replaced whole, above).
        if recentCount > max(Self.waiting, indexedCount) { settle() }
        recent.append(batch)
        recentCount += batch.count
    }

    /// This read set with everything indexed (a save looks objects up in it).
    mutating func settled() -> ReadSet {
        settle()
        return self
    }

    /// Starts again from `snapshots` (what a save wrote), or from nothing.
    mutating func reset(_ snapshots: [ObjectID: Snapshot] = [:]) {
        indexed = [:]
        indexedCount = 0
        recent.removeAll()
        recentCount = 0
        for s in snapshots.values { index(s) }
    }

    private mutating func index(_ s: Snapshot) {
        if indexed[s.id.entity, default: [:]].updateValue(s, forKey: s.id.primaryKey) == nil { indexedCount += 1 }
    }

    /// Whether two fetches read the same objects in the same order. A fetch reads one entity of
    /// one store: the first ids compared whole, the rest by key.
    private static func sameObjects(_ a: [Snapshot], _ b: [Snapshot]) -> Bool {
        guard a.count == b.count, let first = a.first, first.id == b[0].id else { return false }
        for i in 1..<a.count where a[i].id.primaryKey != b[i].id.primaryKey { return false }
        return true
    }

    private mutating func settle() {
        guard !recent.isEmpty else { return }
        for batch in recent {
            // A fetch reads one entity: its objects go into one table, looked up once.
            guard let entity = batch.first?.id.entity else { continue }
            var table = indexed.removeValue(forKey: entity) ?? [:]
            for s in batch where s.id.entity == entity {
                // The same version read again: the snapshot kept stays (replacing it would only
                // free one and keep another, and keep both their fetches' rows alive). A foreign
                // write that changed the row without its version leaves the older read here:
                // the save then sees more changed in the store, never less.
                if let kept = table[s.id.primaryKey] {
                    if kept.version != s.version { table[s.id.primaryKey] = s }
                } else {
                    table[s.id.primaryKey] = s
                    indexedCount += 1
                }
            }
            indexed[entity] = table
            for s in batch where s.id.entity != entity { index(s) }
        }
        recent.removeAll()
        recentCount = 0
    }
}
