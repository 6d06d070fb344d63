/// Primary keys to positions, for the read set: keys in blocks of 16 neighbours.
///
/// Rowids are mostly dense, and one fetch reads neighbours (a range of dates, a page of a list):
/// the keys of a block share one entry of the hash table and one cache line or two of positions,
/// so a fetch of 100 rows costs a handful of hash lookups, not 100 scattered ones (a sixth of such
/// a fetch, measured, went to looking up its objects one by one). Keys far apart cost a block
/// each: memory stays proportional to the keys held, at worst 16 slots per key.
struct KeyTable {
    private static let shift = 4
    private static let width = 1 << shift

    /// Block number (key >> shift) → where its slots start in `slots`.
    private var blocks: [Int64: Int] = [:]
    /// Position + 1 of each key; 0 is an empty slot.
    private var slots: [Int] = []
    /// The block found last, and where its slots start: neighbours come one after another.
    private var last: (block: Int64, start: Int)?
    /// How many keys are held.
    private(set) var count = 0

    /// The position of `key`, if it is held.
    subscript(key: Int64) -> Int? {
        let block = key >> Self.shift
        let start: Int
        if let last, last.block == block {
            start = last.start
        } else {
            guard let found = blocks[block] else { return nil }
            start = found
        }
        let p = slots[start + Self.offset(key)]
        return p == 0 ? nil : p - 1
    }

    /// The position of `key`; when it is not held, stores `next` for it and returns nil. (A
    /// position, not a closure that makes one: a closure holding the caller's snapshot made the
    /// caller copy it for every key, found or not.)
    mutating func find(_ key: Int64, orInsert next: Int) -> Int? {
        let block = key >> Self.shift
        let start: Int
        if let last, last.block == block {
            start = last.start
        } else if let found = blocks[block] {
            start = found
            last = (block, found)
        } else {
            start = slots.count
            slots.append(contentsOf: repeatElement(0, count: Self.width))
            blocks[block] = start
            last = (block, start)
        }
        let slot = start + Self.offset(key)
        let p = slots[slot]
        if p != 0 { return p - 1 }
        slots[slot] = next + 1
        count += 1
        return nil
    }

    /// Forgets `key` (nothing when it is not held).
    mutating func remove(_ key: Int64) {
        guard let start = blocks[key >> Self.shift] else { return }
        let slot = start + Self.offset(key)
        guard slots[slot] != 0 else { return }
        slots[slot] = 0
        count -= 1
    }

    /// Where `key` is in its block.
    private static func offset(_ key: Int64) -> Int { Int(truncatingIfNeeded: key & Int64(width - 1)) }
}
