/// Decimal digits written in place, the last first: what JSON numbers, ISO 8601 dates and object
/// ids are printed with (a list prints several per row; interpolation or a reversed slice cost
/// an allocation each).
package enum Digits {
    /// How many decimal digits `n` has (1 for 0).
    package static func count(_ n: UInt64) -> Int {
        var count = 1
        var rest = n / 10
        while rest > 0 {
            count += 1
            rest /= 10
        }
        return count
    }

    /// Writes `n` as exactly `width` digits (zero-padded; `width` at least ``count(_:)``) into
    /// `out` from `start`.
    package static func write(_ n: UInt64, width: Int, at start: Int, into out: UnsafeMutableBufferPointer<UInt8>) {
        var value = n
        for i in stride(from: start + width - 1, through: start, by: -1) {
            out[i] = UInt8(truncatingIfNeeded: value % 10) + 0x30
            value /= 10
        }
    }
}
