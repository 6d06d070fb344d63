import Foundation
import SharedStoreSQLite
import SharedStoreSupport

extension AttributeType {
    /// The article of the type's name in a message ("an integer", "a string").
    var article: String { self == .integer ? "an" : "a" }
}

/// How values of each attribute type are stored in SQLite (column types, values to SQL and back);
/// ``QueryBuilder`` makes conditions SQL.
enum SQLMapping {
    static func quote(_ identifier: String) -> String { "\"\(identifier)\"" }

    static func columnType(_ t: AttributeType) -> String {
        switch t {
        case .string, .uuid, .url, .decimal, .json: return "TEXT"
        case .integer, .bool: return "INTEGER"
        case .double, .date: return "REAL"
        case .data: return "BLOB"
        }
    }

    /// The stored form of `value` for property `property` of `object`, of type `type`.
    ///
    /// - Parameter object: the object the value is for, as messages name it; nil for a value
    ///   that belongs to none yet (a migration's default: the message names the column alone).
    /// - Throws: `.validation` when the value is of another type, naming the object, the
    ///   property and the type (``ValidationFailure/Rule/type(_:)``).
    static func sqlValue(_ value: Value, _ type: AttributeType, object: @autoclosure () -> String?, property: String)
        throws -> SQLValue
    {
        func fail(_ what: String) -> StoreError {
            let object = object()
            return .validation(
                (object.map { "\($0).\(property)" } ?? property) + " takes " + what, object: object ?? "",
                property: property, rule: .type(type))
        }
        switch (value, type) {
        case (.null, _): return .null
        case (.string(let s), .string): return .text(s)
        case (.integer(let i), .integer): return .integer(i)
        case (.integer(let i), .double): return .double(Double(i))
        case (.double(let d), .double): return .double(d)
        case (.bool(let b), .bool): return .integer(b ? 1 : 0)
        case (.date(let d), .date): return .double(d.timeIntervalSince1970)
        case (.data(let d), .data): return .blob([UInt8](d))
        case (.uuid(let u), .uuid): return .text(u.uuidString.lowercased())
        case (.string(let s), .url):
            guard let url = URL(string: s), url.scheme != nil else {
                throw fail("an absolute URL, not '\(TextSafety.visible(s))'")
            }
            return .text(url.absoluteString)
        case (.string(let s), .decimal):
            guard DecimalText.parse(s) != nil else {
                throw fail(
                    "a decimal number (digits, a point, an exponent; no more significant digits than a Decimal "
                        + "holds), not '\(TextSafety.visible(String(s.prefix(60))))'")
            }
            return .text(s)
        case (.string(let s), .json):
            guard (try? JSONSerialization.jsonObject(with: Data(s.utf8), options: [.fragmentsAllowed])) != nil else {
                throw fail("JSON text, not '\(TextSafety.visible(String(s.prefix(60))))'")
            }
            return .text(s)
        default:
            throw fail("\(type.article) \(type.rawValue), not \(value)")
        }
    }

    /// What a read of a column of `type` gives after `value` (made by
    /// ``sqlValue(_:_:object:property:)``) was written to it, as ``value(_:_:_:)`` decodes it; nil
    /// for a value of no known stored form. SQLite keeps a NaN as NULL, and -0.0 as 0 in a REAL
    /// column (it reads back as +0.0).
    static func storedValue(_ value: SQLValue, _ type: AttributeType) -> Value? {
        switch (value, type) {
        case (.null, _): return .null
        case (.text(let s), .string), (.text(let s), .url), (.text(let s), .decimal), (.text(let s), .json):
            return .string(s)
        case (.integer(let i), .integer): return .integer(i)
        case (.integer(let i), .double): return .double(Double(i))
        case (.double(let d), .double): return d.isNaN ? .null : .double(d == 0 ? 0 : d)
        case (.integer(let i), .bool): return .bool(i != 0)
        case (.double(let d), .date): return d.isNaN ? .null : .date(Date(timeIntervalSince1970: d == 0 ? 0 : d))
        case (.blob(let b), .data): return .data(Data(b))
        case (.text(let s), .uuid): return UUID(uuidString: s).map(Value.uuid)
        default: return nil
        }
    }

    /// Column `i` as a value of `type`. One call to SQLite for most values: a NULL is told from
    /// text by the missing pointer, and from a number only when the number reads as zero.
    static func value(_ row: SQLiteRow, _ i: Int32, _ type: AttributeType) -> Value {
        switch type {
        case .string, .url, .decimal, .json: return row.textOrNil(i).map(Value.string) ?? .null
        case .integer:
            let v = row.int64(i)
            return v == 0 && row.isNull(i) ? .null : .integer(v)
        case .double:
            let d = row.double(i)
            return d == 0 && row.isNull(i) ? .null : .double(d)
        case .bool:
            let v = row.int64(i)
            return v == 0 && row.isNull(i) ? .null : .bool(v != 0)
        case .date:
            let d = row.double(i)
            return d == 0 && row.isNull(i) ? .null : .date(Date(timeIntervalSince1970: d))
        case .data: return row.isNull(i) ? .null : .data(Data(row.blob(i)))
        case .uuid: return row.textOrNil(i).flatMap { UUID(uuidString: $0) }.map(Value.uuid) ?? .null
        }
    }
}
