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

    /// CPU seconds this process used so far, on all its threads (CLOCK_PROCESS_CPUTIME_ID): what
    /// work costs, whichever core did it.
    package static func processCPUSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
