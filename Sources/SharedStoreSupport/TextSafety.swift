/// Text that came from data or from the command line, made safe to print for people.
///
/// Stored values and arguments reach terminals: an escape sequence in a title could retitle the
/// window or clear the screen of whoever lists it, and a newline could forge a table row or an
/// `error:` line (invariant 8). Control characters — C0 (U+0000–U+001F), DEL (U+007F) and C1
/// (U+0080–U+009F), the line and paragraph separators (U+2028, U+2029: a line break to
/// JavaScript and many viewers) and the bidirectional controls (U+202A–U+202E, U+2066–U+2069:
/// they reorder what follows, so a listed name can read as another) — are shown visibly escaped
/// instead: `\n`, `\r`, `\t`, `\e`, else `\u{…}`. JSON output escapes the same characters as
/// `\uXXXX` (``JSONValue``).
package enum TextSafety {
    /// True for C0, DEL and C1 control characters, U+2028, U+2029 and the bidi controls.
    package static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        let v = scalar.value
        if v < 0x20 || (0x7F...0x9F).contains(v) { return true }
        guard v >= 0x2028 else { return false }
        return (0x2028...0x202E).contains(v) || (0x2066...0x2069).contains(v)
    }

    /// True when `text` holds a control character (`allowingTab`: other than a tab).
    package static func containsControl(_ text: String, allowingTab: Bool = false) -> Bool {
        // Printable ASCII, the common case, is told by its bytes (no scalar decoding), read in
        // place: a byte at a time through the view's iterator costs several times more.
        func printable(_ b: UInt8) -> Bool { (b >= 0x20 && b < 0x7F) || (allowingTab && b == 9) }
        let ascii =
            text.utf8.withContiguousStorageIfAvailable { bytes in
                for b in bytes where !printable(b) { return false }
                return true
            } ?? text.utf8.allSatisfy(printable)
        if ascii { return false }
        return text.unicodeScalars.contains { isControl($0) && !(allowingTab && $0 == "\t") }
    }

    /// `text` with every control character escaped visibly; unchanged when it has none.
    ///
    /// For example: `visible("evil\u{1B}]0;x\u{07}")` is `evil\e]0;x\u{7}`.
    package static func visible(_ text: String) -> String {
        guard containsControl(text) else { return text }
        var out = ""
        out.unicodeScalars.reserveCapacity(text.unicodeScalars.count + 8)
        for s in text.unicodeScalars {
            guard isControl(s) else {
                out.unicodeScalars.append(s)
                continue
            }
            switch s {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{1B}": out += "\\e"
            default: out += "\\u{\(String(s.value, radix: 16))}"
            }
        }
        return out
    }
}
