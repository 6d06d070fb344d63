/// Why a text is not JSON, and where: the byte offset of the problem.
public struct JSONParseError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The byte offset (in UTF-8) where the text stops being JSON.
    public let offset: Int
    /// What was found there.
    public let reason: String

    /// The problem and where it is, as an error message says it.
    public var description: String { "not JSON at byte \(offset): \(reason)" }
}

extension JSONValue {
    /// How deeply arrays and objects may nest: deeper text is refused, never followed down the
    /// stack (a row from a server may be anything).
    public static let maximumDepth = 256

    /// Parses one JSON value (RFC 8259), with nothing but whitespace around it: objects keep
    /// their keys in the text's order, numbers are `Double`s, and strings unescape `\uXXXX`,
    /// surrogate pairs included.
    ///
    /// Refused, with the byte offset: anything RFC 8259 does not allow (a trailing comma, a
    /// leading zero, a control character inside a string, a lone surrogate), a key given twice
    /// in one object (it could mean either value), and nesting deeper than ``maximumDepth``.
    ///
    /// Written by hand: the mirror reads a payload per server row, and Foundation's parser with
    /// the casts its `Any` values need cost more than the rest of reading one.
    public init(parsing text: String) throws(JSONParseError) {
        var text = text
        let parsed: Result<JSONValue, JSONParseError> = text.withUTF8 { bytes in
            var parser = JSONParser(bytes)
            return Result { () throws(JSONParseError) in try parser.document() }
        }
        self = try parsed.get()
    }
}

/// A recursive-descent parser over the UTF-8 of a string (valid UTF-8, as every Swift string is).
struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    var at = 0
    var depth = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    func fail(_ reason: String) -> JSONParseError { JSONParseError(offset: at, reason: reason) }

    mutating func document() throws(JSONParseError) -> JSONValue {
        let v = try value()
        skipSpace()
        guard at == bytes.count else { throw fail("text after the value") }
        return v
    }

    mutating func skipSpace() {
        while at < bytes.count {
            switch bytes[at] {
            case 0x20, 0x09, 0x0A, 0x0D: at += 1
            default: return
            }
        }
    }

    mutating func value() throws(JSONParseError) -> JSONValue {
        skipSpace()
        guard at < bytes.count else { throw fail("the text ends where a value should be") }
        switch bytes[at] {
        case 0x7B: return try object()
        case 0x5B: return try array()
        case 0x22: return .string(try string())
        case 0x74: return try literal("true", .bool(true))
        case 0x66: return try literal("false", .bool(false))
        case 0x6E: return try literal("null", .null)
        case 0x2D, 0x30...0x39: return .number(try number())
        default: throw fail("no value starts with \(shown(bytes[at]))")
        }
    }

    mutating func literal(_ word: StaticString, _ v: JSONValue) throws(JSONParseError) -> JSONValue {
        let expected = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        guard bytes.count - at >= expected.count, bytes[at..<at + expected.count].elementsEqual(expected) else {
            throw fail("not '\(word)'")
        }
        at += expected.count
        return v
    }

    mutating func enter() throws(JSONParseError) {
        guard depth < JSONValue.maximumDepth else { throw fail("nested deeper than \(JSONValue.maximumDepth)") }
        depth += 1
        at += 1
    }

    mutating func object() throws(JSONParseError) -> JSONValue {
        var pairs: [(String, JSONValue)] = []
        // The keys so far, once there are more than a few (a row with 100,000 keys is read in
        // linear time, not quadratic).
        var keys = Set<String>()
        guard try enterContainer(0x7D) else { return .object(pairs) }
        repeat {
            skipSpace()
            guard at < bytes.count, bytes[at] == 0x22 else { throw fail("an object's key must be a string") }
            let keyAt = at
            let key = try string()
            // A scan while there are few keys (cheaper than hashing), a set after.
            let repeated: Bool
            if pairs.count < 16 {
                repeated = pairs.contains { $0.0 == key }
            } else {
                if keys.isEmpty { keys = Set(pairs.map(\.0)) }
                repeated = !keys.insert(key).inserted
            }
            if repeated {
                let shown = key.count > 40 ? key.prefix(40) + "…" : Substring(key)
                throw JSONParseError(
                    offset: keyAt,
                    reason:
                        "key '\(TextSafety.visible(String(shown)))' given twice (as written or in an equivalent form)")
            }
            skipSpace()
            guard at < bytes.count, bytes[at] == 0x3A else { throw fail("':' expected after a key") }
            at += 1
            pairs.append((key, try value()))
        } while try more(0x7D, "an object", "'}'")
        return .object(pairs)
    }

    mutating func array() throws(JSONParseError) -> JSONValue {
        var items: [JSONValue] = []
        guard try enterContainer(0x5D) else { return .array(items) }
        repeat {
            items.append(try value())
        } while try more(0x5D, "an array", "']'")
        return .array(items)
    }

    /// Enters an array or object at its opening bracket; false when it is empty (its `close`
    /// read too).
    mutating func enterContainer(_ close: UInt8) throws(JSONParseError) -> Bool {
        try enter()
        skipSpace()
        guard at < bytes.count, bytes[at] == close else { return true }
        at += 1
        depth -= 1
        return false
    }

    /// After an item of an array or object: true at a comma (another item follows), false at
    /// `close` (read, and the container left).
    mutating func more(_ close: UInt8, _ inside: String, _ shown: String) throws(JSONParseError) -> Bool {
        skipSpace()
        guard at < bytes.count else { throw fail("the text ends inside \(inside)") }
        if bytes[at] == 0x2C {
            at += 1
            return true
        }
        guard bytes[at] == close else { throw fail("',' or \(shown) expected") }
        at += 1
        depth -= 1
        return false
    }

    /// A string at `at` (its opening quote).
    mutating func string() throws(JSONParseError) -> String {
        at += 1
        let start = at
        // Most strings have no escape: their bytes are the string.
        while at < bytes.count {
            let b = bytes[at]
            if b == 0x22 {
                let s = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<at]), as: UTF8.self)
                at += 1
                return s
            }
            if b == 0x5C { break }
            guard b >= 0x20 else { throw fail("a control character inside a string") }
            at += 1
        }
        var out = Array(UnsafeBufferPointer(rebasing: bytes[start..<at]))
        while at < bytes.count {
            let b = bytes[at]
            switch b {
            case 0x22:
                at += 1
                return String(decoding: out, as: UTF8.self)
            case 0x5C:
                at += 1
                guard at < bytes.count else { break }
                let e = bytes[at]
                at += 1
                switch e {
                case 0x22, 0x5C, 0x2F: out.append(e)
                case 0x62: out.append(0x08)
                case 0x66: out.append(0x0C)
                case 0x6E: out.append(0x0A)
                case 0x72: out.append(0x0D)
                case 0x74: out.append(0x09)
                case 0x75: appendScalar(try escapedScalar(), to: &out)
                default:
                    at -= 1
                    throw fail("unknown escape after '\\': \(shown(e))")
                }
            default:
                guard b >= 0x20 else { throw fail("a control character inside a string") }
                out.append(b)
                at += 1
            }
        }
        throw fail("the text ends inside a string")
    }

    /// The scalar of a `\u` escape (its `u` read), joining a surrogate pair.
    mutating func escapedScalar() throws(JSONParseError) -> Unicode.Scalar {
        let high = try hex4()
        if high < 0xD800 || high > 0xDFFF {
            // Not a surrogate: every other value below 0x10000 is a scalar.
            return Unicode.Scalar(UInt32(high)) ?? "\u{FFFD}"
        }
        guard high <= 0xDBFF, bytes.count - at >= 6, bytes[at] == 0x5C, bytes[at + 1] == 0x75 else {
            throw fail("a lone surrogate in a \\u escape")
        }
        at += 2
        let low = try hex4()
        guard (0xDC00...0xDFFF).contains(low) else { throw fail("a lone surrogate in a \\u escape") }
        let value = 0x10000 + ((UInt32(high) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
        return Unicode.Scalar(value) ?? "\u{FFFD}"
    }

    /// Four hexadecimal digits.
    mutating func hex4() throws(JSONParseError) -> UInt16 {
        guard bytes.count - at >= 4 else { throw fail("a \\u escape needs four hexadecimal digits") }
        var v: UInt16 = 0
        for _ in 0..<4 {
            let b = bytes[at]
            let digit: UInt8
            switch b {
            case 0x30...0x39: digit = b - 0x30
            case 0x41...0x46: digit = b - 0x41 + 10
            case 0x61...0x66: digit = b - 0x61 + 10
            default: throw fail("a \\u escape needs four hexadecimal digits")
            }
            v = v << 4 | UInt16(digit)
            at += 1
        }
        return v
    }

    func appendScalar(_ s: Unicode.Scalar, to out: inout [UInt8]) {
        var text = ""
        text.unicodeScalars.append(s)
        out.append(contentsOf: text.utf8)
    }

    /// A byte as an error message may print it: printable ASCII quoted, anything else in hex.
    func shown(_ b: UInt8) -> String {
        (0x21...0x7E).contains(b) ? "'\(Unicode.Scalar(b))'" : "byte 0x" + String(b, radix: 16, uppercase: true)
    }

    /// A number: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    mutating func number() throws(JSONParseError) -> Double {
        let start = at
        if bytes[at] == 0x2D { at += 1 }
        guard at < bytes.count, isDigit(bytes[at]) else { throw fail("a digit expected") }
        if bytes[at] == 0x30 {
            at += 1
            if at < bytes.count, isDigit(bytes[at]) { throw fail("a number with a leading zero") }
        } else {
            digits()
        }
        if at < bytes.count, bytes[at] == 0x2E {
            at += 1
            guard at < bytes.count, isDigit(bytes[at]) else { throw fail("a digit expected after '.'") }
            digits()
        }
        if at < bytes.count, bytes[at] == 0x65 || bytes[at] == 0x45 {
            at += 1
            if at < bytes.count, bytes[at] == 0x2B || bytes[at] == 0x2D { at += 1 }
            guard at < bytes.count, isDigit(bytes[at]) else { throw fail("a digit expected in an exponent") }
            digits()
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<at]), as: UTF8.self)
        // The grammar above is a subset of what Double reads; out of range reads as ±infinity.
        guard let d = Double(text) else { throw JSONParseError(offset: start, reason: "an unreadable number") }
        return d
    }

    func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

    mutating func digits() {
        while at < bytes.count, isDigit(bytes[at]) { at += 1 }
    }
}
