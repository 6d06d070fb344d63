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
    /// The snapshots kept, in the order their objects were first read, in chunks of a fixed size
    /// (a growing set never copies what it holds); `positions` finds them. Kept apart from the
    /// tables so that a table grows by small entries (a key and a position), not by whole
    /// snapshots moved on every resize.
    private var kept = Chunks()
    /// Entity, then primary key → position in `kept`.
    private var positions: [String: KeyTable] = [:]

    /// The last snapshot read of `id` (of two reads at one version, the first).
    subscript(id: ObjectID) -> Snapshot? { read(id) }

    /// The last snapshot read of `id`.
    func read(_ id: ObjectID) -> Snapshot? {
        guard let i = positions[id.entity]?[id.primaryKey] else { return nil }
        let s = kept[i]
        return s.id == id ? s : nil
    }

    /// Records a fetch's result (or one object read).
    mutating func record(_ batch: [Snapshot]) {
        guard let entity = batch.first?.id.entity else { return }
        // A fetch reads one entity: its objects go into one table, looked up once.
        var table = positions.removeValue(forKey: entity) ?? KeyTable()
        for s in batch where s.id.entity == entity { Self.keep(s, in: &table, &kept) }
        positions[entity] = table
        for s in batch where s.id.entity != entity {
            Self.keep(s, in: &positions[s.id.entity, default: KeyTable()], &kept)
        }
    }

    /// Keeps `s` unless `kept` holds its object at the same version: appended for a new object,
    /// in place of the older read for a changed one. One probe of the table per object.
    private static func keep(_ s: Snapshot, in table: inout KeyTable, _ kept: inout Chunks) {
        guard let position = table.find(s.id.primaryKey, orInsert: { kept.append(s) }) else { return }
        let old = kept[position]
        if old.version != s.version || old.id != s.id { kept[position] = s }
    }

    /// What a save leaves read: the objects it `touched` in the store (updated, deleted, changed by
    /// a rule or a derived value, restored, or new under a key an object once had) are forgotten,
    /// what it `wrote` (each touched object still there, as the save ended it) is read as such,
    /// and every other read stays the base of a later save (another process may change those
    /// objects before this context does).
    mutating func saved(touched: [ObjectID], wrote: [Snapshot]) {
        for id in touched { positions[id.entity]?.remove(id.primaryKey) }
        for s in wrote { Self.keep(s, in: &positions[s.id.entity, default: KeyTable()], &kept) }
    }

    /// Forgets every read.
    mutating func reset() {
        kept = Chunks()
        positions = [:]
    }

    /// Snapshots by position, in arrays of `size`: appending never moves what is held.
    struct Chunks {
        private static let shift = 12
        private static let size = 1 << shift
        private var chunks: [[Snapshot]] = []

        subscript(position: Int) -> Snapshot {
            get { chunks[position >> Self.shift][position & (Self.size - 1)] }
            set { chunks[position >> Self.shift][position & (Self.size - 1)] = newValue }
        }

        /// Appends `s`; returns its position.
        mutating func append(_ s: Snapshot) -> Int {
            // A chunk grows as an array does (a save's few objects take a few slots, not a chunk's
            // worth), up to its size; then the next one starts.
            if chunks.isEmpty || chunks[chunks.count - 1].count == Self.size { chunks.append([]) }
            let last = chunks.count - 1
            chunks[last].append(s)
            return last << Self.shift | (chunks[last].count - 1)
        }
    }
}
