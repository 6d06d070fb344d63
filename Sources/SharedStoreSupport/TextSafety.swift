/// Text that came from data or from the command line, made safe to print for people.
///
/// Stored values and arguments reach terminals: an escape sequence in a title could retitle the
/// window or clear the screen of whoever lists it, and a newline could forge a table row or an
/// `error:` line (invariant 8). Control characters — C0 (U+0000–U+001F), DEL (U+007F) and C1
/// (U+0080–U+009F) — are shown visibly escaped instead: `\n`, `\r`, `\t`, `\e`, else `\u{…}`.
/// JSON output needs none of this: its encoder escapes control characters itself.
public enum TextSafety {
    /// True for C0, DEL and C1 control characters.
    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    /// True when `text` holds a control character (`allowingTab`: other than a tab).
    public static func containsControl(_ text: String, allowingTab: Bool = false) -> Bool {
        text.unicodeScalars.contains { isControl($0) && !(allowingTab && $0 == "\t") }
    }

    /// `text` with every control character escaped visibly; unchanged when it has none.
    ///
    /// For example: `visible("evil\u{1B}]0;x\u{07}")` is `evil\e]0;x\u{7}`.
    public static func visible(_ text: String) -> String {
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
