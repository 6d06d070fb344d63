import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// A Codable struct that maps to an entity: its stored properties are the entity's attributes
/// (String, integers, Double, Float, Bool, Date, Data, UUID, optionals of these) and to-one
/// relationships (`ObjectID?`); `id` is the object id, nil before the first save.
///
/// For example:
/// ```swift
/// struct Article: Record {
///     static let entityName = "Article"
///     var id: ObjectID?
///     var title: String
///     var category: ObjectID?
/// }
/// let id = try context.insert(Article(title: "Hello"))
/// let unread = try context.fetch(Article.self, where: Key("isRead") == false)
/// ```
public protocol Record: Codable, Sendable {
    static var entityName: String { get }
    var id: ObjectID? { get set }
}

extension ObjectContext {
    /// Inserts a record; returns its temporary id.
    @discardableResult
    public func insert<R: Record>(_ record: R) throws -> ObjectID {
        let (values, rels) = try RecordEncoder.encode(record, entity: try model.entity(R.entityName))
        return try insert(R.entityName, values, relationships: rels)
    }

    /// Writes the properties of a fetched record that differ from what this context read of its
    /// object (its fetch, or the store now when it did not read it): a property the record left
    /// alone is not written, so another process's change to it survives, and the merge policies
    /// work property by property as with ``update(_:_:relationships:)``.
    public func update<R: Record>(_ record: R) throws {
        guard let id = record.id else {
            throw StoreError(.objectNotFound, "\(R.entityName) record has no id: insert it first")
        }
        let (values, rels) = try RecordEncoder.encode(record, entity: try model.entity(R.entityName))
        if insertIndex[id] != nil {
            try update(id, values, relationships: rels)
            return
        }
        let read = try registered[id] ?? object(with: id)
        let changed = values.filter { read[$0.key] != $0.value }
        let relinked = rels.filter { read.relationships[$0.key] != $0.value }
        guard !changed.isEmpty || !relinked.isEmpty else { return }
        try update(id, changed, relationships: relinked)
    }

    /// Fetches records of type `R`.
    public func fetch<R: Record>(
        _ type: R.Type, where condition: Condition = .always, sortedBy sort: [SortKey] = [],
        limit: Int? = nil, offset: Int = 0
    ) throws -> [R] {
        try fetch(FetchRequest(R.entityName, where: condition, sortedBy: sort, limit: limit, offset: offset)).map {
            try R(snapshot: $0)
        }
    }

    /// The first record of type `R` matching `condition` in `sort` order, or nil.
    public func fetchOne<R: Record>(_ type: R.Type, where condition: Condition = .always, sortedBy sort: [SortKey] = [])
        throws -> R?
    {
        try fetch(type, where: condition, sortedBy: sort, limit: 1).first
    }

    /// How many objects of `R`'s entity match `condition` (a kept count when one matches).
    public func count<R: Record>(_ type: R.Type, where condition: Condition = .always) throws -> Int {
        try count(FetchRequest(R.entityName, where: condition))
    }

    /// Whether any object of `R`'s entity matches `condition`.
    public func exists<R: Record>(_ type: R.Type, where condition: Condition = .always) throws -> Bool {
        try !fetch(FetchRequest(R.entityName, where: condition, limit: 1)).isEmpty
    }

    /// Deletes a fetched or saved record's object (pending until the save, like ``delete(_:)``).
    public func delete<R: Record>(_ record: R) throws {
        guard let id = record.id else {
            throw StoreError(.objectNotFound, "\(R.entityName) record has no id: it was never saved")
        }
        try delete(id)
    }

    /// The stored object with `id` as a record of type `R`.
    public func record<R: Record>(_ type: R.Type, with id: ObjectID) throws -> R {
        try R(snapshot: object(with: id))
    }
}

extension Record {
    /// Decodes a record from a snapshot.
    ///
    /// - Throws: `.validation` when the snapshot lacks a property the record requires or holds a
    ///   value of another type.
    public init(snapshot: Snapshot) throws {
        do {
            try self.init(from: SnapshotDecoder(snapshot: snapshot))
        } catch let e as StoreError {
            throw e
        } catch {
            throw StoreError(.validation, "cannot read \(snapshot.id) as \(Self.self): \(error)")
        }
    }
}

// MARK: - Encoding

enum RecordEncoder {
    static func encode<R: Record>(_ record: R, entity: Entity) throws -> ([String: Value], [String: ObjectID?]) {
        let box = Box(entity: entity)
        try record.encode(to: Encoder(box: box))
        if let failure = box.failure { throw unsupported(failure) }
        var values: [String: Value] = [:]
        var rels: [String: ObjectID?] = [:]
        for (key, v) in box.fields where key != "id" {
            if let a = entity.attribute(named: key) {
                // A record reads derived attributes; the save computes them.
                if a.isDerived { continue }
                guard case .value(let value) = v else {
                    throw StoreError(.validation, "\(entity.name).\(key) takes a value, not an object id")
                }
                values[key] = value
            } else if entity.relationship(named: key) != nil {
                switch v {
                case .object(let id): rels[key] = .some(id)
                case .value(.null): rels[key] = .some(nil)
                default: throw StoreError(.validation, "\(entity.name).\(key) takes an object id")
                }
            } else {
                throw StoreError(.unknownProperty, "\(R.self) has property '\(key)' that \(entity.name) does not have")
            }
        }
        return (values, rels)
    }

    enum Field { case value(Value), object(ObjectID) }

    /// What a record's properties encoded to; `failure` names a property written through a
    /// nested container, which has no column: the encode fails rather than drop it.
    final class Box {
        let entity: Entity?
        var fields: [String: Field] = [:]
        var failure: String?
        init(entity: Entity?) { self.entity = entity }
    }

    static func unsupported(_ key: String) -> StoreError {
        StoreError(
            .validation,
            "record property '\(key)' has a type SharedStore cannot store in one column: declare its attribute "
                + ".json to keep it as JSON")
    }

    struct Encoder: Swift.Encoder {
        let box: Box
        var codingPath: [CodingKey] = []
        var userInfo: [CodingUserInfoKey: Any] = [:]
        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            KeyedEncodingContainer(Keyed<Key>(box: box))
        }
        func unkeyedContainer() -> UnkeyedEncodingContainer { Unsupported(codingPath: codingPath) }
        func singleValueContainer() -> SingleValueEncodingContainer { Unsupported(codingPath: codingPath) }
    }

    struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let box: Box
        var codingPath: [CodingKey] = []
        func put(_ v: Value, _ key: Key) { box.fields[key.stringValue] = .value(v) }
        mutating func encodeNil(forKey key: Key) throws { put(.null, key) }
        mutating func encode(_ v: Bool, forKey key: Key) throws { put(.bool(v), key) }
        mutating func encode(_ v: String, forKey key: Key) throws { put(.string(v), key) }
        mutating func encode(_ v: Double, forKey key: Key) throws { put(.double(v), key) }
        mutating func encode(_ v: Float, forKey key: Key) throws { put(.double(Double(v)), key) }
        mutating func encode(_ v: Int, forKey key: Key) throws { put(.integer(Int64(v)), key) }
        mutating func encode(_ v: Int64, forKey key: Key) throws { put(.integer(v), key) }
        mutating func encode(_ v: Int32, forKey key: Key) throws { put(.integer(Int64(v)), key) }
        mutating func encode(_ v: Int16, forKey key: Key) throws { put(.integer(Int64(v)), key) }
        mutating func encode<T: Encodable>(_ v: T, forKey key: Key) throws {
            if box.entity?.attribute(named: key.stringValue)?.type == .json {
                put(.string(try RecordEncoder.json(v)), key)
                return
            }
            switch v {
            case let d as Date: put(.date(d), key)
            case let d as Data: put(.data(d), key)
            case let u as UUID: put(.uuid(u), key)
            case let u as URL: put(.string(u.absoluteString), key)
            case let d as Decimal: put(.string(d.description), key)
            case let id as ObjectID: box.fields[key.stringValue] = .object(id)
            case let value as Value: put(value, key)
            default:
                // An enum backed by a String or an Int (any value that encodes as one primitive).
                guard let single = SingleValueCapture.capture(v) else {
                    throw RecordEncoder.unsupported(key.stringValue)
                }
                put(single, key)
            }
        }
        // A nil optional is stored as nil, so that an update clears it.
        mutating func encodeIfPresent<T: Encodable>(_ v: T?, forKey key: Key) throws {
            if let v { try encode(v, forKey: key) } else { put(.null, key) }
        }
        mutating func encodeIfPresent(_ v: String?, forKey key: Key) throws { put(v.map(Value.string) ?? .null, key) }
        mutating func encodeIfPresent(_ v: Bool?, forKey key: Key) throws { put(v.map(Value.bool) ?? .null, key) }
        mutating func encodeIfPresent(_ v: Double?, forKey key: Key) throws { put(v.map(Value.double) ?? .null, key) }
        mutating func encodeIfPresent(_ v: Int?, forKey key: Key) throws {
            put(v.map { .integer(Int64($0)) } ?? .null, key)
        }
        mutating func encodeIfPresent(_ v: Int64?, forKey key: Key) throws { put(v.map(Value.integer) ?? .null, key) }
        mutating func nestedContainer<N: CodingKey>(keyedBy: N.Type, forKey key: Key) -> KeyedEncodingContainer<N> {
            box.failure = box.failure ?? key.stringValue
            return KeyedEncodingContainer(Keyed<N>(box: Box(entity: nil)))
        }
        mutating func nestedUnkeyedContainer(forKey key: Key) -> UnkeyedEncodingContainer {
            box.failure = box.failure ?? key.stringValue
            return Unsupported(codingPath: codingPath)
        }
        mutating func superEncoder() -> Swift.Encoder {
            box.failure = box.failure ?? "super"
            return Encoder(box: Box(entity: nil))
        }
        mutating func superEncoder(forKey key: Key) -> Swift.Encoder {
            box.failure = box.failure ?? key.stringValue
            return Encoder(box: Box(entity: nil))
        }
    }

    /// The JSON of a value (keys sorted: the same value is always the same text).
    static func json<T: Encodable>(_ v: T) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            return String(decoding: try encoder.encode(v), as: UTF8.self)
        } catch {
            throw StoreError(.validation, "cannot encode a \(T.self) as JSON: \(error)")
        }
    }

    /// Nested containers have no column to go to: every write through them fails.
    struct Unsupported: UnkeyedEncodingContainer, SingleValueEncodingContainer {
        var codingPath: [CodingKey]
        var count: Int { 0 }
        func fail() -> StoreError {
            StoreError(
                .validation,
                "records hold flat properties only (at \(codingPath.map(\.stringValue).joined(separator: ".")))")
        }
        mutating func encodeNil() throws { throw fail() }
        mutating func encode<T: Encodable>(_ value: T) throws { throw fail() }
        mutating func nestedContainer<N: CodingKey>(keyedBy: N.Type) -> KeyedEncodingContainer<N> {
            KeyedEncodingContainer(Keyed<N>(box: Box(entity: nil)))
        }
        mutating func nestedUnkeyedContainer() -> UnkeyedEncodingContainer { self }
        mutating func superEncoder() -> Swift.Encoder { Encoder(box: Box(entity: nil)) }
    }
}

/// Encodes a value that writes exactly one primitive through a single-value container (an enum
/// backed by a String or an Int): that primitive; nil for anything else.
struct SingleValueCapture: Swift.Encoder, SingleValueEncodingContainer {
    final class Slot {
        var value: Value?
        var structured = false
    }
    let slot = Slot()
    var codingPath: [CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]

    static func capture<T: Encodable>(_ v: T) -> Value? {
        let capture = SingleValueCapture()
        guard (try? v.encode(to: capture)) != nil, !capture.slot.structured else { return nil }
        return capture.slot.value
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        slot.structured = true
        return KeyedEncodingContainer(RecordEncoder.Keyed<Key>(box: RecordEncoder.Box(entity: nil)))
    }
    func unkeyedContainer() -> UnkeyedEncodingContainer {
        slot.structured = true
        return RecordEncoder.Unsupported(codingPath: codingPath)
    }
    func singleValueContainer() -> SingleValueEncodingContainer { self }

    private func set(_ v: Value) {
        if slot.value != nil { slot.structured = true }
        slot.value = v
    }
    mutating func encodeNil() throws { set(.null) }
    mutating func encode(_ v: Bool) throws { set(.bool(v)) }
    mutating func encode(_ v: String) throws { set(.string(v)) }
    mutating func encode(_ v: Double) throws { set(.double(v)) }
    mutating func encode(_ v: Float) throws { set(.double(Double(v))) }
    mutating func encode(_ v: Int) throws { set(.integer(Int64(v))) }
    mutating func encode(_ v: Int64) throws { set(.integer(v)) }
    mutating func encode(_ v: Int32) throws { set(.integer(Int64(v))) }
    mutating func encode(_ v: Int16) throws { set(.integer(Int64(v))) }
    mutating func encode(_ v: Int8) throws { set(.integer(Int64(v))) }
    mutating func encode(_ v: UInt8) throws { set(.integer(Int64(v))) }
    mutating func encode(_ v: UInt16) throws { set(.integer(Int64(v))) }
    mutating func encode(_ v: UInt32) throws { set(.integer(Int64(v))) }
    mutating func encode(_ v: UInt) throws {
        if let i = Int64(exactly: v) { set(.integer(i)) } else { slot.structured = true }
    }
    mutating func encode(_ v: UInt64) throws {
        if let i = Int64(exactly: v) { set(.integer(i)) } else { slot.structured = true }
    }
    mutating func encode<T: Encodable>(_ v: T) throws {
        slot.structured = true
    }
}

// MARK: - Decoding

/// Hands one stored value to a type that decodes from a single-value container (an enum backed
/// by a String or an Int).
struct SingleValueDecoder: Decoder, SingleValueDecodingContainer {
    let value: Value
    var codingPath: [CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> { throw mismatch() }
    func unkeyedContainer() throws -> UnkeyedDecodingContainer { throw mismatch() }
    func singleValueContainer() throws -> SingleValueDecodingContainer { self }

    private func mismatch() -> StoreError { StoreError(.validation, "\(value) is one value, not a structure") }
    func decodeNil() -> Bool { value.isNull }
    func decode(_ type: Bool.Type) throws -> Bool {
        guard let v = value.boolValue else { throw mismatch() }
        return v
    }
    func decode(_ type: String.Type) throws -> String {
        guard let v = value.stringValue else { throw mismatch() }
        return v
    }
    func decode(_ type: Double.Type) throws -> Double {
        guard let v = value.doubleValue else { throw mismatch() }
        return v
    }
    func decode(_ type: Float.Type) throws -> Float { Float(try decode(Double.self)) }
    private func integer<I: FixedWidthInteger>(_ type: I.Type) throws -> I {
        guard let v = value.integerValue, let i = I(exactly: v) else { throw mismatch() }
        return i
    }
    func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }
    /// Only primitives come out of one stored value: anything else is not there to decode.
    func decode<T: Decodable>(_ type: T.Type) throws -> T { throw mismatch() }
}

struct SnapshotDecoder: Decoder {
    let snapshot: Snapshot
    var codingPath: [CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(Keyed<Key>(snapshot: snapshot))
    }
    func unkeyedContainer() throws -> UnkeyedDecodingContainer {
        throw StoreError(.validation, "records hold flat properties only")
    }
    func singleValueContainer() throws -> SingleValueDecodingContainer {
        throw StoreError(.validation, "records hold flat properties only")
    }

    struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let snapshot: Snapshot
        var codingPath: [CodingKey] = []
        var allKeys: [Key] {
            (snapshot.attributeNames + Array(snapshot.relationships.keys) + ["id"]).compactMap {
                Key(stringValue: $0)
            }
        }

        func contains(_ key: Key) -> Bool {
            key.stringValue == "id" || snapshot.has(key.stringValue)
                || snapshot.relationships[key.stringValue] != nil
        }

        func decodeNil(forKey key: Key) throws -> Bool {
            if key.stringValue == "id" { return false }
            if snapshot.relationships[key.stringValue] != nil { return false }
            return snapshot.has(key.stringValue) ? snapshot[key.stringValue].isNull : true
        }

        func mismatch(_ key: Key, _ type: Any.Type) -> StoreError {
            StoreError(
                .validation, "\(snapshot.id).\(key.stringValue) holds \(snapshot[key.stringValue]), not a \(type)")
        }

        func value(_ key: Key) throws -> Value {
            guard snapshot.has(key.stringValue) else {
                throw StoreError(.validation, "\(snapshot.id.entity) has no attribute '\(key.stringValue)'")
            }
            return snapshot[key.stringValue]
        }

        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
            guard let v = try value(key).boolValue else { throw mismatch(key, type) }
            return v
        }
        func decode(_ type: String.Type, forKey key: Key) throws -> String {
            guard let v = try value(key).stringValue else { throw mismatch(key, type) }
            return v
        }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
            guard let v = try value(key).doubleValue else { throw mismatch(key, type) }
            return v
        }
        func decode(_ type: Float.Type, forKey key: Key) throws -> Float { Float(try decode(Double.self, forKey: key)) }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 {
            guard let v = try value(key).integerValue else { throw mismatch(key, type) }
            return v
        }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int {
            guard let v = Int(exactly: try decode(Int64.self, forKey: key)) else { throw mismatch(key, type) }
            return v
        }
        func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 {
            guard let v = Int32(exactly: try decode(Int64.self, forKey: key)) else { throw mismatch(key, type) }
            return v
        }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            if type == ObjectID.self {
                let id = key.stringValue == "id" ? snapshot.id : snapshot.relationships[key.stringValue]
                guard let id, let result = id as? T else { throw mismatch(key, type) }
                return result
            }
            let v = try value(key)
            let out: Any?
            switch v {
            case .date(let d) where type == Date.self: out = d
            case .data(let d) where type == Data.self: out = d
            case .uuid(let u) where type == UUID.self: out = u
            case .string(let s) where type == URL.self: out = URL(string: s)
            case .string(let s) where type == Decimal.self:
                out = Decimal(string: s, locale: Locale(identifier: "en_US_POSIX"))
            default: out = type == Value.self ? v : nil
            }
            if let result = out as? T { return result }
            // An enum backed by a String or an Int reads its primitive; any other Codable value
            // was stored as JSON.
            if let result = try? T(from: SingleValueDecoder(value: v)) { return result }
            if case .string(let text) = v, let result = try? JSONDecoder().decode(T.self, from: Data(text.utf8)) {
                return result
            }
            throw mismatch(key, type)
        }
        func nestedContainer<N: CodingKey>(keyedBy type: N.Type, forKey key: Key) throws -> KeyedDecodingContainer<N> {
            throw StoreError(.validation, "records hold flat properties only")
        }
        func nestedUnkeyedContainer(forKey key: Key) throws -> UnkeyedDecodingContainer {
            throw StoreError(.validation, "records hold flat properties only")
        }
        func superDecoder() throws -> Decoder { self.decoder }
        func superDecoder(forKey key: Key) throws -> Decoder { self.decoder }
        var decoder: Decoder { SnapshotDecoder(snapshot: snapshot) }
    }
}
