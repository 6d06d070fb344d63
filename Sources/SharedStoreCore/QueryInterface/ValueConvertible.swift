import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// A Swift value a condition can compare with directly (`Key("url") == url`): the standard
/// scalar types, `Date`, `Data`, `UUID`, `URL`, `Decimal`, ``Value``, and optionals of these.
/// An enum backed by a String or an Int joins with an empty conformance
/// (`extension Status: ValueConvertible {}`).
public protocol ValueConvertible: Sendable {
    /// The value as stored.
    var storedValue: Value { get }
}

extension Value: ValueConvertible { public var storedValue: Value { self } }
extension String: ValueConvertible { public var storedValue: Value { .string(self) } }
extension Int: ValueConvertible { public var storedValue: Value { .integer(Int64(self)) } }
extension Int64: ValueConvertible { public var storedValue: Value { .integer(self) } }
extension Int32: ValueConvertible { public var storedValue: Value { .integer(Int64(self)) } }
extension Int16: ValueConvertible { public var storedValue: Value { .integer(Int64(self)) } }
extension Int8: ValueConvertible { public var storedValue: Value { .integer(Int64(self)) } }
extension UInt8: ValueConvertible { public var storedValue: Value { .integer(Int64(self)) } }
extension UInt16: ValueConvertible { public var storedValue: Value { .integer(Int64(self)) } }
extension UInt32: ValueConvertible { public var storedValue: Value { .integer(Int64(self)) } }
extension Double: ValueConvertible { public var storedValue: Value { .double(self) } }
extension Float: ValueConvertible { public var storedValue: Value { .double(Double(self)) } }
extension Bool: ValueConvertible { public var storedValue: Value { .bool(self) } }
extension Date: ValueConvertible { public var storedValue: Value { .date(self) } }
extension Data: ValueConvertible { public var storedValue: Value { .data(self) } }
extension UUID: ValueConvertible { public var storedValue: Value { .uuid(self) } }
extension URL: ValueConvertible { public var storedValue: Value { .string(absoluteString) } }
extension Decimal: ValueConvertible { public var storedValue: Value { .string(description) } }
extension Optional: ValueConvertible where Wrapped: ValueConvertible {
    /// The wrapped value's stored value, or ``Value/null`` for nil: `Key("note") == optionalText`
    /// becomes `IS NULL` when the optional is nil.
    public var storedValue: Value { self?.storedValue ?? .null }
}
extension RawRepresentable where Self: ValueConvertible, RawValue: ValueConvertible {
    /// The raw value's stored value: an enum backed by a String is stored as its string.
    public var storedValue: Value { rawValue.storedValue }
}
