import Foundation

/// A JSON value with ordered object keys, written by hand so that output is compact, stable and
/// needs no generic encoder on hot paths.
public enum JSONValue: Sendable, Hashable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number: written as an integer when it is one below 10^15, `null` when not finite.
    case number(Double)
    /// A string: control characters are escaped (`\n`, `\r`, `\t`, and `\u` escapes for the other
    /// C0, DEL, C1, line and paragraph separators and bidi controls), so one value never spans
    /// lines or reorders a terminal's text.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object, its keys in the order given (and written in that order).
    case object([(String, JSONValue)])

    /// Whether two values serialize to the same text (so key order matters).
    public static func == (a: JSONValue, b: JSONValue) -> Bool { a.serialized == b.serialized }
    /// Hashes the serialized text, as == compares it.
    public func hash(into hasher: inout Hasher) { hasher.combine(serialized) }

    /// One line of JSON.
    public var serialized: String {
        var out = ""
        write(to: &out)
        return out
    }

    /// Appends the value's JSON, on one line, to `out`.
    public func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let n):
            if n.isFinite, n == n.rounded(), abs(n) < 1e15 {
                out += String(Int64(n))
            } else if n.isFinite {
                out += String(n)
            } else {
                out += "null"
            }
        case .string(let s): Self.writeString(s, to: &out)
        case .array(let items):
            out += "["
            for (i, v) in items.enumerated() {
                if i > 0 { out += "," }
                v.write(to: &out)
            }
            out += "]"
        case .object(let pairs):
            out += "{"
            for (i, (k, v)) in pairs.enumerated() {
                if i > 0 { out += "," }
                Self.writeString(k, to: &out)
                out += ":"
                v.write(to: &out)
            }
            out += "}"
        }
    }

    @inline(__always) static func mayNeedEscape(_ byte: UInt8) -> Bool {
        byte == 0x22 || byte == 0x5C || byte < 0x20 || byte == 0x7F || byte == 0xC2 || byte == 0xE2
    }

    static func writeString(_ s: String, to out: inout String) {
        out += "\""
        // Most strings need no escape: append them whole (a list of a million rows writes
        // several strings per row).
        // 0x7F, 0xC2 and 0xE2 start DEL, C1 controls and U+2028/U+2029/bidi controls: escaped
        // too, so that no line of output holds a line break or reorders a terminal's text.
        guard s.utf8.contains(where: Self.mayNeedEscape) else {
            out += s
            out += "\""
            return
        }
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where TextSafety.isControl(u):
                let hex = String(u.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(u)
            }
        }
        out += "\""
    }

    /// The value of the first `key` of an object; nil when there is none or this is not an object.
    public subscript(key: String) -> JSONValue? {
        if case .object(let pairs) = self { return pairs.first { $0.0 == key }?.1 }
        return nil
    }
}
