import Foundation
import SharedStoreSupport
import Synchronization

/// The global ids objects get at insert (issue 14): the same object is named by the same UUID on
/// every machine a mirror reaches, whatever its primary key there.
///
/// An id is a version 7 UUID (RFC 9562): 48 bits of Unix time in milliseconds, then a
/// process-wide random prefix and a counter. Ids made close in time sort close together (the
/// mirror's `ss_mirror_ids` grows at its end, as primary keys do; a random UUID would land
/// anywhere in it), and the ids of a batch follow each other, which history writes in one byte
/// each. The counter makes every id of a process distinct; the random prefix, drawn once per
/// process from the system's generator, makes two processes' ids distinct (74 random bits: a
/// collision is as likely as two random version 4 UUIDs'). There is no unique index on them:
/// every save of the app would pay for it.
package enum GlobalID {
    private static let prefix: (UInt16, UInt64) = {
        var g = SystemRandomNumberGenerator()
        return (UInt16.random(in: 0...UInt16.max, using: &g), g.next())
    }()
    private static let counter = Atomic<UInt64>(0)

    /// A new id.
    package static func make() -> UUID {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let ms = UInt64(max(0, now.tv_sec)) &* 1000 &+ UInt64(max(0, now.tv_nsec)) / 1_000_000
        let n = counter.add(1, ordering: .relaxed).newValue
        let (a, b) = prefix
        let low = b &+ n
        func byte(_ v: UInt64, _ shift: UInt64) -> UInt8 { UInt8(truncatingIfNeeded: v >> shift) }
        return UUID(
            uuid: (
                byte(ms, 40), byte(ms, 32), byte(ms, 24), byte(ms, 16), byte(ms, 8), byte(ms, 0),
                0x70 | UInt8(truncatingIfNeeded: a >> 8) & 0x0F, UInt8(truncatingIfNeeded: a),
                0x80 | byte(low, 56) & 0x3F, byte(low, 48), byte(low, 40), byte(low, 32), byte(low, 24),
                byte(low, 16), byte(low, 8), byte(low, 0)
            ))
    }

    /// The UUID of 16 stored bytes (nil for anything else: a damaged or foreign row).
    package static func uuid(_ bytes: [UInt8]) -> UUID? {
        guard bytes.count == 16 else { return nil }
        let b = bytes
        return UUID(
            uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])
        )
    }

    /// The 16 bytes of `id` as stored.
    package static func bytes(_ id: UUID) -> [UInt8] {
        withUnsafeBytes(of: id.uuid) { Array($0) }
    }

    /// Whether `a` sorts before `b` byte by byte (the winner of a collision is the smaller).
    package static func precedes(_ a: UUID, _ b: UUID) -> Bool {
        bytes(a).lexicographicallyPrecedes(bytes(b))
    }

    /// The id after `id` in the order a process makes them within one millisecond: the same
    /// first 8 bytes, the last 8 (big-endian) one more (nil when they would wrap).
    package static func successor(of id: UUID) -> UUID? {
        var u = id.uuid
        let low = withUnsafeBytes(of: &u) { raw in
            raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self).bigEndian
        }
        guard low < UInt64.max else { return nil }
        withUnsafeMutableBytes(of: &u) { raw in
            raw.storeBytes(of: (low + 1).bigEndian, toByteOffset: 8, as: UInt64.self)
        }
        return UUID(uuid: u)
    }

    /// `id` as lowercase text (`01a22cbe-af4e-790c-abfd-e3e1560052d5`), without Foundation's
    /// formatting and a lowercasing copy (a mirror writes two per object it uploads).
    package static func text(_ id: UUID) -> String {
        String(unsafeUninitializedCapacity: UUIDText.count) { out in
            UUIDText.write(id, into: out)
            return UUIDText.count
        }
    }
}
