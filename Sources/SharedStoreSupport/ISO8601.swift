import Foundation

/// ISO 8601 UTC with milliseconds, the timestamp format of every JSON output.
package enum ISO8601 {
    /// `date` in UTC with milliseconds, rounded down: `2026-11-30T00:20:28.502Z`. A date beyond year
    /// ±200000, or not finite, prints as its seconds since 1970.
    package static func string(_ date: Date) -> String {
        guard let (parts, millis) = fields(date) else { return String(date.timeIntervalSince1970) }
        guard let year = fourDigitYear(parts) else { return spelled(parts, millis) }
        // The common form, 24 bytes written into the string's own storage (a list of a million
        // rows prints a date per row).
        return String(unsafeUninitializedCapacity: 24) { out in
            put(parts, year: year, millis: millis, into: out)
            return 24
        }
    }

    /// Appends `string(date)`'s bytes to `out`, the common form written in place.
    package static func write(_ date: Date, to out: inout [UInt8]) {
        guard let (parts, millis) = fields(date), let year = fourDigitYear(parts) else {
            out.append(contentsOf: string(date).utf8)
            return
        }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 24) { text in
            put(parts, year: year, millis: millis, into: text)
            out.append(contentsOf: UnsafeBufferPointer(text))
        }
    }

    /// The calendar fields of `date` in UTC and its milliseconds; nil beyond year ±200000 or not
    /// finite, where there is no calendar form worth printing.
    private static func fields(_ date: Date) -> (tm, Int64)? {
        let ms = (date.timeIntervalSince1970 * 1000).rounded(.down)
        guard ms.isFinite, abs(ms) < 6e18 / 1000 else { return nil }
        let seconds = Int64((ms / 1000).rounded(.down))
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        return (parts, Int64(ms) - seconds * 1000)
    }

    /// The year of `parts` when it has four digits (0 to 9999), the form written in place.
    private static func fourDigitYear(_ parts: tm) -> Int64? {
        let year = Int64(parts.tm_year) + 1900
        return (0...9999).contains(year) ? year : nil
    }

    /// `yyyy-MM-ddTHH:mm:ss.SSSZ` into the first 24 bytes of `out`.
    private static func put(_ parts: tm, year: Int64, millis: Int64, into out: UnsafeMutableBufferPointer<UInt8>) {
        func digits(_ v: Int64, _ width: Int, at start: Int) {
            Digits.write(v.magnitude, width: width, at: start, into: out)
        }
        digits(year, 4, at: 0)
        out[4] = 0x2D
        digits(Int64(parts.tm_mon) + 1, 2, at: 5)
        out[7] = 0x2D
        digits(Int64(parts.tm_mday), 2, at: 8)
        out[10] = 0x54
        digits(Int64(parts.tm_hour), 2, at: 11)
        out[13] = 0x3A
        digits(Int64(parts.tm_min), 2, at: 14)
        out[16] = 0x3A
        digits(Int64(parts.tm_sec), 2, at: 17)
        out[19] = 0x2E
        digits(millis, 3, at: 20)
        out[23] = 0x5A
    }

    /// Years before 0 or after 9999: a sign or a fifth digit as needed.
    private static func spelled(_ parts: tm, _ millis: Int64) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(26)
        func pad(_ v: Int64, _ n: Int) { appendDigits(v, minimumWidth: n, to: &out) }
        pad(Int64(parts.tm_year) + 1900, 4)
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
