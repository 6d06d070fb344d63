import Foundation

/// ISO 8601 UTC with milliseconds, the timestamp format of every JSON output.
package enum ISO8601 {
    /// `date` in UTC with milliseconds, rounded down: `2026-11-30T00:20:28.502Z`. A date beyond year
    /// ±200000, or not finite, prints as its seconds since 1970.
    package static func string(_ date: Date) -> String {
        let ms = (date.timeIntervalSince1970 * 1000).rounded(.down)
        // Beyond year ±200000 (or not finite) there is no calendar form worth printing.
        guard ms.isFinite, abs(ms) < 6e18 / 1000 else { return String(date.timeIntervalSince1970) }
        let seconds = Int64((ms / 1000).rounded(.down))
        let millis = Int64(ms) - seconds * 1000
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        func pad(_ v: Int32, _ n: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, n - s.count)) + s
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(millis), 3))Z"
    }
}
