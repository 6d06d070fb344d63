import Foundation
import SharedStoreSQLite
import SharedStoreSupport

// MARK: - Encoding

enum RecordEncoder {
    static func encode<R: Record>(_ record: R, entity: Entity) throws -> ([String: Value], [String: ObjectID?]) {
        let box = Box(entity: entity)
        do {
            try record.encode(to: Encoder(box: box))
        } catch let error as StoreError {
            // The encoder's own errors do not know the entity: they name it here.
            throw error.describing(ValidationFailure(object: entity.name, property: nil, rule: .record))
        }
        if let failure = box.failure {
            throw unsupported(failure).describing(
                ValidationFailure(object: entity.name, property: failure, rule: .record))
        }
        var values: [String: Value] = [:]
        var rels: [String: ObjectID?] = [:]
        for (key, v) in box.fields where key != "id" {
            if let a = entity.attribute(named: key) {
                // A record reads derived attributes; the save computes them.
                if a.isDerived { continue }
                guard case .value(let value) = v else {
                    throw StoreError.validation(
                        "\(entity.name).\(key) takes a value, not an object id", object: entity.name, property: key,
                        rule: .type(a.type))
                }
                values[key] = value
            } else if entity.relationship(named: key) != nil {
                switch v {
                case .object(let id): rels[key] = .some(id)
                case .value(.null): rels[key] = .some(nil)
                default:
                    throw StoreError.validation(
                        "\(entity.name).\(key) takes an object id", object: entity.name, property: key,
                        rule: .destination(entity.relationship(named: key)?.destination ?? ""))
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
