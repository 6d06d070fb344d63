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
        let year = Int64(parts.tm_year) + 1900
        if (0...9999).contains(year) {
            // The common form, 24 bytes written in place (a list of a million rows prints a
            // date per row): no buffer but the string's own.
            return String(unsafeUninitializedCapacity: 24) { out in
                func put(_ v: Int64, _ width: Int, at start: Int) {
                    var v = v
                    for i in stride(from: start + width - 1, through: start, by: -1) {
                        out[i] = UInt8(truncatingIfNeeded: v % 10) + 0x30
                        v /= 10
                    }
                }
                put(year, 4, at: 0)
                out[4] = 0x2D
                put(Int64(parts.tm_mon) + 1, 2, at: 5)
                out[7] = 0x2D
                put(Int64(parts.tm_mday), 2, at: 8)
                out[10] = 0x54
                put(Int64(parts.tm_hour), 2, at: 11)
                out[13] = 0x3A
                put(Int64(parts.tm_min), 2, at: 14)
                out[16] = 0x3A
                put(Int64(parts.tm_sec), 2, at: 17)
                out[19] = 0x2E
                put(millis, 3, at: 20)
                out[23] = 0x5A
                return 24
            }
        }
        // Years before 0 or after 9999: digits into one buffer, a sign or a fifth digit as needed.
        var out: [UInt8] = []
        out.reserveCapacity(24)
        func pad(_ v: Int64, _ n: Int) { appendDigits(v, minimumWidth: n, to: &out) }
        pad(year, 4)
        out.append(0x2D)
        pad(Int64(parts.tm_mon) + 1, 2)
        out.append(0x2D)
        pad(Int64(parts.tm_mday), 2)
        out.append(0x54)
        pad(Int64(parts.tm_hour), 2)
        out.append(0x3A)
        pad(Int64(parts.tm_min), 2)
        out.append(0x3A)
        pad(Int64(parts.tm_sec), 2)
        out.append(0x2E)
        pad(millis, 3)
        out.append(0x5A)
        return String(decoding: out, as: UTF8.self)
    }
}
