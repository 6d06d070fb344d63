import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// What a record type stores, read from its `Codable` conformance by decoding one probe: each
/// property's stored name (its coding key), the Swift type it is decoded as, whether it is
/// optional, and which Swift property holds it (for typed keys).
///
/// The probe decoder hands every property a distinct value of the type asked (an enum backed by
/// a String or an Int gets its first case: it must be `CaseIterable`), so that the probe's
/// properties, read back by reflection, tell which Swift property each coding key fills.
struct RecordShape: Sendable {
    /// One decoded property, in the order the record's decoder asks for it.
    struct Property: Sendable {
        /// The stored name: the coding key's string value.
        let name: String
        /// How the Swift type is stored (nil: a to-one relationship, an ``ObjectID``).
        let type: AttributeType?
        /// Whether the decoder asked with `decodeIfPresent` (an optional property).
        let isOptional: Bool
        /// The Swift type, for messages.
        let swiftType: String
    }

    /// The properties, `id` excluded.
    let properties: [Property]
    /// Swift property name → stored name, for each property the probe could place.
    let storedNames: [String: String]

    /// The shape of `R`, made once per type and kept.
    static func of<R: Record>(_ type: R.Type) throws -> RecordShape {
        let key = ObjectIdentifier(type)
        if let known = cache.withLock({ $0[key] }) { return try known.get() }
        let made: Result<RecordShape, StoreError>
        do { made = .success(try make(R.self)) } catch { made = .failure(error) }
        cache.withLock { $0[key] = made }
        return try made.get()
    }

    private static let cache = Protected<[ObjectIdentifier: Result<RecordShape, StoreError>]>([:])

    private static func make<R: Record>(_ type: R.Type) throws(StoreError) -> RecordShape {
        let log = ProbeLog()
        let probe: R
        do {
            probe = try R(from: ProbeDecoder(log: log, depth: 0))
        } catch let e as StoreError {
            throw e
        } catch {
            throw StoreError(
                .invalidModel,
                "\(R.self) cannot be read by SharedStore: decoding it failed (\(error)); an enum property must be "
                    + "CaseIterable, or backed by a String or an Int")
        }
        let properties = log.properties.filter { $0.name != "id" }
        return RecordShape(properties: properties, storedNames: placeProperties(of: probe, log: log))
    }

    /// Swift property → stored name: a property named as its coding key, or one holding the value
    /// the probe gave exactly one coding key.
    private static func placeProperties(of probe: Any, log: ProbeLog) -> [String: String] {
        let keys = Set(log.properties.map(\.name))
        var names: [String: String] = [:]
        var unplaced: [(label: String, value: Value?)] = []
        for child in Mirror(reflecting: probe).children {
            guard let label = child.label else { continue }
            if keys.contains(label) { names[label] = label } else { unplaced.append((label, probeValue(child.value))) }
        }
        let claimed = Set(names.values)
        for (label, value) in unplaced {
            guard let value else { continue }
            let matches = log.sentinels.filter { $0.value == value && !claimed.contains($0.key) }
            if matches.count == 1, let key = matches.first?.key { names[label] = key }
        }
        return names
    }

    /// A probe property's value as stored (an optional unwrapped, an id by its key).
    private static func probeValue(_ any: Any) -> Value? {
        if let optional = any as? any OptionalProbe { return optional.wrappedAny.flatMap(probeValue) }
        if let id = any as? ObjectID { return .integer(id.primaryKey) }
        return (any as? any ValueConvertible)?.storedValue
    }

    /// The stored name of the property `keyPath` reads, or a reason it has none.
    func storedName<R>(_ keyPath: PartialKeyPath<R>, of type: R.Type) -> Result<String, StoreError> {
        let text = String(describing: keyPath)
        let prefix = "\\" + String(describing: R.self) + "."
        guard text.hasPrefix(prefix) else {
            return .failure(StoreError(.unknownProperty, "\(text) is not a key path of \(R.self)"))
        }
        let label = String(text.dropFirst(prefix.count))
        guard Model.isIdentifier(label) else {
            return .failure(
                StoreError(.unknownProperty, "\(text) is not one stored property of \(R.self) (a typed key names one)"))
        }
        guard let name = storedNames[label] else {
            return .failure(
                StoreError(
                    .unknownProperty,
                    "\(R.self).\(label) has no stored name SharedStore can tell (it is not coded, or its coding key "
                        + "differs from its name and its type is Bool): use Key(\"name\")"))
        }
        return .success(name)
    }
}

/// Optional, seen through `Any`.
private protocol OptionalProbe { var wrappedAny: Any? { get } }
extension Optional: OptionalProbe {
    fileprivate var wrappedAny: Any? { self.map { $0 as Any } }
}

/// What a probe decoding asked for.
private final class ProbeLog {
    var properties: [RecordShape.Property] = []
    /// The value each coding key was given.
    var sentinels: [(key: String, value: Value)] = []
    var next: Int64 = 0
}

/// A decoder that gives every value asked a distinct value of its type, and logs the top-level
/// keyed properties (`depth` 0).
private struct ProbeDecoder: Decoder {
    let log: ProbeLog
    let depth: Int
    var codingPath: [CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(ProbeKeyed<Key>(log: log, depth: depth))
    }
    func unkeyedContainer() throws -> UnkeyedDecodingContainer { ProbeUnkeyed() }
    func singleValueContainer() throws -> SingleValueDecodingContainer { ProbeSingle(log: log, depth: depth) }
}

/// A nested list: empty.
private struct ProbeUnkeyed: UnkeyedDecodingContainer {
    var codingPath: [CodingKey] = []
    var count: Int? { 0 }
    var isAtEnd: Bool { true }
    var currentIndex: Int { 0 }
    private func end() -> DecodingError {
        DecodingError.valueNotFound(Any.self, .init(codingPath: [], debugDescription: "probe list is empty"))
    }
    mutating func decodeNil() throws -> Bool { true }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { throw end() }
    mutating func nestedContainer<N: CodingKey>(keyedBy type: N.Type) throws -> KeyedDecodingContainer<N> {
        throw end()
    }
    mutating func nestedUnkeyedContainer() throws -> UnkeyedDecodingContainer { throw end() }
    mutating func superDecoder() throws -> Decoder { throw end() }
}

/// One value of a nested type.
private struct ProbeSingle: SingleValueDecodingContainer {
    let log: ProbeLog
    let depth: Int
    var codingPath: [CodingKey] = []
    func decodeNil() -> Bool { false }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try probeValue(T.self, log: log, depth: depth + 1).0 }
}

/// The top-level (or nested) properties of a probe.
private struct ProbeKeyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let log: ProbeLog
    let depth: Int
    var codingPath: [CodingKey] = []
    var allKeys: [Key] { [] }
    func contains(_ key: Key) -> Bool { true }
    func decodeNil(forKey key: Key) throws -> Bool { false }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try value(T.self, key, optional: false) }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        try value(T.self, key, optional: true)
    }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try value(type, key, optional: false) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try value(type, key, optional: false) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try value(type, key, optional: false) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try value(type, key, optional: false) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try value(type, key, optional: false) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try value(type, key, optional: false) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try value(type, key, optional: false) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try value(type, key, optional: false) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try value(type, key, optional: false) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try value(type, key, optional: false) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try value(type, key, optional: false) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try value(type, key, optional: false) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try value(type, key, optional: false) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try value(type, key, optional: false) }
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try value(type, key, optional: true) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        try value(type, key, optional: true)
    }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
        try value(type, key, optional: true)
    }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try value(type, key, optional: true) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? {
        try value(type, key, optional: true)
    }

    func nestedContainer<N: CodingKey>(keyedBy type: N.Type, forKey key: Key) throws -> KeyedDecodingContainer<N> {
        KeyedDecodingContainer(ProbeKeyed<N>(log: log, depth: depth + 1))
    }
    func nestedUnkeyedContainer(forKey key: Key) throws -> UnkeyedDecodingContainer { ProbeUnkeyed() }
    func superDecoder() throws -> Decoder { ProbeDecoder(log: log, depth: depth + 1) }
    func superDecoder(forKey key: Key) throws -> Decoder { ProbeDecoder(log: log, depth: depth + 1) }

    /// A distinct value of `T` for `key`; at the top level the property is logged.
    private func value<T: Decodable>(_ type: T.Type, _ key: Key, optional: Bool) throws -> T {
        let (v, stored, attribute) = try probeValue(T.self, log: log, depth: depth + 1)
        if depth == 0 {
            log.properties.append(
                RecordShape.Property(
                    name: key.stringValue, type: attribute, isOptional: optional, swiftType: String(describing: T.self))
            )
            if let stored { log.sentinels.append((key.stringValue, stored)) }
        }
        return v
    }
}

/// A distinct value of `T`, its stored value (nil when there is none to compare), and how `T` is
/// stored (nil for an ``ObjectID``).
private func probeValue<T: Decodable>(_ type: T.Type, log: ProbeLog, depth: Int) throws -> (T, Value?, AttributeType?) {
    log.next += 1
    let n = log.next
    if let (v, t) = scalar(n, T.self) {
        guard let typed = v as? T else { throw probeFailure(T.self) }
        return (typed, (v as? any ValueConvertible)?.storedValue, t)
    }
    if T.self == ObjectID.self {
        guard let id = ObjectID(storeID: UUID(), entity: "Probe", primaryKey: n) as? T else {
            throw probeFailure(T.self)
        }
        return (id, .integer(n), nil)
    }
    if let cases = T.self as? any CaseIterable.Type, let first = firstCase(cases) as? T {
        return (first, (first as? any ValueConvertible)?.storedValue, rawType(T.self) ?? .json)
    }
    guard depth < 16 else { throw probeFailure(T.self) }
    return (try T(from: ProbeDecoder(log: log, depth: depth)), nil, rawType(T.self) ?? .json)
}

private func probeFailure(_ type: Any.Type) -> StoreError {
    StoreError(.invalidModel, "SharedStore cannot make a probe value of \(type)")
}

private func firstCase<C: CaseIterable>(_ type: C.Type) -> Any? { C.allCases.first }

/// How an enum backed by a String or an Int is stored, or nil.
private func rawType(_ type: Any.Type) -> AttributeType? {
    guard let raw = type as? any RawRepresentable.Type else { return nil }
    func of<E: RawRepresentable>(_ e: E.Type) -> Any.Type { E.RawValue.self }
    let r = of(raw)
    if r == String.self { return .string }
    if r == Int.self || r == Int64.self || r == Int32.self { return .integer }
    return nil
}

/// A distinct value for the `n`th probe value of a scalar type, and its attribute type.
private func scalar<T>(_ n: Int64, _ type: T.Type) -> (Any, AttributeType)? {
    let small = UInt8(truncatingIfNeeded: n)
    switch type {
    case is String.Type: return ("\u{1}probe \(n)", .string)
    case is Bool.Type: return (true, .bool)
    case is Double.Type: return (Double(n) + 0.25, .double)
    case is Float.Type: return (Float(n) + 0.25, .double)
    case is Int.Type: return (Int(truncatingIfNeeded: n), .integer)
    case is Int64.Type: return (n, .integer)
    case is Int32.Type: return (Int32(truncatingIfNeeded: n), .integer)
    case is Int16.Type: return (Int16(truncatingIfNeeded: n), .integer)
    case is Int8.Type: return (Int8(truncatingIfNeeded: n), .integer)
    case is UInt.Type: return (UInt(truncatingIfNeeded: n), .integer)
    case is UInt64.Type: return (UInt64(truncatingIfNeeded: n), .integer)
    case is UInt32.Type: return (UInt32(truncatingIfNeeded: n), .integer)
    case is UInt16.Type: return (UInt16(truncatingIfNeeded: n), .integer)
    case is UInt8.Type: return (small, .integer)
    case is Date.Type: return (Date(timeIntervalSince1970: Double(n) + 0.25), .date)
    case is Data.Type: return (Data([small, 0x9e]), .data)
    case is UUID.Type:
        let high = UInt8(truncatingIfNeeded: n >> 8)
        return (UUID(uuid: (small, 0x9e, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, high)), .uuid)
    case is URL.Type: return (URL(string: "probe://\(n)") ?? URL(fileURLWithPath: "/"), .url)
    case is Decimal.Type: return (Decimal(n) + Decimal(sign: .plus, exponent: -2, significand: 25), .decimal)
    default: return nil
    }
}
