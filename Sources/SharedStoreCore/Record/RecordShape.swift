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
    /// The coding keys the record decodes (`id` included).
    let keys: Set<String>
    /// The probes (of the record type), and which coding key holds each property's values across
    /// them: a key path is read on each probe and its values name the key. Booleans get a
    /// different pattern of values in each probe, so that every coded property of a scalar type
    /// has values of its own.
    let probes: [any Sendable]
    let signatures: [String: String]

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
        let (first, log) = try probe(R.self, round: 0)
        var probes = [first]
        var logs = [log]
        // Enough rounds for every boolean (numbered from 1) to have its own pattern of bits.
        // Numbered from 1 in enough rounds that no boolean is true (or false) in every probe: a
        // boolean that is not coded keeps one value in all of them, and matches none.
        let rounds = max(2, Int.bitWidth - (log.bools + 1).leadingZeroBitCount)
        for round in 1..<rounds {
            let (p, l) = try probe(R.self, round: round)
            probes.append(p)
            logs.append(l)
        }
        var counts: [String: Int] = [:]
        var owners: [String: String] = [:]
        for (i, sentinel) in log.sentinels.enumerated() {
            let values = logs.compactMap { $0.sentinels.indices.contains(i) ? $0.sentinels[i].value : nil }
            guard values.count == logs.count else { continue }
            let signature = Self.signature(values)
            counts[signature, default: 0] += 1
            owners[signature] = sentinel.key
        }
        // A key read twice (into two properties) is one attribute.
        var seen = Set<String>()
        let properties = log.properties.filter { $0.name != "id" && seen.insert($0.name).inserted }
        return RecordShape(
            properties: properties, keys: Set(log.properties.map(\.name)), probes: probes,
            signatures: owners.filter { counts[$0.key] == 1 })
    }

    /// The values a property holds across the probes, as one text (a dictionary key of plain
    /// strings: no generic key type to set up at a process's start).
    static func signature(_ values: [Value]) -> String {
        var text = ""
        for v in values {
            switch v {
            case .string(let s): text += "s" + s
            case .integer(let i): text += "i" + String(i)
            case .double(let d): text += "d" + String(d.bitPattern)
            case .bool(let b): text += b ? "t" : "f"
            case .date(let d): text += "t" + String(d.timeIntervalSince1970.bitPattern)
            case .data(let d): text += "b" + d.map { String($0) }.joined(separator: ",")
            case .uuid(let u): text += "u" + u.uuidString
            case .null: text += "n"
            }
            text += "\u{0}"
        }
        return text
    }

    /// A probe of `R` (round `round`: which bit of its number each boolean gets) and what
    /// decoding it asked for.
    static func probe<R: Record>(_ type: R.Type, round: Int = 0) throws(StoreError) -> (R, ProbeLog) {
        let log = ProbeLog()
        log.round = round
        do {
            return (try R(from: ProbeDecoder(log: log, depth: 0)), log)
        } catch let e as StoreError {
            throw e
        } catch {
            throw StoreError(
                .invalidModel,
                "\(R.self) cannot be read by SharedStore: \(describe(error))")
        }
    }

    /// A probe property's value as stored (an optional unwrapped, an id by its key), for the
    /// scalar types the probe gives distinct values. Concrete casts only: a cast to a protocol
    /// makes the runtime scan every conformance of the process the first time (milliseconds, at
    /// every process's start).
    private static func probeValue(_ any: Any) -> Value? {
        switch any {
        case let v as String: return .string(v)
        case let v as String?: return v.map(Value.string)
        case let v as Int: return .integer(Int64(v))
        case let v as Int?: return v.map { .integer(Int64($0)) }
        case let v as Int64: return .integer(v)
        case let v as Int64?: return v.map(Value.integer)
        case let v as Double: return .double(v)
        case let v as Double?: return v.map(Value.double)
        case let v as Date: return .date(v)
        case let v as Date?: return v.map(Value.date)
        case let v as UUID: return .uuid(v)
        case let v as UUID?: return v.map(Value.uuid)
        case let v as Data: return .data(v)
        case let v as Data?: return v.map(Value.data)
        case let v as ObjectID: return .integer(v.primaryKey)
        case let v as ObjectID?: return v.map { .integer($0.primaryKey) }
        case let v as Bool: return .bool(v)
        case let v as Bool?: return v.map(Value.bool)
        default: return nil
        }
    }

    /// The stored name of the property `keyPath` reads, or a reason it has none.
    func storedName<R: Record>(_ keyPath: PartialKeyPath<R>, of type: R.Type) -> Result<String, StoreError> {
        func refuse(_ why: String) -> Result<String, StoreError> {
            .failure(StoreError(.unknownProperty, "\(keyPath.debugDescription) \(why)"))
        }
        let isClass = R.self is AnyClass
        // A computed property of a struct has no offset.
        if !isClass, MemoryLayout<R>.offset(of: keyPath) == nil {
            let text = keyPath.debugDescription
            guard text.contains("<computed") else {
                return refuse("is not one stored, coded property of \(R.self) (a typed key names one)")
            }
            let valueType = _typeName(Swift.type(of: keyPath).valueType, qualified: false)
            return .failure(
                StoreError(
                    .unknownProperty,
                    "a typed key of \(R.self) names a property reached through accessors (of type \(valueType): a "
                        + "computed property, a property wrapper or a property with observers), not one stored, coded "
                        + "property: use Key(\"name\")"))
        }
        // A class's key path may subscript or unwrap, and its properties may observe writes: only
        // a path to one property, named in its text, is read, and none is written.
        var label: String?
        if isClass {
            guard let l = Self.singleLabel(keyPath) else {
                return refuse("is not one property of \(R.self) (a typed key names one)")
            }
            label = l
        } else if let written = Self.storedNameByWriting(keyPath) {
            return written
        }
        // Read only (a `let`, or a class's property): its Swift name must be its coding key, and
        // what it holds in the probes must be that key's alone.
        guard let name = label ?? Self.singleLabel(keyPath), keys.contains(name) else {
            return refuse(
                "cannot be written, and its name is not one of \(R.self)'s coding keys: make it a `var` of a "
                    + "struct, or use Key(\"name\")")
        }
        var signature: [Value] = []
        for case let p as R in probes {
            guard let v = Self.probeValue(p[keyPath: keyPath]) else { break }
            signature.append(v)
        }
        if signature.count == probes.count, !probes.isEmpty {
            guard signatures[Self.signature(signature)] == name else {
                return refuse("holds another coding key's values than '\(name)': make it a `var`, or use Key(\"name\")")
            }
            return .success(name)
        }
        // Not comparable by value: safe only when the key of its name was decoded as its own type
        // and no other key has that type.
        let swiftType = properties.first { $0.name == name }?.swiftType
        var own = _typeName(Swift.type(of: keyPath).valueType, qualified: false)
        if own.hasPrefix("Optional<"), own.hasSuffix(">") { own = String(own.dropFirst("Optional<".count).dropLast()) }
        guard swiftType == own, properties.filter({ $0.swiftType == swiftType }).count == 1 else {
            return refuse(
                "cannot be told from another property of its type without writing it: make it a `var` of a struct, "
                    + "or use Key(\"name\")")
        }
        return .success(name)
    }

    /// The property a key path to one property names (`\\Article.title` → `title`), from its text;
    /// nil for a path of several parts, a subscript or an unwrap.
    static func singleLabel<R>(_ keyPath: PartialKeyPath<R>) -> String? {
        let text = keyPath.debugDescription
        let prefix = "\\" + _typeName(R.self, qualified: false) + "."
        guard text.hasPrefix(prefix) else { return nil }
        let label = String(text.dropFirst(prefix.count))
        return Model.isIdentifier(label) ? label : nil
    }
}

/// What a probe decoding asked for.
final class ProbeLog {
    var properties: [RecordShape.Property] = []
    /// The value each coding key was given.
    var sentinels: [(key: String, value: Value)] = []
    var next: Int64 = 0
    /// Which bit of its number each boolean gets in this probe, and how many were given.
    var round = 0
    var bools = 0
    /// Set when making a value to write through a key path (lists get an element).
    var writing = false
    /// Whether a keyed or unkeyed container was made since it was last cleared.
    var structured = false
    /// Whether an optional was decoded since it was last cleared (a wrapper of an optional).
    var sawOptional = false
    /// The stored value and type of the last scalar given (what an optional decoded with
    /// `decode(T?.self, forKey:)` wraps).
    var inner: (Value?, AttributeType?)?
}

/// An error of a probe decoding, in words.
private func describe(_ error: any Error) -> String {
    if let e = error as? StoreError { return e.message }
    if case DecodingError.dataCorrupted(let context) = error {
        return "its decoder refused a value SharedStoreCore gave it (\(context.debugDescription)): a record whose "
            + "init(from:) refuses some values of its properties' types cannot be read by a types-first model or a "
            + "typed key; use Key(\"name\") and an entity model"
    }
    return "\(error)"
}

/// A decoder that gives every value asked a distinct value of its type, and logs the top-level
/// keyed properties (`depth` 0).
struct ProbeDecoder: Decoder {
    let log: ProbeLog
    let depth: Int
    var codingPath: [CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        log.structured = true
        return KeyedDecodingContainer(ProbeKeyed<Key>(log: log, depth: depth))
    }
    func unkeyedContainer() throws -> UnkeyedDecodingContainer {
        log.structured = true
        return ProbeUnkeyed(log: log, depth: depth)
    }
    func singleValueContainer() throws -> SingleValueDecodingContainer { ProbeSingle(log: log, depth: depth) }
}

/// A nested list: empty.
private struct ProbeUnkeyed: UnkeyedDecodingContainer {
    let log: ProbeLog
    let depth: Int
    var codingPath: [CodingKey] = []
    /// Empty, but for the values a typed key writes: one element, so that it differs.
    private var left: Int
    init(log: ProbeLog, depth: Int) {
        self.log = log
        self.depth = depth
        left = log.writing && depth < 16 ? 1 : 0
    }
    var count: Int? { left }
    var isAtEnd: Bool { left == 0 }
    var currentIndex: Int { 0 }
    private func end() -> DecodingError {
        DecodingError.valueNotFound(Any.self, .init(codingPath: [], debugDescription: "probe list is empty"))
    }
    mutating func decodeNil() throws -> Bool { left == 0 }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        guard left > 0 else { throw end() }
        left -= 1
        return try probeValue(T.self, log: log, depth: depth + 1).0
    }
    mutating func nestedContainer<N: CodingKey>(keyedBy type: N.Type) throws -> KeyedDecodingContainer<N> {
        guard left > 0 else { throw end() }
        left -= 1
        return KeyedDecodingContainer(ProbeKeyed<N>(log: log, depth: depth + 1))
    }
    mutating func nestedUnkeyedContainer() throws -> UnkeyedDecodingContainer {
        guard left > 0 else { throw end() }
        left -= 1
        return ProbeUnkeyed(log: log, depth: depth + 1)
    }
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
    /// No keys (a dictionary is empty), but for a value written through a typed key: one.
    var allKeys: [Key] { log.writing && depth > 0 ? [Key(stringValue: "probe")].compactMap { $0 } : [] }
    func contains(_ key: Key) -> Bool { true }
    func decodeNil(forKey key: Key) throws -> Bool { false }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try value(T.self, key, optional: false) }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        // Inside a nested value an optional is absent: a type that holds an optional of itself
        // ends there.
        guard depth == 0 else { return nil }
        return try value(T.self, key, optional: true)
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
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try value(type, key, optional: true) }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try value(type, key, optional: true) }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try value(type, key, optional: true) }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try value(type, key, optional: true) }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try value(type, key, optional: true) }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try value(type, key, optional: true) }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? {
        try value(type, key, optional: true)
    }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? {
        try value(type, key, optional: true)
    }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? {
        try value(type, key, optional: true)
    }

    func nestedContainer<N: CodingKey>(keyedBy type: N.Type, forKey key: Key) throws -> KeyedDecodingContainer<N> {
        KeyedDecodingContainer(ProbeKeyed<N>(log: log, depth: depth + 1))
    }
    func nestedUnkeyedContainer(forKey key: Key) throws -> UnkeyedDecodingContainer {
        ProbeUnkeyed(log: log, depth: depth + 1)
    }
    func superDecoder() throws -> Decoder { ProbeDecoder(log: log, depth: depth + 1) }
    func superDecoder(forKey key: Key) throws -> Decoder { ProbeDecoder(log: log, depth: depth + 1) }

    /// A distinct value of `T` for `key`; at the top level the property is logged.
    private func value<T: Decodable>(_ type: T.Type, _ key: Key, optional: Bool) throws -> T {
        // `decode(String?.self, forKey:)` is an optional too: its value is the wrapped one's.
        let wrapped = depth == 0 && _typeName(T.self, qualified: true).hasPrefix("Swift.Optional<")
        log.inner = nil
        log.sawOptional = false
        let v: T
        var stored: Value?
        var attribute: AttributeType?
        do {
            (v, stored, attribute) = try probeValue(T.self, log: log, depth: depth + 1)
        } catch {
            guard depth == 0 else { throw error }
            let why =
                T.self is any RawRepresentable.Type
                ? "an enum property must be CaseIterable (backed by a String or an Int)" : describe(error)
            throw StoreError(
                .invalidModel, "property '\(key.stringValue)' (\(_typeName(T.self, qualified: false))): \(why)")
        }
        if wrapped, let inner = log.inner { (stored, attribute) = inner }
        if depth == 0 {
            log.properties.append(
                RecordShape.Property(
                    name: key.stringValue, type: attribute,
                    isOptional: optional || wrapped || (log.sawOptional && attribute != .json && attribute != nil),
                    swiftType: _typeName(T.self, qualified: false))
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
    if _typeName(T.self, qualified: true).hasPrefix("Swift.Optional<") { log.sawOptional = true }
    // Far from small numbers a computed property might produce.
    let n = 0x5EED_0000 + log.next
    if T.self == Bool.self {
        log.bools += 1
        let bit = (log.bools >> log.round) & 1 == 1
        guard let typed = bit as? T else { throw probeFailure(T.self) }
        log.inner = (.bool(bit), .bool)
        return (typed, .bool(bit), .bool)
    }
    if let (v, t, stored) = scalar(n, T.self) {
        guard let typed = v as? T else { throw probeFailure(T.self) }
        log.inner = (stored, t)
        return (typed, stored, t)
    }
    if T.self == ObjectID.self {
        guard let id = ObjectID(storeID: UUID(), entity: "Probe", primaryKey: n) as? T else {
            throw probeFailure(T.self)
        }
        log.inner = (.integer(n), nil)
        return (id, .integer(n), nil)
    }
    if let cases = T.self as? any CaseIterable.Type, let first = firstCase(cases) as? T {
        let stored = (first as? any ValueConvertible)?.storedValue
        if let raw = rawType(T.self) { log.inner = (stored, raw) }
        return (first, stored, rawType(T.self) ?? .json)
    }
    guard depth < 16 else { throw probeFailure(T.self) }
    // A value that decodes one scalar through a single value (a property wrapper, an optional)
    // is stored as that scalar; anything with a keyed or unkeyed container is JSON.
    log.inner = nil
    log.structured = false
    let value = try T(from: ProbeDecoder(log: log, depth: depth))
    if !log.structured, let (stored, type) = log.inner, let type { return (value, stored, type) }
    return (value, nil, rawType(T.self) ?? .json)
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

/// A distinct value for the `n`th probe value of a scalar type, its attribute type and its
/// stored value (for the types ``RecordShape`` can match by value; nil for the others).
func scalar<T>(_ n: Int64, _ type: T.Type) -> (Any, AttributeType, Value?)? {
    let small = UInt8(truncatingIfNeeded: n)
    switch type {
    case is String.Type: return ("\u{1}probe \(n)", .string, .string("\u{1}probe \(n)"))
    case is Double.Type: return (Double(n) + 0.25, .double, .double(Double(n) + 0.25))
    case is Float.Type: return (Float(n) + 0.25, .double, nil)
    case is Int.Type: return (Int(truncatingIfNeeded: n), .integer, .integer(n))
    case is Int64.Type: return (n, .integer, .integer(n))
    case is Int32.Type: return (Int32(truncatingIfNeeded: n), .integer, nil)
    case is Int16.Type: return (Int16(truncatingIfNeeded: n), .integer, nil)
    case is Int8.Type: return (Int8(truncatingIfNeeded: n), .integer, nil)
    case is UInt.Type: return (UInt(truncatingIfNeeded: n), .integer, nil)
    case is UInt64.Type: return (UInt64(truncatingIfNeeded: n), .integer, nil)
    case is UInt32.Type: return (UInt32(truncatingIfNeeded: n), .integer, nil)
    case is UInt16.Type: return (UInt16(truncatingIfNeeded: n), .integer, nil)
    case is UInt8.Type: return (small, .integer, nil)
    case is Date.Type:
        let d = Date(timeIntervalSince1970: Double(n) + 0.25)
        return (d, .date, .date(d))
    case is Data.Type: return (Data([small, 0x9e]), .data, .data(Data([small, 0x9e])))
    case is UUID.Type:
        let high = UInt8(truncatingIfNeeded: n >> 8)
        let u = UUID(uuid: (small, 0x9e, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, high))
        return (u, .uuid, .uuid(u))
    case is URL.Type: return (URL(string: "probe://\(n)") ?? URL(fileURLWithPath: "/"), .url, nil)
    case is Decimal.Type: return (Decimal(n) + Decimal(sign: .plus, exponent: -2, significand: 25), .decimal, nil)
    default: return nil
    }
}
