import Foundation
import SharedStoreSQLite
import SharedStoreSupport

// Which coding key a property feeds, found by writing it: a probe of the record is encoded, the
// property is set to another value through its key path, and the probe is encoded again. The one
// key whose value changed is the property's stored name. A property that is not coded (a copy
// made in `init(from:)`, a value kept out of the coding keys) changes no key, and two properties
// whose coding keys swap names each change the other's: neither is mistaken, whatever its type.

extension RecordShape {
    /// The coding key the writable property `keyPath` feeds; nil when it cannot be written or
    /// given another value here (the caller reads the probes instead).
    static func storedNameByWriting<R: Record>(_ keyPath: PartialKeyPath<R>) -> Result<String, StoreError>? {
        func open<V>(_ type: V.Type) -> Result<String, StoreError>? {
            guard let writable = keyPath as? WritableKeyPath<R, V> else { return nil }
            return write(writable)
        }
        return _openExistential(type(of: keyPath).valueType, do: open)
    }

    private static func write<R: Record, V>(_ keyPath: WritableKeyPath<R, V>) -> Result<String, StoreError>? {
        guard let (base, _) = try? probe(R.self), let before = try? RecordEncoder.capture(base),
            let again = try? RecordEncoder.capture(probe(R.self).0)
        else { return nil }
        // Keys whose value moves from one encoding of the same record to the next (a time of
        // encoding): they say nothing of the property.
        let volatile = Set(before.keys).union(again.keys).filter { before[$0] != again[$0] }
        let candidates = otherValues(than: base[keyPath: keyPath])
        guard !candidates.isEmpty else { return nil }
        for candidate in candidates {
            // A fresh probe each time: a record that is a class shares its instance.
            guard var copy = try? probe(R.self).0 else { return nil }
            copy[keyPath: keyPath] = candidate
            guard let after = try? RecordEncoder.capture(copy) else { continue }
            let changed = Set(before.keys).union(after.keys).filter {
                before[$0] != after[$0] && !volatile.contains($0)
            }
            .sorted()
            if changed.count == 1, let name = changed.first {
                // The key must now hold the value written: a path through a nested value
                // (`\.point.x`) changes the key that holds the whole, to something else.
                guard let expected = encodedForm(candidate), after[name] == expected else {
                    return .failure(
                        StoreError(
                            .unknownProperty,
                            "\(keyPath.debugDescription) is not one stored, coded property of \(R.self) (it is "
                                + "part of '\(name)', or encoded otherwise than it holds)"))
                }
                return .success(name)
            }
            if changed.count > 1 {
                return .failure(
                    StoreError(
                        .unknownProperty,
                        "\(keyPath.debugDescription) changes \(changed.count) coded properties of \(R.self) "
                            + "(\(changed.joined(separator: ", "))): a typed key names one"))
            }
        }
        return .failure(
            StoreError(
                .unknownProperty,
                "\(keyPath.debugDescription) is not one stored, coded property of \(R.self): writing it changes "
                    + "nothing the record encodes"))
    }

    /// Values of `V` other than `current`: one for a scalar type or an optional of one, every
    /// case of an enum, a fresh probe of any other `Decodable` type.
    private static func otherValues<V>(than current: V) -> [V] {
        let n: Int64 = 0x7A11_0000 + 1
        if let b = current as? Bool, let flipped = (!b) as? V { return [flipped] }
        if let (v, _, _) = scalar(n, V.self), let typed = v as? V { return [typed] }
        if V.self == ObjectID.self || V.self == ObjectID?.self {
            let id = ObjectID(storeID: UUID(), entity: "Probe", primaryKey: n)
            return [id as? V, Optional(id) as? V].compactMap { $0 }
        }
        if let optional = optionalScalar(n, V.self) { return [optional] }
        // An optional of anything else: nil first (the probe's value is never nil).
        var values: [V] = []
        if _typeName(V.self, qualified: true).hasPrefix("Swift.Optional<"), let none = (Int?.none as Any) as? V {
            values.append(none)
        }
        if let cases = V.self as? any CaseIterable.Type { return values + allCases(cases).compactMap { $0 as? V } }
        guard let decodable = V.self as? any Decodable.Type else { return values }
        let log = ProbeLog()
        log.next = n
        log.round = 1
        log.writing = true
        return values + [(try? decodable.init(from: ProbeDecoder(log: log, depth: 1))) as? V].compactMap { $0 }
    }

    /// How a scalar value (or an optional of one, or an id) is encoded; nil for other types.
    private static func storedForm<V>(_ v: V) -> Value? {
        switch v {
        case let x as String: return .string(x)
        case let x as Int: return .integer(Int64(x))
        case let x as Int64: return .integer(x)
        case let x as Double: return .double(x)
        case let x as Bool: return .bool(x)
        case let x as Date: return .date(x)
        case let x as UUID: return .uuid(x)
        case let x as Data: return .data(x)
        case let x as URL: return .string(x.absoluteString)
        case let x as ObjectID: return .integer(x.primaryKey)
        default: return nil
        }
    }

    /// How `v` is encoded as one property (nil: it cannot be encoded).
    private static func encodedForm<V>(_ v: V) -> Value? {
        if let stored = storedForm(v) { return stored }
        guard let encodable = v as? any Encodable else { return nil }
        func encoded<T: Encodable>(_ t: T) -> Value? { RecordEncoder.encodedValue(t) }
        return encoded(encodable)
    }

    private static func allCases<C: CaseIterable>(_ type: C.Type) -> [Any] { C.allCases.map { $0 } }

    /// A value of an optional of a scalar type, by concrete casts (no lookup of conformances).
    private static func optionalScalar<V>(_ n: Int64, _ type: V.Type) -> V? {
        let some: Any?
        switch type {
        case is String?.Type: some = Optional("\u{2}probe \(n)")
        case is Int?.Type: some = Optional(Int(truncatingIfNeeded: n))
        case is Int64?.Type: some = Optional(n)
        case is Double?.Type: some = Optional(Double(n) + 0.5)
        case is Bool?.Type: some = Optional(true)
        case is Date?.Type: some = Optional(Date(timeIntervalSince1970: Double(n)))
        case is UUID?.Type: some = Optional(UUID())
        case is Data?.Type: some = Optional(Data([1, 2, 3]))
        case is URL?.Type: some = URL(string: "probe://write/\(n)").map { $0 as Any }
        default: some = nil
        }
        return some.flatMap { $0 as? V }
    }
}
