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

    /// Writes a fetched record's properties back to its object.
    public func update<R: Record>(_ record: R) throws {
        guard let id = record.id else {
            throw StoreError(.objectNotFound, "\(R.entityName) record has no id: insert it first")
        }
        let (values, rels) = try RecordEncoder.encode(record, entity: try model.entity(R.entityName))
        try update(id, values, relationships: rels)
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
        let box = Box()
        try record.encode(to: Encoder(box: box))
        var values: [String: Value] = [:]
        var rels: [String: ObjectID?] = [:]
        for (key, v) in box.fields where key != "id" {
            if entity.attribute(named: key) != nil {
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

    final class Box { var fields: [String: Field] = [:] }

    static func unsupported(_ key: String) -> StoreError {
        StoreError(.validation, "record property '\(key)' has a type SharedStore cannot store")
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
            switch v {
            case let d as Date: put(.date(d), key)
            case let d as Data: put(.data(d), key)
            case let u as UUID: put(.uuid(u), key)
            case let id as ObjectID: box.fields[key.stringValue] = .object(id)
            case let value as Value: put(value, key)
            default: throw RecordEncoder.unsupported(key.stringValue)
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
            KeyedEncodingContainer(Keyed<N>(box: Box()))
        }
        mutating func nestedUnkeyedContainer(forKey key: Key) -> UnkeyedEncodingContainer {
            Unsupported(codingPath: codingPath)
        }
        mutating func superEncoder() -> Swift.Encoder { Encoder(box: Box()) }
        mutating func superEncoder(forKey key: Key) -> Swift.Encoder { Encoder(box: Box()) }
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
            KeyedEncodingContainer(Keyed<N>(box: Box()))
        }
        mutating func nestedUnkeyedContainer() -> UnkeyedEncodingContainer { self }
        mutating func superEncoder() -> Swift.Encoder { Encoder(box: Box()) }
    }
}

// MARK: - Decoding

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
            default: out = type == Value.self ? v : nil
            }
            guard let result = out as? T else { throw mismatch(key, type) }
            return result
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
