import Foundation

/// The monotonic clock (CLOCK_MONOTONIC: system-wide, so comparable across processes).
package enum Monotonic {
    /// Seconds since an arbitrary fixed point.
    package static func seconds() -> Double {
        Double(nanoseconds()) / 1e9
    }

    /// Nanoseconds since an arbitrary fixed point.
    package static func nanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}
