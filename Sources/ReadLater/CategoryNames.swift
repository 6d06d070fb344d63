import Foundation
import SharedStore

/// The categories a share-batch has met, by name: each distinct name is looked up (or made) once,
/// and a line finds its category by its name's bytes, before any String is made of them.
///
/// Names are told apart by their bytes, as the store compares them (a String would take "é" and
/// "e\u{301}" for one name). A small table of the names met last, indexed by a cheap hash of the
/// bytes and compared byte for byte, answers most lines; the others go to a dictionary keyed by
/// the stored value. Names whose hashes collide only take turns in the table: a file crafted to
/// collide costs what a dictionary lookup costs, never more.
struct CategoryNames {
    /// 4,096 slots: a hundred names fill a fortieth of them, so that few share one.
    private static let bits = 12
    private static let slots = 1 << bits
    private var names = [[UInt8]](repeating: [], count: slots)
    private var ids = [ObjectID?](repeating: nil, count: slots)
    private var byValue: [Value: ObjectID] = [:]

    /// The category named by `bytes` (UTF-8, checked): one met before, or what `make` returns
    /// for a name never met.
    mutating func id(of bytes: ArraySlice<UInt8>, make: (String) throws -> ObjectID) rethrows -> ObjectID {
        let slot = Self.slot(of: bytes)
        if let id = ids[slot], Self.same(names[slot], bytes) { return id }
        let name = String(decoding: bytes, as: UTF8.self)
        let id: ObjectID
        if let known = byValue[.string(name)] {
            id = known
        } else {
            id = try make(name)
            byValue[.string(name)] = id
        }
        names[slot] = Array(bytes)
        ids[slot] = id
        return id
    }

    /// The table's slot for a name: FNV-1a, its top bits taken after a multiply (its low bits
    /// alone tell names that differ in their last character apart poorly). A few instructions a
    /// byte, where the dictionary's SipHash costs hundreds a name.
    static func slot(of bytes: ArraySlice<UInt8>) -> Int {
        var hash: UInt32 = 2_166_136_261
        for byte in bytes { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return Int((hash &* 0x9E37_79B1) >> (32 - bits))
    }

    /// Whether `a` and `b` hold the same bytes (compared as memory, not element by element).
    private static func same(_ a: [UInt8], _ b: ArraySlice<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { a in
            b.withUnsafeBytes { b in
                guard let x = a.baseAddress, let y = b.baseAddress else { return true }
                return memcmp(x, y, a.count) == 0
            }
        }
    }
}
