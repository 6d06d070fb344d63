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
    /// How many objects' reads a generation keeps before it becomes the older one (and the older
    /// one is forgotten): a context keeps at least this many of its latest reads, at most twice
    /// as many. Unbounded unless a context sets it (``ObjectContext/maximumReadsKept``): a bound
    /// spares a fetch of new objects a table and a memory that only grow, and costs a fetch of
    /// objects read before but no longer kept (each kept anew, and freed when its generation
    /// goes); README has the figures.
    var capacity = ReadSet.defaultCapacity
    /// ``capacity`` unless a context sets another: every read kept until a rollback.
    static let defaultCapacity = Int.max

    /// The reads kept since the last turn, and those kept before it: an object is looked up in
    /// the younger first.
    private var young = Generation()
    private var old = Generation()

    /// A generation of reads.
    private struct Generation {
        /// The snapshots kept, in the order their objects were first read, in chunks of a fixed
        /// size (a growing set never copies what it holds); `positions` finds them. Kept apart
        /// from the tables so that a table grows by small entries (a key and a position), not by
        /// whole snapshots moved on every resize.
        var kept = Chunks()
        /// Entity, then primary key → position in `kept`.
        var positions: [String: KeyTable] = [:]

        func read(_ id: ObjectID) -> Snapshot? {
            guard let i = positions[id.entity]?[id.primaryKey] else { return nil }
            let s = kept[i]
            return s.id == id ? s : nil
        }

        /// The snapshot this generation holds of `s`'s object at its version, found in `table`
        /// (this generation's table of its entity).
        func first(of s: UnsafePointer<Snapshot>, in table: KeyTable) -> Snapshot? {
            guard let position = table[s.pointee.id.primaryKey],
                kept.holds(position, version: s.pointee.version, id: s.pointee.id)
            else { return nil }
            return kept[position]
        }
    }

    /// How many snapshots both generations hold.
    var count: Int { young.kept.count + old.kept.count }

    /// The last snapshot read of `id` (of two reads at one version, the first).
    subscript(id: ObjectID) -> Snapshot? { read(id) }

    /// The last snapshot read of `id`.
    func read(_ id: ObjectID) -> Snapshot? { young.read(id) ?? old.read(id) }

    /// Records a fetch's result (or one object read).
    mutating func record(_ batch: [Snapshot]) {
        guard let entity = batch.first?.id.entity else { return }
        // A fetch reads one entity: its objects go into one table, looked up once.
        // Each snapshot read where it lies: `for s in batch`, `batch[i]` and a borrowed parameter
        // all copied each one (its six references retained, then released): 300 instructions a
        // row read again, more than the rest of keeping it.
        var table = young.positions.removeValue(forKey: entity) ?? KeyTable()
        let (older, oldReads) = (old.positions[entity], old)
        var others = false
        Self.forEachInPlace(batch) { s in
            guard s.pointee.id.entity == entity else {
                others = true
                return
            }
            // An object the older generation holds at this version is read again now: its first
            // read at that version moves up to the younger (kept as long as this read is).
            if let older, table[s.pointee.id.primaryKey] == nil, let first = oldReads.first(of: s, in: older) {
                withUnsafePointer(to: first) { Self.keep($0, in: &table, &young.kept) }
            } else {
                Self.keep(s, in: &table, &young.kept)
            }
        }
        young.positions[entity] = table
        if others {
            Self.forEachInPlace(batch) { s in
                guard s.pointee.id.entity != entity else { return }
                Self.keep(s, in: &young.positions[s.pointee.id.entity, default: KeyTable()], &young.kept)
            }
        }
        turnIfFull()
    }

    /// Makes the younger generation the older one, forgetting the older, once it holds
    /// ``capacity`` reads.
    private mutating func turnIfFull() {
        guard young.kept.count >= max(1, capacity) else { return }
        old = young
        young = Generation()
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
        if !young.positions.isEmpty || !old.positions.isEmpty {
            for id in touched { forget(id) }
            for id in inserted { forget(id) }
        }
        Self.forEachInPlace(wrote) { s in
            Self.keep(s, in: &young.positions[s.pointee.id.entity, default: KeyTable()], &young.kept)
        }
        turnIfFull()
    }

    /// Forgets the read of `id` in both generations.
    private mutating func forget(_ id: ObjectID) {
        if !young.positions.isEmpty { young.positions[id.entity]?.remove(id.primaryKey) }
        if !old.positions.isEmpty { old.positions[id.entity]?.remove(id.primaryKey) }
    }

    /// Forgets every read.
    mutating func reset() {
        young = Generation()
        old = Generation()
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
