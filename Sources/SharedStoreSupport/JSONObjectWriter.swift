import Foundation

/// Writes one JSON object field by field straight into a byte buffer: what a stream of a million
/// rows writes without building a ``JSONValue`` for each. The text is the one the same fields
/// make as a ``JSONValue/object(_:)``: keys in the order written, strings escaped alike.
///
/// For example:
///
/// ```swift
/// var line: [UInt8] = []
/// JSONObjectWriter.append(to: &line) { o in
///     o.string("id", "Article/1")
///     o.bool("isRead", false)
/// }
/// // line holds {"id":"Article/1","isRead":false}
/// ```
public struct JSONObjectWriter {
    private var bytes: [UInt8] = []
    private var empty = true

    private init() {}

    /// Appends the object whose fields `body` writes to `bytes`. The buffer moves into the writer
    /// and back, never copied; when `body` throws, `bytes` is left as it was.
    public static func append(to bytes: inout [UInt8], _ body: (inout JSONObjectWriter) throws -> Void) rethrows {
        let start = bytes.count
        var object = JSONObjectWriter()
        swap(&object.bytes, &bytes)
        defer { swap(&object.bytes, &bytes) }
        object.bytes.append(0x7B)
        do {
            try body(&object)
        } catch {
            object.bytes.removeSubrange(start...)
            throw error
        }
        object.bytes.append(0x7D)
    }

    private mutating func key(_ key: StaticString) {
        if !empty { bytes.append(0x2C) }
        empty = false
        // A key is the program's own text: its bytes go in at once when they need no escape.
        key.withUTF8Buffer { k in
            if !JSONValue.mayNeedEscape(k) {
                bytes.append(0x22)
                bytes.append(contentsOf: k)
                bytes.append(0x22)
            } else {
                JSONValue.writeString(key.description, to: &bytes)
            }
        }
        bytes.append(0x3A)
    }

    /// `"key":"01a22cbe-af4e-790c-abfd-e3e1560052d5"`: the UUID in lowercase, written in place.
    public mutating func uuid(_ key: StaticString, _ id: UUID) {
        self.key(key)
        bytes.append(0x22)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: UUIDText.count) { text in
            UUIDText.write(id, into: text)
            bytes.append(contentsOf: UnsafeBufferPointer(text))
        }
        bytes.append(0x22)
    }

    /// `"key":"text"`.
    public mutating func string(_ key: StaticString, _ text: String) {
        self.key(key)
        JSONValue.writeString(text, to: &bytes)
    }

    /// `"key":"text"` of UTF-8 bytes from outside (a column read in place), written as the
    /// `String` version writes `String(decoding: text, as: UTF8.self)`.
    package mutating func string(_ key: StaticString, utf8 text: UnsafeBufferPointer<UInt8>) {
        self.key(key)
        JSONValue.writeString(utf8: text, to: &bytes)
    }

    /// `"key":"text"`, or `"key":null` for nil.
    public mutating func string(_ key: StaticString, _ text: String?) {
        guard let text else { return null(key) }
        string(key, text)
    }

    /// `"key":true` or `"key":false`.
    public mutating func bool(_ key: StaticString, _ value: Bool) {
        self.key(key)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    /// `"key":null`.
    public mutating func null(_ key: StaticString) {
        self.key(key)
        bytes.append(contentsOf: "null".utf8)
    }

    /// `"key":"2026-11-30T00:20:28.502Z"`: the date as ``JSONValue`` outputs print it, written in place.
    public mutating func date(_ key: StaticString, _ date: Date) {
        self.key(key)
        bytes.append(0x22)
        // The ISO form holds nothing to escape (digits, signs, letters; a far date: its seconds).
        ISO8601.write(date, to: &bytes)
        bytes.append(0x22)
    }

    /// `"key":` and any JSON value.
    public mutating func value(_ key: StaticString, _ value: JSONValue) {
        self.key(key)
        value.write(to: &bytes)
    }
}
