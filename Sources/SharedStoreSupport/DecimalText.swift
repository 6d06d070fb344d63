import Foundation

/// A decimal number's text, read strictly: `Decimal(string:)` alone reads the longest number at
/// the start and ignores the rest (`"1.5x"` is 1.5, `"1,5"` is 1, `"-"` and `"0x10"` are 0) and
/// rounds a number of more significant digits than its 128-bit significand holds, so a text it
/// accepts may read back as another number than the one written.
package enum DecimalText {
    /// The most significant digits a `Decimal` keeps exactly: 39 when they spell at most its
    /// largest significand, 2^128 - 1 (``largestSignificand``), 38 otherwise.
    package static let maxSignificantDigits = 39
    /// 2^128 - 1, the largest significand of a `Decimal`.
    static let largestSignificand = Array("340282366920938463463374607431768211455".utf8)

    /// The number `text` spells exactly — `[+-]digits[.digits][e[+-]digits]`, with at least one
    /// digit before or after the point, and no more digits from its first nonzero digit to its
    /// last than a significand holds (``maxSignificantDigits``) — or nil (also for a number out
    /// of `Decimal`'s range, such as `1e400`).
    package static func parse(_ text: String) -> Decimal? {
        guard isWellFormed(text) else { return nil }
        return Decimal(string: text, locale: Locale(identifier: "en_US_POSIX"))
    }

    /// Whether `text` has the grammar of ``parse(_:)`` and its digit limit.
    package static func isWellFormed(_ text: String) -> Bool {
        var bytes = Array(text.utf8)[...]
        if let first = bytes.first, first == UInt8(ascii: "+") || first == UInt8(ascii: "-") {
            bytes = bytes.dropFirst()
        }
        let mantissaEnd = bytes.firstIndex { $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") } ?? bytes.endIndex
        var digits: [UInt8] = []
        var points = 0
        for b in bytes[..<mantissaEnd] {
            if b == UInt8(ascii: ".") {
                points += 1
            } else if isDigit(b) {
                digits.append(b)
            } else {
                return false
            }
        }
        guard points <= 1, !digits.isEmpty else { return false }
        if mantissaEnd < bytes.endIndex {
            var exponent = bytes[(mantissaEnd + 1)...]
            if let sign = exponent.first, sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") {
                exponent = exponent.dropFirst()
            }
            guard !exponent.isEmpty, exponent.allSatisfy(isDigit) else { return false }
        }
        guard let firstNonzero = digits.firstIndex(where: { $0 != UInt8(ascii: "0") }),
            let lastNonzero = digits.lastIndex(where: { $0 != UInt8(ascii: "0") })
        else { return true }
        let significant = digits[firstNonzero...lastNonzero]
        if significant.count < maxSignificantDigits { return true }
        guard significant.count == maxSignificantDigits else { return false }
        // Digits of one length compare as their numbers do.
        return !largestSignificand.lexicographicallyPrecedes(significant)
    }

    private static func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
}
