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
        // Each snapshot read where it lies: `for s in batch`, `batch[i]` and a borrowed parameter
        // all copied each one (its six references retained, then released): 300 instructions a
        // row read again, more than the rest of keeping it.
        var table = positions.removeValue(forKey: entity) ?? KeyTable()
        var others = false
        Self.forEachInPlace(batch) { s in
            if s.pointee.id.entity == entity { Self.keep(s, in: &table, &kept) } else { others = true }
        }
        positions[entity] = table
        guard others else { return }
        Self.forEachInPlace(batch) { s in
            guard s.pointee.id.entity != entity else { return }
            Self.keep(s, in: &positions[s.pointee.id.entity, default: KeyTable()], &kept)
        }
    }

    /// Calls `body` with each snapshot of `rows` where it lies, not a copy of it.
    private static func forEachInPlace(_ rows: [Snapshot], _ body: (UnsafePointer<Snapshot>) -> Void) {
        rows.withUnsafeBufferPointer { buffer in
            guard let first = buffer.baseAddress else { return }
            for s in first..<first + buffer.count { body(s) }
        }
    }

    /// Keeps the snapshot `s` points at unless `kept` holds its object at the same version:
    /// appended for a new object, in place of the older read for a changed one. One probe of the
    /// table per object.
    private static func keep(_ s: UnsafePointer<Snapshot>, in table: inout KeyTable, _ kept: inout Chunks) {
        guard let position = table.find(s.pointee.id.primaryKey, orInsert: kept.count) else {
            let appended = kept.append(s.pointee)
            assert(appended == kept.count - 1, "a snapshot appended where its key says")
            return
        }
        // Compared where it is kept: a copy of the kept snapshot cost as much as the lookup.
        if !kept.holds(position, version: s.pointee.version, id: s.pointee.id) { kept[position] = s.pointee }
    }

    /// What a save leaves read: the objects it `touched` in the store (updated, deleted, changed by
    /// a rule or a derived value, restored) and those it `inserted` (new under a key an object
    /// may once have had) are forgotten, what it `wrote` (each touched object still there, as the
    /// save ended it) is read as such, and every other read stays the base of a later save
    /// (another process may change those objects before this context does).
    mutating func saved(touched: [ObjectID], inserted: some Sequence<ObjectID>, wrote: [Snapshot]) {
        // Nothing read, nothing to forget (a context that only writes: no lookup per object).
        if !positions.isEmpty {
            for id in touched { positions[id.entity]?.remove(id.primaryKey) }
            for id in inserted { positions[id.entity]?.remove(id.primaryKey) }
        }
        Self.forEachInPlace(wrote) { s in Self.keep(s, in: &positions[s.pointee.id.entity, default: KeyTable()], &kept)
        }
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
        /// How many are held (the position the next one takes).
        private(set) var count = 0

        subscript(position: Int) -> Snapshot {
            get { chunks[position >> Self.shift][position & (Self.size - 1)] }
            set { chunks[position >> Self.shift][position & (Self.size - 1)] = newValue }
        }

        /// Whether the snapshot at `position` is of `id` at `version` (read in place, not copied).
        func holds(_ position: Int, version: Int64, id: ObjectID) -> Bool {
            let (chunk, i) = (position >> Self.shift, position & (Self.size - 1))
            // Through a buffer: an array's element read for one field was copied whole.
            return chunks[chunk].withUnsafeBufferPointer { $0[i].version == version && $0[i].id == id }
        }

        /// Appends `s`; returns its position.
        mutating func append(_ s: Snapshot) -> Int {
            // A chunk grows as an array does (a save's few objects take a few slots, not a chunk's
            // worth), up to its size; then the next one starts.
            if chunks.isEmpty || chunks[chunks.count - 1].count == Self.size { chunks.append([]) }
            let last = chunks.count - 1
            chunks[last].append(s)
            count += 1
            return last << Self.shift | (chunks[last].count - 1)
        }
    }
}
