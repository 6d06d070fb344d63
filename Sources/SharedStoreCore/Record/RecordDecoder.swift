import Foundation
import SharedStoreSQLite
import SharedStoreSupport

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
            StoreError.validation(
                "\(snapshot.id).\(key.stringValue) holds \(snapshot[key.stringValue]), not a \(type)",
                object: snapshot.id.description, property: key.stringValue, rule: .record)
        }

        func value(_ key: Key) throws -> Value {
            guard snapshot.has(key.stringValue) else {
                throw StoreError.validation(
                    "\(snapshot.id.entity) has no attribute '\(key.stringValue)'", object: snapshot.id.description,
                    property: key.stringValue, rule: .record)
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
