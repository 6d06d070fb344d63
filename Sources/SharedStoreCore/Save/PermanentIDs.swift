/// The permanent id of each object a save inserted, by its temporary id, in the order of the
/// context's inserts.
///
/// A context hands out temporary keys in decreasing order, so the ids are found by bisection
/// over the keys, then compared whole: a save builds no hash table for its inserts (one cost a
/// single-insert save about 1,200 instructions, 3% of it). Ids appended out of that order are
/// searched one by one instead, so a lookup is never wrong, only slower.
struct PermanentIDs: Sendable, Hashable {
    private var pairs: [(temporary: ObjectID, permanent: ObjectID)] = []
    /// Whether every key appended is below the one before it (bisection holds).
    private var decreasing = true

    init() {}

    init(capacity: Int) { pairs.reserveCapacity(capacity) }

    var isEmpty: Bool { pairs.isEmpty }
    var count: Int { pairs.count }

    /// Records that the object inserted as `temporary` is stored as `permanent`.
    mutating func append(_ temporary: ObjectID, _ permanent: ObjectID) {
        if let last = pairs.last, last.temporary.primaryKey <= temporary.primaryKey { decreasing = false }
        pairs.append((temporary, permanent))
    }

    /// The permanent id of the object inserted as `temporary`; nil when the save did not insert it.
    subscript(temporary: ObjectID) -> ObjectID? {
        position(temporary).map { pairs[$0].permanent }
    }

    /// The permanent id of each inserted object, in the order of the inserts.
    var permanent: some Sequence<ObjectID> { pairs.lazy.map(\.permanent) }

    /// The ids as a table, temporary to permanent.
    var dictionary: [ObjectID: ObjectID] {
        var table: [ObjectID: ObjectID] = [:]
        table.reserveCapacity(pairs.count)
        // An id given twice (never, from a context) answers as ``subscript(_:)`` does: the first.
        for (t, p) in pairs where table[t] == nil { table[t] = p }
        return table
    }

    private func position(_ id: ObjectID) -> Int? {
        guard decreasing else { return pairs.firstIndex { $0.temporary == id } }
        let i = ObjectID.position(of: id, among: pairs.count) { pairs[$0].temporary.primaryKey }
        return i < pairs.count && pairs[i].temporary == id ? i : nil
    }

    static func == (a: PermanentIDs, b: PermanentIDs) -> Bool {
        a.pairs.count == b.pairs.count
            && zip(a.pairs, b.pairs).allSatisfy { $0.temporary == $1.temporary && $0.permanent == $1.permanent }
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(pairs.count)
        for (t, p) in pairs {
            hasher.combine(t)
            hasher.combine(p)
        }
    }
}

extension ObjectID {
    /// Where `id`'s key is, or would go, among `count` ids whose keys decrease (`keyAt` gives the
    /// key at a place), found by bisection: the first place whose key is not above `id`'s. The
    /// caller compares the whole id there.
    static func position(of id: ObjectID, among count: Int, _ keyAt: (Int) -> Int64) -> Int {
        var low = 0
        var high = count
        while low < high {
            let middle = low + (high - low) / 2
            if keyAt(middle) > id.primaryKey { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
