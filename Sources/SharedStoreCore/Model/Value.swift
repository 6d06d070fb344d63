import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// An attribute value, as it crosses tasks and processes: Sendable, Hashable and Codable.
public enum Value: Sendable, Hashable, Codable, CustomStringConvertible {
    case null
    case string(String)
    case integer(Int64)
    case double(Double)
    case bool(Bool)
    case date(Date)
    case data(Data)
    case uuid(UUID)

    public var isNull: Bool { if case .null = self { return true } else { return false } }

    public var stringValue: String? { if case .string(let v) = self { return v } else { return nil } }
    public var integerValue: Int64? { if case .integer(let v) = self { return v } else { return nil } }
    public var boolValue: Bool? { if case .bool(let v) = self { return v } else { return nil } }
    public var doubleValue: Double? {
        switch self {
        case .double(let v): return v
        case .integer(let v): return Double(v)
        default: return nil
        }
    }
    public var dateValue: Date? { if case .date(let v) = self { return v } else { return nil } }
    public var dataValue: Data? { if case .data(let v) = self { return v } else { return nil } }
    public var uuidValue: UUID? { if case .uuid(let v) = self { return v } else { return nil } }

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
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(nilLiteral: ()) { self = .null }
}
