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
        var out: [UInt8] = []
        write(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the value's JSON, on one line, to `out`.
    public func write(to out: inout String) { out += serialized }

    /// Appends the value's JSON, on one line, to `out` as UTF-8: what a stream of a million lines
    /// writes (bytes appended in runs, no string to grow character by character).
    public func write(to out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n):
            if n.isFinite, n == n.rounded(), abs(n) < 1e15 {
                Self.writeInteger(Int64(n), to: &out)
            } else if n.isFinite {
                out.append(contentsOf: String(n).utf8)
            } else {
                out.append(contentsOf: "null".utf8)
            }
        case .string(let s): Self.writeString(s, to: &out)
        case .array(let items):
            out.append(0x5B)
            for (i, v) in items.enumerated() {
                if i > 0 { out.append(0x2C) }
                v.write(to: &out)
            }
            out.append(0x5D)
        case .object(let pairs):
            out.append(0x7B)
            for (i, (k, v)) in pairs.enumerated() {
                if i > 0 { out.append(0x2C) }
                Self.writeString(k, to: &out)
                out.append(0x3A)
                v.write(to: &out)
            }
            out.append(0x7D)
        }
    }

    /// The decimal digits of `n`.
    static func writeInteger(_ n: Int64, to out: inout [UInt8]) { appendDigits(n, minimumWidth: 1, to: &out) }

    @inline(__always) static func mayNeedEscape(_ byte: UInt8) -> Bool {
        byte == 0x22 || byte == 0x5C || byte < 0x20 || byte == 0x7F || byte == 0xC2 || byte == 0xE2
    }

    /// Whether any byte of `bytes` may need an escape: eight bytes at a time while they are
    /// plain ASCII (the last few padded with spaces to a word), then byte by byte from the first
    /// word that holds anything else.
    static func mayNeedEscape(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let raw = UnsafeRawBufferPointer(bytes)
        var i = 0
        while i &+ 8 <= raw.count {
            if wordMayNeedEscape(raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)) {
                return anyNeedsEscape(raw, from: i)
            }
            i &+= 8
        }
        guard i < raw.count else { return false }
        var tail: UInt64 = 0x2020_2020_2020_2020
        withUnsafeMutableBytes(of: &tail) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[i...])) }
        return wordMayNeedEscape(tail) && anyNeedsEscape(raw, from: i)
    }

    /// The byte-by-byte check of `raw` from `start`.
    private static func anyNeedsEscape(_ raw: UnsafeRawBufferPointer, from start: Int) -> Bool {
        for b in raw[start...] where mayNeedEscape(b) { return true }
        return false
    }

    /// Whether a word of eight bytes holds a byte below 0x20, a quote, a backslash, DEL or any
    /// byte of 0x80 and up (then its bytes are checked one by one). Each test is exact about
    /// whether such a byte exists: a borrow can mark only a byte above one that matched.
    @inline(__always) static func wordMayNeedEscape(_ w: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let high: UInt64 = 0x8080_8080_8080_8080
        @inline(__always) func hasZero(_ v: UInt64) -> Bool { (v &- ones) & ~v & high != 0 }
        let below20 = (w &- ones &* 0x20) & ~w & high != 0
        return w & high != 0 || below20 || hasZero(w ^ (ones &* 0x22)) || hasZero(w ^ (ones &* 0x5C))
            || hasZero(w ^ (ones &* 0x7F))
    }

    static func writeString(_ s: String, to out: inout [UInt8]) {
        out.append(0x22)
        // Most strings need no escape: their bytes go in at once (a list of a million rows writes
        // several strings per row). 0x7F, 0xC2 and 0xE2 start DEL, C1 controls and
        // U+2028/U+2029/bidi controls: those are looked at scalar by scalar, so that no line of
        // output holds a line break or reorders a terminal's text.
        var s = s
        let whole = s.withUTF8 { bytes -> Bool in
            guard !mayNeedEscape(bytes) else { return false }
            out.append(contentsOf: bytes)
            return true
        }
        if !whole {
            for u in s.unicodeScalars {
                switch u {
                case "\"": out.append(contentsOf: #"\""#.utf8)
                case "\\": out.append(contentsOf: #"\\"#.utf8)
                case "\n": out.append(contentsOf: #"\n"#.utf8)
                case "\r": out.append(contentsOf: #"\r"#.utf8)
                case "\t": out.append(contentsOf: #"\t"#.utf8)
                case _ where TextSafety.isControl(u):
                    let hex = String(u.value, radix: 16)
                    out.append(contentsOf: ("\\u" + String(repeating: "0", count: 4 - hex.count) + hex).utf8)
                default: out.append(contentsOf: String(u).utf8)
                }
            }
        }
        out.append(0x22)
    }

    /// `bytes` (UTF-8 from outside, perhaps not valid) as a JSON string, exactly as
    /// ``writeString(_:to:)`` writes `String(decoding: bytes, as: UTF8.self)`: plain ASCII with
    /// nothing to escape goes in at once, anything else through that String.
    static func writeString(utf8 bytes: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        guard isPlainASCII(bytes) else { return writeString(String(decoding: bytes, as: UTF8.self), to: &out) }
        out.append(0x22)
        out.append(contentsOf: bytes)
        out.append(0x22)
    }

    /// Whether every byte of `bytes` is ASCII that needs no escape (eight bytes at a time, the
    /// last few padded with spaces to a word).
    static func isPlainASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let raw = UnsafeRawBufferPointer(bytes)
        var i = 0
        while i &+ 8 <= raw.count {
            if wordMayNeedEscape(raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)) { return false }
            i &+= 8
        }
        guard i < raw.count else { return true }
        var tail: UInt64 = 0x2020_2020_2020_2020
        withUnsafeMutableBytes(of: &tail) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[i...])) }
        return !wordMayNeedEscape(tail)
    }

    /// The value of the first `key` of an object; nil when there is none or this is not an object.
    public subscript(key: String) -> JSONValue? {
        if case .object(let pairs) = self { return pairs.first { $0.0 == key }?.1 }
        return nil
    }
}

/// Appends the decimal digits of `n` to `out`, zero-padded to `minimumWidth` (after a `-`): what
/// JSON numbers and ISO 8601 dates are written with, digit by digit.
func appendDigits(_ n: Int64, minimumWidth: Int, to out: inout [UInt8]) {
    if n < 0 { out.append(0x2D) }
    let width = max(Digits.count(n.magnitude), minimumWidth)
    let start = out.count
    out.append(contentsOf: repeatElement(0x30, count: width))
    out.withUnsafeMutableBufferPointer { Digits.write(n.magnitude, width: width, at: start, into: $0) }
}
