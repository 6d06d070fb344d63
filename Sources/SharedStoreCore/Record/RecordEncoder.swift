import Foundation
import SharedStoreSQLite
import SharedStoreSupport

// MARK: - Encoding

enum RecordEncoder {
    /// The values and to-one relationships `record` holds, for `entity`. `inserting`: what an
    /// insert gets by default is left out (a nil attribute whose default is nil, a nil to-one), so
    /// that the insert writes what a row of the same values would; an update sets every one.
    static func encode<R: Record>(_ record: R, entity: Entity, inserting: Bool = false) throws
        -> ([String: Value], [String: ObjectID?])
    {
        let box = Box(slots: entity.recordSlots, inserting: inserting)
        try fill(box, with: record, entity: entity)
        return box.take()
    }

    /// `record` as a row to insert, by position (a batch's record: each property goes to its
    /// place, with no name hashed into a dictionary). A batch's records of one type take turns in
    /// the memo's box.
    static func encodeRow<R: Record>(_ record: R, memo: Memo) throws -> EncodedRow {
        let box = memo.box()
        try fill(box, with: record, entity: memo.entity)
        return box.takeRow()
    }

    /// `record` encoded by position into its memo's box, which the caller empties before the
    /// batch's next record (``BatchWriter/insertBoxed(_:_:object:)``).
    static func encodeInBox<R: Record>(_ record: R, memo: Memo) throws -> Box {
        let box = memo.box()
        try fill(box, with: record, entity: memo.entity)
        return box
    }

    /// Encodes `record` into `box`; throws what the record cannot be written for.
    private static func fill<R: Record>(_ box: Box, with record: R, entity: Entity) throws {
        do {
            try record.encode(to: Encoder(box: box))
        } catch let error as StoreError {
            // The encoder's own errors do not know the entity: they name it here.
            if let v = error.validation, v.object.isEmpty {
                throw StoreError(
                    error.code, error.message, context: error.context,
                    details: .validation(ValidationFailure(object: entity.name, property: v.property, rule: v.rule)))
            }
            throw error.describing(ValidationFailure(object: entity.name, property: nil, rule: .record))
        }
        if let failure = box.failure {
            throw unsupported(failure).describing(
                ValidationFailure(object: entity.name, property: failure, rule: .record))
        }
        if let (key, problem) = box.problem {
            switch problem {
            case .unknown:
                throw StoreError(.unknownProperty, "\(R.self) has property '\(key)' that \(entity.name) does not have")
            case .objectInAttribute(let type):
                throw StoreError.validation(
                    "\(entity.name).\(key) takes a value, not an object id", object: entity.name, property: key,
                    rule: .type(type))
            case .valueInRelationship:
                throw StoreError.validation(
                    "\(entity.name).\(key) takes an object id", object: entity.name, property: key,
                    rule: .destination(entity.relationship(named: key)?.destination ?? ""))
            }
        }
    }

    /// A record encoded for an insert, by position: its attributes as ``InsertRow/values``, its
    /// to-one relationships as ids by to-one index, and any other relationship it gave an id
    /// (a to-many: an insert refuses it) by name.
    struct EncodedRow: Sendable {
        var values: [Value?]
        var targets: [ObjectID?]
        var others: [String: ObjectID?]
    }

    /// Every coding key a record encodes with its value (JSON text for a nested value), whatever
    /// the model: what typed keys compare to find which key a property feeds.
    static func capture<R: Record>(_ record: R) throws -> [String: Value] {
        let box = Box(slots: [:], inserting: false)
        box.captured = [:]
        try record.encode(to: Encoder(box: box))
        return box.captured ?? [:]
    }

    /// How `v` is encoded as one property of a record (nil when it cannot be).
    static func encodedValue<T: Encodable>(_ v: T) -> Value? {
        let box = Box(slots: [:], inserting: false)
        box.captured = [:]
        guard (try? OneProperty(v: v).encode(to: Encoder(box: box))) != nil else { return nil }
        return box.captured?["v"]
    }

    /// `v` as a 64-bit integer, or a clear error: SQLite stores none larger than `Int64.max`.
    static func fit<I: BinaryInteger>(_ v: I, _ key: some CodingKey) throws -> Int64 {
        guard let i = Int64(exactly: v) else {
            throw StoreError.validation(
                "\(key.stringValue) is \(v), larger than the largest integer SQLite stores (\(Int64.max))",
                object: "", property: key.stringValue, rule: .type(.integer))
        }
        return i
    }

    /// A value as the one property `v` of a record.
    private struct OneProperty<T: Encodable>: Encodable { let v: T }

    static func unsupported(_ key: String) -> StoreError {
        StoreError(
            .validation,
            "record property '\(key)' has a type SharedStore cannot store in one column: declare its attribute "
                + ".json to keep it as JSON")
    }

    /// One word (the box): paths and user info are empty and made only when asked for.
    struct Encoder: Swift.Encoder {
        let box: Box
        var codingPath: [CodingKey] { [] }
        var userInfo: [CodingUserInfoKey: Any] { [:] }
        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            let key = ObjectIdentifier(Key.self)
            if let kept = box.container, kept.key == key {
                // Made for this key type by this box: the cast checks nothing, and needs not.
                return unsafeDowncast(kept.holder, to: ContainerHolder<Key>.self).container
            }
            let made = KeyedEncodingContainer(Keyed<Key>(box: box))
            if box.reused { box.container = (key, ContainerHolder(made)) }
            return made
        }
        func unkeyedContainer() -> UnkeyedEncodingContainer { Unsupported(codingPath: codingPath) }
        func singleValueContainer() -> SingleValueEncodingContainer { Unsupported(codingPath: codingPath) }
    }

    struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let box: Box
        var codingPath: [CodingKey] { [] }
        func put(_ v: Value, _ key: Key) { box.put(v, key.stringValue) }
        mutating func encodeNil(forKey key: Key) throws { put(.null, key) }
        mutating func encode(_ v: Bool, forKey key: Key) throws { put(.bool(v), key) }
        mutating func encode(_ v: String, forKey key: Key) throws { put(.string(v), key) }
        mutating func encode(_ v: Double, forKey key: Key) throws { put(.double(v), key) }
        mutating func encode(_ v: Float, forKey key: Key) throws { put(.double(Double(v)), key) }
        mutating func encode(_ v: Int, forKey key: Key) throws { put(.integer(Int64(v)), key) }
        mutating func encode(_ v: Int64, forKey key: Key) throws { put(.integer(v), key) }
        mutating func encode(_ v: Int32, forKey key: Key) throws { put(.integer(Int64(v)), key) }
        mutating func encode(_ v: Int16, forKey key: Key) throws { put(.integer(Int64(v)), key) }
        mutating func encode(_ v: UInt64, forKey key: Key) throws { put(.integer(try RecordEncoder.fit(v, key)), key) }
        mutating func encode(_ v: UInt, forKey key: Key) throws { put(.integer(try RecordEncoder.fit(v, key)), key) }
        mutating func encode<T: Encodable>(_ v: T, forKey key: Key) throws {
            let name = key.stringValue
            let slot = box.slot(name)
            if case .attribute(.json, _, _, _)? = slot {
                box.put(.string(try RecordEncoder.json(v)), name, slot)
                return
            }
            // The common types by their type alone (T is the type checked): no dynamic cast.
            if T.self == Date.self { return box.put(.date(unsafeBitCast(v, to: Date.self)), name, slot) }
            if T.self == ObjectID.self { return box.put(unsafeBitCast(v, to: ObjectID.self), name, slot) }
            switch v {
            case let d as Data: box.put(.data(d), name, slot)
            case let u as UUID: box.put(.uuid(u), name, slot)
            case let u as URL: box.put(.string(u.absoluteString), name, slot)
            case let d as Decimal: box.put(.string(d.description), name, slot)
            case let value as Value: box.put(value, name, slot)
            default:
                // An enum backed by a String or an Int (any value that encodes as one primitive).
                if let single = SingleValueCapture.capture(v) {
                    box.put(single, name, slot)
                } else if box.captured != nil {
                    box.put(.string(try RecordEncoder.json(v)), name, slot)
                } else {
                    throw RecordEncoder.unsupported(name)
                }
            }
        }
        // A nil optional is stored as nil, so that an update clears it.
        mutating func encodeIfPresent<T: Encodable>(_ v: T?, forKey key: Key) throws {
            // Tested in place first: binding a generic optional copies it, which costs the
            // optional type's metadata, a lookup in the runtime's tables of 400 instructions (most
            // optionals of a new record are nil). The binding is in a function of its own: in
            // this one, the metadata was looked up on entry, for nil too.
            guard v != nil else { return put(.null, key) }
            try encodeWrapped(v, forKey: key)
        }
        @inline(never)
        private mutating func encodeWrapped<T: Encodable>(_ v: T?, forKey key: Key) throws {
            if let v { try encode(v, forKey: key) }
        }
        mutating func encodeIfPresent(_ v: String?, forKey key: Key) throws { put(v.map(Value.string) ?? .null, key) }
        mutating func encodeIfPresent(_ v: Bool?, forKey key: Key) throws { put(v.map(Value.bool) ?? .null, key) }
        mutating func encodeIfPresent(_ v: Double?, forKey key: Key) throws { put(v.map(Value.double) ?? .null, key) }
        mutating func encodeIfPresent(_ v: Int?, forKey key: Key) throws {
            put(v.map { .integer(Int64($0)) } ?? .null, key)
        }
        mutating func encodeIfPresent(_ v: Int64?, forKey key: Key) throws { put(v.map(Value.integer) ?? .null, key) }
        // The other primitives too: the protocol's own versions write nothing for nil, so that an
        // update would leave the column as it was.
        // Each through its own `encode` (a UInt64 too large for SQLite is named as such).
        mutating func encodeIfPresent(_ v: Float?, forKey key: Key) throws {
            if let v { try encode(v, forKey: key) } else { put(.null, key) }
        }
        mutating func encodeIfPresent(_ v: Int8?, forKey key: Key) throws {
            put(v.map { .integer(Int64($0)) } ?? .null, key)
        }
        mutating func encodeIfPresent(_ v: Int16?, forKey key: Key) throws {
            put(v.map { .integer(Int64($0)) } ?? .null, key)
        }
        mutating func encodeIfPresent(_ v: Int32?, forKey key: Key) throws {
            put(v.map { .integer(Int64($0)) } ?? .null, key)
        }
        mutating func encodeIfPresent(_ v: UInt8?, forKey key: Key) throws {
            put(v.map { .integer(Int64($0)) } ?? .null, key)
        }
        mutating func encodeIfPresent(_ v: UInt16?, forKey key: Key) throws {
            put(v.map { .integer(Int64($0)) } ?? .null, key)
        }
        mutating func encodeIfPresent(_ v: UInt32?, forKey key: Key) throws {
            put(v.map { .integer(Int64($0)) } ?? .null, key)
        }
        mutating func encodeIfPresent(_ v: UInt?, forKey key: Key) throws {
            if let v { try encode(v, forKey: key) } else { put(.null, key) }
        }
        mutating func encodeIfPresent(_ v: UInt64?, forKey key: Key) throws {
            if let v { try encode(v, forKey: key) } else { put(.null, key) }
        }
        mutating func nestedContainer<N: CodingKey>(keyedBy: N.Type, forKey key: Key) -> KeyedEncodingContainer<N> {
            box.failure = box.failure ?? key.stringValue
            return KeyedEncodingContainer(Keyed<N>(box: Box.discarding()))
        }
        mutating func nestedUnkeyedContainer(forKey key: Key) -> UnkeyedEncodingContainer {
            box.failure = box.failure ?? key.stringValue
            return Unsupported(codingPath: codingPath)
        }
        mutating func superEncoder() -> Swift.Encoder {
            box.failure = box.failure ?? "super"
            return Encoder(box: Box.discarding())
        }
        mutating func superEncoder(forKey key: Key) -> Swift.Encoder {
            box.failure = box.failure ?? key.stringValue
            return Encoder(box: Box.discarding())
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
            KeyedEncodingContainer(Keyed<N>(box: Box.discarding()))
        }
        mutating func nestedUnkeyedContainer() -> UnkeyedEncodingContainer { self }
        mutating func superEncoder() -> Swift.Encoder { Encoder(box: Box.discarding()) }
    }
}

/// Encodes a value that writes exactly one primitive through a single-value container (an enum
/// backed by a String or an Int): that primitive; nil for anything else.
struct SingleValueCapture: Swift.Encoder, SingleValueEncodingContainer {
    final class Slot {
        var value: Value?
        var structured = false
        var depth = 0
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
        return KeyedEncodingContainer(RecordEncoder.Keyed<Key>(box: RecordEncoder.Box.discarding()))
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
    /// A value written through this container in turn (an optional's wrapped value, a
    /// property wrapper's) is captured as it encodes itself; a structure is not one value.
    mutating func encode<T: Encodable>(_ v: T) throws {
        switch v {
        case let d as Date: set(.date(d))
        case let d as Data: set(.data(d))
        case let u as UUID: set(.uuid(u))
        case let u as URL: set(.string(u.absoluteString))
        case let d as Decimal: set(.string(d.description))
        default:
            // A type that writes itself through a single value again and again is no value.
            guard slot.depth < 16 else {
                slot.structured = true
                return
            }
            slot.depth += 1
            defer { slot.depth -= 1 }
            try v.encode(to: self)
        }
    }
}
