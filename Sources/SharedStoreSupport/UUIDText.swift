import Foundation

/// A UUID as lowercase text (`01a22cbe-af4e-790c-abfd-e3e1560052d5`), written in place: what
/// Foundation's `uuidString` gives lowercased, without its formatting or a lowercasing copy.
package enum UUIDText {
    /// The length of the text: 32 hex digits and four dashes.
    package static let count = 36

    /// Writes `id`'s text into the first ``count`` bytes of `out`.
    package static func write(_ id: UUID, into out: UnsafeMutableBufferPointer<UInt8>) {
        // A nibble's digit by arithmetic: no table to allocate (a list prints an id per row).
        func hex(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 0x30 + nibble : 0x57 + nibble }
        withUnsafeBytes(of: id.uuid) { raw in
            var j = 0
            for (i, b) in raw.enumerated() {
                if i == 4 || i == 6 || i == 8 || i == 10 {
                    out[j] = UInt8(ascii: "-")
                    j += 1
                }
                out[j] = hex(b >> 4)
                out[j + 1] = hex(b & 0x0F)
                j += 2
            }
        }
    }
}
