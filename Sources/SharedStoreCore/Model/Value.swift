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
