import Foundation
import SharedStoreSQLite
import SharedStoreSupport

// MARK: - Decoding

/// Hands one stored value to a type that decodes from a single-value container (an enum backed
/// by a String or an Int).
/// `v` as a Foundation type stored as a value (`Date`, `Data`, `UUID`, `URL`, `Decimal`) or as
/// the ``Value`` itself; nil for any other type. Never an optional's nil: for an optional `T`
/// (the wrapped value read through it) nil means "not one of these", and the caller reads on.
func foundationValue<T>(_ v: Value, as type: T.Type) -> T? {
    let out: Any?
    switch v {
    case .date(let d) where type == Date.self: out = d
    case .data(let d) where type == Data.self: out = d
    case .uuid(let u) where type == UUID.self: out = u
    case .string(let s) where type == URL.self: out = URL(string: s)
    case .string(let s) where type == Decimal.self: out = DecimalText.parse(s)
    default: out = type == Value.self ? v : nil
    }
    guard let out else { return nil }
    return out as? T
}

struct SingleValueDecoder: Decoder, SingleValueDecodingContainer {
    let value: Value
    /// How many values read themselves through this one (``decode(_:)``).
    var depth = 0
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
    /// A value read through this container in turn (an optional's wrapped value) reads the same
    /// value: Foundation's types as stored, anything else as it decodes itself (a wrapper that
    /// reads itself through a single value again and again, at most 16 times).
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        if let result = foundationValue(value, as: T.self) { return result }
        guard depth < 16 else { throw mismatch() }
        return try T(from: SingleValueDecoder(value: value, depth: depth + 1))
    }
}

/// Where each attribute of a fetch's snapshots is, worked out as the first record decodes: a
/// record asks for its properties in the same order every time, so each later record finds the
/// n-th property it asks for where the first one found it (checked by one comparison of names),
/// never by searching the names.
///
/// Used by one fetch, on one thread: no exclusivity checks (they cost more than the lookup).
final class RecordLayout {
    let names: [String]
    /// The position found for the n-th property asked for, by n.
    @exclusivity(unchecked) private var found: [Int] = []

    init(names: [String]) { self.names = names }

    /// The position of `name`, asked for as a record's `n`-th property.
    func position(_ name: String, asked n: Int) -> Int? {
        if n < found.count, found[n] < names.count, names[found[n]] == name { return found[n] }
        guard let i = names.firstIndex(of: name) else { return nil }
        if n < found.count {
            found[n] = i
        } else if n == found.count {
            found.append(i)
        }
        return i
    }
}

/// The snapshot being decoded, with its fetch's layout: what the decoder and its containers share
/// by reference (a copy of a container costs one retain, not one per field of a snapshot). A
/// fetch decodes all its records through one row (``begin(_:)`` moves it to the next snapshot),
/// and hands each record the keyed container the first one asked for: no allocation per record.
/// The row reads each snapshot in place in the fetch's array: moving on copies nothing.
/// Used by one fetch's decoding, on one thread: its properties skip the exclusivity checks, which
/// cost more per property than the rest of its lookup.
final class DecodingRow {
    /// The fetch's snapshots (just the one being decoded, for a record decoded alone).
    private let rows: [Snapshot]
    /// The position in `rows` of the snapshot being decoded.
    @exclusivity(unchecked) private var index = 0
    /// Where the fetch's records find their properties.
    private let layout: RecordLayout
    /// Whether the snapshot's attributes are the ones `layout` describes (else found by name).
    @exclusivity(unchecked) private var laidOut = false
    /// How many properties were asked for so far.
    @exclusivity(unchecked) private var asked = 0
    /// The keyed container handed out, for the key type it was made for.
    @exclusivity(unchecked) private var keyed: (key: ObjectIdentifier, box: AnyObject)?
    /// What the fetch read, which each record's id carries (made at the first id asked for).
    @exclusivity(unchecked) private var reads: ReadBase?

    /// A row over `snapshots`, a fetch's, at its first (call ``begin(_:)`` before decoding).
    init(_ snapshots: [Snapshot], layout: RecordLayout) {
        rows = snapshots
        self.layout = layout
    }

    /// A row at `snapshot` alone.
    convenience init(_ snapshot: Snapshot, layout: RecordLayout?) {
        self.init([snapshot], layout: layout ?? RecordLayout(names: snapshot.attributeNames))
        begin(0)
    }

    /// The snapshot being decoded.
    var snapshot: Snapshot { rows[index] }

    /// Moves to the snapshot at `index` of the fetch's.
    func begin(_ index: Int) {
        self.index = index
        laidOut = rows[index].hasNames(layout.names)
        asked = 0
    }

    /// The keyed container over this row for `Key`: made once, for the first record.
    func container<Key: CodingKey>(_ type: Key.Type) -> KeyedDecodingContainer<Key> {
        if let keyed, keyed.key == ObjectIdentifier(Key.self) {
            // Made below for this very key type (checked above): no dynamic cast.
            return unsafeDowncast(keyed.box, to: KeyedBox<Key>.self).container
        }
        let box = KeyedBox(KeyedDecodingContainer(SnapshotDecoder.Keyed<Key>(row: self)))
        keyed = (ObjectIdentifier(Key.self), box)
        return box.container
    }

    /// The position of attribute `name` in the snapshot (nil: it has no such attribute).
    func position(_ name: String) -> Int? {
        guard laidOut else { return rows[index].position(of: name) }
        let n = asked
        asked = n + 1
        return layout.position(name, asked: n)
    }

    /// The value of attribute `name` (nil: the snapshot has no such attribute).
    func value(_ name: String) -> Value? { position(name).map { rows[index].value(at: $0) } }

    /// The value at `position` of the snapshot (read in place, not through a copy of it).
    func value(at position: Int) -> Value { rows[index].value(at: position) }

    /// The to-one relationship `name` of the snapshot (read in place).
    func relationship(_ name: String) -> ObjectID? { rows[index].relationships[name] }

    /// The object `name` names: the snapshot's own id for `id` (carrying what the record is read
    /// as, for ``ObjectContext/update(_:)``), else its to-one relationship.
    func objectID(_ name: String) -> ObjectID? {
        guard name == "id" else { return rows[index].relationships[name] }
        let base: ReadBase
        if let reads {
            base = reads
        } else {
            base = ReadBase(snapshots: rows)
            reads = base
        }
        return rows[index].id.reading(base)
    }
}

/// A keyed container kept by a ``DecodingRow`` for the records after the first.
final class KeyedBox<Key: CodingKey> {
    let container: KeyedDecodingContainer<Key>
    init(_ container: KeyedDecodingContainer<Key>) { self.container = container }
}

struct SnapshotDecoder: Decoder {
    let row: DecodingRow
    // Computed, not stored: a decoder and its containers are copied for every record, and then
    // hold one reference (the row), not three.
    var codingPath: [CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(snapshot: Snapshot, layout: RecordLayout? = nil) { row = DecodingRow(snapshot, layout: layout) }
    init(row: DecodingRow) { self.row = row }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        row.container(type)
    }
    func unkeyedContainer() throws -> UnkeyedDecodingContainer {
        throw StoreError(.validation, "records hold flat properties only")
    }
    func singleValueContainer() throws -> SingleValueDecodingContainer {
        throw StoreError(.validation, "records hold flat properties only")
    }

    struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let row: DecodingRow
        var codingPath: [CodingKey] { [] }
        var snapshot: Snapshot { row.snapshot }
        var allKeys: [Key] {
            (snapshot.attributeNames + Array(snapshot.relationships.keys) + ["id"]).compactMap {
                Key(stringValue: $0)
            }
        }

        func contains(_ key: Key) -> Bool {
            key.stringValue == "id" || row.position(key.stringValue) != nil
                || row.relationship(key.stringValue) != nil
        }

        func decodeNil(forKey key: Key) throws -> Bool {
            let name = key.stringValue
            if name == "id" { return false }
            if let i = row.position(name) { return row.value(at: i).isNull }
            return row.relationship(name) == nil
        }

        func mismatch(_ key: Key, _ type: Any.Type) -> StoreError {
            StoreError.validation(
                "\(snapshot.id).\(key.stringValue) holds \(snapshot[key.stringValue]), not a \(type)",
                object: snapshot.id.description, property: key.stringValue, rule: .record)
        }

        func value(_ key: Key) throws -> Value {
            guard let i = row.position(key.stringValue) else {
                throw StoreError.validation(
                    "\(snapshot.id.entity) has no attribute '\(key.stringValue)'", object: snapshot.id.description,
                    property: key.stringValue, rule: .record)
            }
            return row.value(at: i)
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
                guard let id = row.objectID(key.stringValue) else { throw mismatch(key, type) }
                // T is ObjectID (checked above): no dynamic cast.
                return unsafeBitCast(id, to: T.self)
            }
            let v = try value(key)
            // T is Date (checked): no dynamic cast, and none of `convert`'s generic set-up.
            if type == Date.self, case .date(let d) = v { return unsafeBitCast(d, to: T.self) }
            return try convert(v, type, key)
        }

        // `decodeIfPresent` by one lookup (the protocol's default asks `contains`, then
        // `decodeNil`, then `decode`: three).
        func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
            guard let v = try present(key, type) else { return nil }
            guard let s = v.stringValue else { throw mismatch(key, type) }
            return s
        }
        func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
            guard let v = try present(key, type) else { return nil }
            guard let b = v.boolValue else { throw mismatch(key, type) }
            return b
        }
        func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? {
            guard let v = try present(key, type) else { return nil }
            guard let i = v.integerValue else { throw mismatch(key, type) }
            return i
        }
        func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
            guard let v = try present(key, type) else { return nil }
            guard let d = v.doubleValue else { throw mismatch(key, type) }
            return d
        }
        /// The value of attribute `key`, nil when it is nil or absent; a key that names the id
        /// or a to-one relationship is not a `type`.
        func present(_ key: Key, _ type: Any.Type) throws -> Value? {
            let name = key.stringValue
            guard let v = row.value(name) else {
                if name == "id" || row.relationship(name) != nil { throw mismatch(key, type) }
                return nil
            }
            return v.isNull ? Value?.none : v
        }

        func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
            let name = key.stringValue
            if type == ObjectID.self {
                // T is ObjectID (checked): no dynamic cast, and no generic closure to map it.
                guard let id = row.objectID(name) else { return nil }
                return unsafeBitCast(id, to: T.self)
            }
            guard let v = row.value(name) else {
                // A to-one relationship read as another type: `decode` names the mismatch.
                return row.relationship(name) == nil ? nil : try decode(type, forKey: key)
            }
            return v.isNull ? nil : try convert(v, type, key)
        }

        /// `v` as a `T`: a Foundation type stored as a value, an enum backed by a primitive, or
        /// any other Codable value stored as JSON.
        func convert<T: Decodable>(_ v: Value, _ type: T.Type, _ key: Key) throws -> T {
            // T is Date (checked): no dynamic cast.
            if type == Date.self, case .date(let d) = v { return unsafeBitCast(d, to: T.self) }
            if let result = foundationValue(v, as: T.self) { return result }
            // A decimal's or a URL's text that does not read as one (another tool's): JSON's
            // reading would take `" 1.5"` for 1.5 and round a 50-digit number.
            if type == Decimal.self || type == URL.self { throw mismatch(key, type) }
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
        var decoder: Decoder { SnapshotDecoder(row: row) }
    }
}
