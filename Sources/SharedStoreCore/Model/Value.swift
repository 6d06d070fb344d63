import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// An attribute value, as it crosses tasks and processes: Sendable, Hashable and Codable.
public enum Value: Sendable, Hashable, Codable, CustomStringConvertible {
    /// No value: an optional attribute left empty (SQL NULL).
    case null
    /// A string; also the stored form of `url`, `decimal` and `json` attributes.
    case string(String)
    /// A 64-bit integer.
    case integer(Int64)
    /// A double; an attribute of type `double` also takes an ``integer(_:)``.
    case double(Double)
    /// A boolean.
    case bool(Bool)
    /// A date, stored as seconds since 1970.
    case date(Date)
    /// Bytes.
    case data(Data)
    /// A UUID.
    case uuid(UUID)

    /// Whether two values are the same stored value. Strings are equal when their Unicode scalars
    /// are, as the store compares them (Swift's `==` on `String` also takes canonically
    /// equivalent forms, `"é"` and `"e\u{301}"`, as equal; the store keeps them apart, and so
    /// does a value: saving one over the other is a change).
    public static func == (a: Value, b: Value) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case (.string(let x), .string(let y)): return Self.sameBytes(x, y)
        case (.integer(let x), .integer(let y)): return x == y
        case (.double(let x), .double(let y)): return x == y
        case (.bool(let x), .bool(let y)): return x == y
        case (.date(let x), .date(let y)): return x == y
        case (.data(let x), .data(let y)): return x == y
        case (.uuid(let x), .uuid(let y)): return x == y
        default: return false
        }
    }

    /// Whether two strings hold the same UTF-8 bytes (one comparison of memory).
    static func sameBytes(_ a: String, _ b: String) -> Bool {
        var (a, b) = (a, b)
        return a.withUTF8 { x in
            b.withUTF8 { y in
                guard x.count == y.count, let p = x.baseAddress, let q = y.baseAddress else {
                    return x.count == y.count
                }
                return memcmp(p, q, x.count) == 0
            }
        }
    }

    /// Hashes the case and its value (a string's UTF-8 bytes, consistent with ``==(_:_:)``).
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0 as UInt8)
        case .string(var v):
            hasher.combine(1 as UInt8)
            hasher.combine(v.utf8.count)
            v.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        case .integer(let v):
            hasher.combine(2 as UInt8)
            hasher.combine(v)
        case .double(let v):
            hasher.combine(3 as UInt8)
            hasher.combine(v)
        case .bool(let v):
            hasher.combine(4 as UInt8)
            hasher.combine(v)
        case .date(let v):
            hasher.combine(5 as UInt8)
            hasher.combine(v)
        case .data(let v):
            hasher.combine(6 as UInt8)
            hasher.combine(v)
        case .uuid(let v):
            hasher.combine(7 as UInt8)
            hasher.combine(v)
        }
    }

    /// Whether the value is ``null``.
    public var isNull: Bool { if case .null = self { return true } else { return false } }

    /// The string, or nil for any other case.
    public var stringValue: String? { if case .string(let v) = self { return v } else { return nil } }
    /// The integer, or nil for any other case.
    public var integerValue: Int64? { if case .integer(let v) = self { return v } else { return nil } }
    /// The boolean, or nil for any other case.
    public var boolValue: Bool? { if case .bool(let v) = self { return v } else { return nil } }
    /// The number as a double (an ``integer(_:)`` converted), or nil for any other case.
    public var doubleValue: Double? {
        switch self {
        case .double(let v): return v
        case .integer(let v): return Double(v)
        default: return nil
        }
    }
    /// The date, or nil for any other case.
    public var dateValue: Date? { if case .date(let v) = self { return v } else { return nil } }
    /// The bytes, or nil for any other case.
    public var dataValue: Data? { if case .data(let v) = self { return v } else { return nil } }
    /// The UUID, or nil for any other case.
    public var uuidValue: UUID? { if case .uuid(let v) = self { return v } else { return nil } }

    /// The value for people: `nil`, a string in quotes, a date in ISO 8601, data as its size.
    public var description: String {
        switch self {
        case .null: return "nil"
        case .string(let v): return "\"\(v)\""
        case .integer(let v): return String(v)
        case .double(let v): return String(v)
        case .bool(let v): return String(v)
        case .date(let v): return ISO8601.string(v)
        case .data(let v): return "<\(v.count) bytes>"
        case .uuid(let v): return v.uuidString.lowercased()
        }
    }

    /// A fixed, single-line text of the value, stored with the model (in a kept count's
    /// condition): exact for every type, strings escaped as JSON.
    var canonicalText: String {
        switch self {
        case .null: return "nil"
        case .string(let v): return JSONValue.string(v).serialized
        case .integer(let v): return String(v)
        case .double(let v): return "double(\(v))"
        case .bool(let v): return String(v)
        case .date(let v): return "date(\(v.timeIntervalSinceReferenceDate))"
        case .data(let v): return "data(\(v.base64EncodedString()))"
        case .uuid(let v): return "uuid(\(v.uuidString.lowercased()))"
        }
    }

    /// The value as plain JSON (dates as ISO 8601 strings, data as base64).
    public var jsonValue: JSONValue {
        switch self {
        case .null: return .null
        case .string(let v): return .string(v)
        case .integer(let v): return .number(Double(v))
        case .double(let v): return .number(v)
        case .bool(let v): return .bool(v)
        case .date(let v): return .string(ISO8601.string(v))
        case .data(let v): return .string(v.base64EncodedString())
        case .uuid(let v): return .string(v.uuidString.lowercased())
        }
    }
}

extension JSONObjectWriter {
    /// `"key":` and `value` as its ``Value/jsonValue`` prints, strings and dates written in place.
    public mutating func field(_ key: StaticString, _ value: Value) {
        switch value {
        case .null: null(key)
        case .string(let v): string(key, v)
        case .bool(let v): bool(key, v)
        case .date(let v): date(key, v)
        case .integer, .double, .data, .uuid: self.value(key, value.jsonValue)
        }
    }
}

extension Value: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByNilLiteral
{
    /// `"text"` is ``string(_:)``.
    public init(stringLiteral value: String) { self = .string(value) }
    /// `42` is ``integer(_:)``.
    public init(integerLiteral value: Int64) { self = .integer(value) }
    /// `4.5` is ``double(_:)``.
    public init(floatLiteral value: Double) { self = .double(value) }
    /// `true` is ``bool(_:)``.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// `nil` is ``null``: in a condition, `Key("note") == nil` becomes `IS NULL`.
    public init(nilLiteral: ()) { self = .null }
}
