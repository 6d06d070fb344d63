import Foundation

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

/// ISO 8601 UTC with milliseconds, the timestamp format of every JSON output.
public enum ISO8601 {
    public static func string(_ date: Date) -> String {
        let ms = (date.timeIntervalSince1970 * 1000).rounded(.down)
        // Beyond year ±200000 (or not finite) there is no calendar form worth printing.
        guard ms.isFinite, abs(ms) < 6e18 / 1000 else { return String(date.timeIntervalSince1970) }
        let seconds = Int64((ms / 1000).rounded(.down))
        let millis = Int64(ms) - seconds * 1000
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        func pad(_ v: Int32, _ n: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, n - s.count)) + s
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(millis), 3))Z"
    }
}
