import Foundation
import SharedStoreCore
import SharedStoreSupport

/// The JSON of one mirrored transaction on the server:
/// `{"v":1,"model":3,"at":"1764460828.502",`
/// `"changes":[{"k":"u","e":"Article","g":"…","a":{…},"r":{…},"p":"12"},{"k":"d",…}]}`
/// (`"k":"m"` with `"w"`: the object `g` was merged into `w`, on a collision)
/// (`r`: to-one relationships; `m`: many-to-many links the object owns, when it has any; `p`:
/// the object's primary key in the uploading store, for that store's own use; `at`: the local
/// transaction's timestamp, which tells a transaction from another one with the same token in a
/// store put back to an older copy).
///
/// Values are tagged and lossless (`["i","9007199254740993"]`, `["f","0.1"]`, `["t","1.5e9"]`,
/// `["x","base64"]`…): JSON numbers would round 64-bit integers and dates. Any machine can read
/// it with PostgreSQL's JSON functions.
package enum MirrorPayload {
    static let version = 1

    package static func encode(
        _ changes: [MirrorChange], modelVersion: Int, at timestamp: Double? = nil, highWater: Int64? = nil
    ) -> String {
        let items: [JSONValue] = changes.map { change in
            switch change {
            case .delete(let entity, let gid):
                return .object([("k", .string("d")), ("e", .string(entity)), ("g", .string(text(gid)))])
            case .merge(let entity, let loser, let winner):
                return .object([
                    ("k", .string("m")), ("e", .string(entity)), ("g", .string(text(loser))),
                    ("w", .string(text(winner))),
                ])
            case .upsert(let o):
                return .object(
                    [
                        ("k", .string("u")), ("e", .string(o.entity)), ("g", .string(text(o.globalID))),
                        ("a", .object(o.values.keys.sorted().map { ($0, encode(o.values[$0] ?? .null)) })),
                        ("r", .object(o.toOne.keys.sorted().map { ($0, .string(text(o.toOne[$0] ?? UUID()))) })),
                    ]
                        + (o.toMany.isEmpty
                            ? []
                            : [
                                (
                                    "m",
                                    JSONValue.object(
                                        o.toMany.keys.sorted().map { name in
                                            (name, .array((o.toMany[name] ?? []).map { .string(text($0)) }))
                                        })
                                )
                            ])
                        + (o.originKey.map { [("p", JSONValue.string(String($0)))] } ?? []))
            }
        }
        return JSONValue.object(
            [("v", .number(Double(version))), ("model", .number(Double(modelVersion)))]
                + (timestamp.map { [("at", JSONValue.string(String($0)))] } ?? [])
                + (highWater.map { [("hw", JSONValue.string(String($0)))] } ?? []) + [("changes", .array(items))]
        ).serialized
    }

    static func text(_ gid: UUID) -> String { GlobalID.text(gid) }

    static func encode(_ v: Value) -> JSONValue {
        switch v {
        case .null: return .null
        case .string(let s): return .array([.string("s"), .string(s)])
        case .integer(let i): return .array([.string("i"), .string(String(i))])
        case .double(let d): return .array([.string("f"), .string(String(d))])
        case .bool(let b): return .array([.string("b"), .bool(b)])
        case .date(let t): return .array([.string("t"), .string(String(t.timeIntervalSince1970))])
        case .data(let d): return .array([.string("x"), .string(d.base64EncodedString())])
        case .uuid(let u): return .array([.string("u"), .string(text(u))])
        }
    }

    /// The payload's model version and changes.
    ///
    /// - Throws: ``MirrorError`` naming what is malformed (a server row another program wrote).
    package static func decode(_ text: String, sequence: Int64) throws -> (model: Int, changes: [MirrorChange]) {
        let d = try decodeAll(text, sequence: sequence)
        return (d.model, d.changes)
    }

    /// The local transaction's timestamp a payload names (nil: none, or not readable).
    package static func timestamp(_ text: String) -> Double? {
        guard case .string(let at)? = (try? JSONValue(parsing: text))?["at"] else { return nil }
        return Double(at)
    }

    /// The newest local token when a full upload was made (`hw`; nil: none): a copy of the store
    /// older than that lost transactions, whatever keys they went up under.
    package static func highWater(_ text: String) -> Int64? {
        guard case .string(let hw)? = (try? JSONValue(parsing: text))?["hw"] else { return nil }
        return Int64(hw)
    }

    /// A whole number in `range`, exactly (`1e20`, `2.5` or `true` is not a model version).
    static func exactInteger(_ raw: JSONValue?, in range: ClosedRange<Int>) -> Int? {
        guard case .number(let d)? = raw else { return nil }
        guard d.isFinite, d == d.rounded(), d >= Double(range.lowerBound), d <= Double(range.upperBound) else {
            return nil
        }
        return Int(d)
    }

    static func decodeAll(_ text: String, sequence: Int64) throws -> (model: Int, changes: [MirrorChange]) {
        func bad(_ what: String) -> MirrorError {
            MirrorError(
                "server transaction \(sequence) is malformed: \(what)", code: .malformedRow,
                reason: .badRow(sequence: sequence, problem: what))
        }
        let object: JSONValue
        do {
            object = try JSONValue(parsing: text)
        } catch {
            throw bad("not a JSON object (\(error))")
        }
        guard case .object = object else { throw bad("not a JSON object") }
        guard exactInteger(object["v"], in: 0...1_000_000) == version else { throw bad("unknown payload version") }
        guard let model = exactInteger(object["model"], in: 1...1_000_000), case .array(let items)? = object["changes"]
        else {
            throw bad("no model version (a whole number from 1 to 1000000) or no changes")
        }
        let changes = try items.map { try change($0, bad) }
        return (model, changes)
    }

    /// One change of a payload (`bad` names what is malformed).
    private static func change(_ c: JSONValue, _ bad: (String) -> MirrorError) throws -> MirrorChange {
        func string(_ v: JSONValue?) -> String? {
            if case .string(let s)? = v { return s }
            return nil
        }
        func gid(_ v: JSONValue?) -> UUID? { string(v).flatMap(UUID.init(uuidString:)) }
        func pairs(_ v: JSONValue?) -> [(String, JSONValue)]? {
            if case .object(let p)? = v { return p }
            return nil
        }
        guard case .object = c, let kind = string(c["k"]), let entity = string(c["e"]), let g = gid(c["g"]) else {
            throw bad("a change lacks its kind, entity or global id")
        }
        if kind == "d" { return .delete(entity: entity, globalID: g) }
        if kind == "m" {
            guard let w = gid(c["w"]) else { throw bad("a merge lacks the global id it merges into") }
            return .merge(entity: entity, loser: g, winner: w)
        }
        let what = "the change of \(entity) \(text(g))"
        guard kind == "u" else { throw bad("\(what) is of kind '\(kind)', none of u (upsert), d (delete), m (merge)") }
        guard let a = pairs(c["a"]) else { throw bad("\(what) lacks its attributes (\"a\", an object)") }
        guard let r = pairs(c["r"]) else { throw bad("\(what) lacks its to-one relationships (\"r\", an object)") }
        var values: [String: Value] = [:]
        values.reserveCapacity(a.count)
        for (name, raw) in a {
            guard let v = value(raw) else { throw bad("\(entity).\(name) has an unreadable value") }
            values[name] = v
        }
        var toOne: [String: UUID] = [:]
        for (name, raw) in r {
            guard let target = gid(raw) else { throw bad("\(entity).\(name) is not a global id") }
            toOne[name] = target
        }
        var toMany: [String: [UUID]] = [:]
        if let m = c["m"] {
            guard let links = pairs(m) else { throw bad("\(entity)'s links are not an object") }
            for (name, raw) in links {
                guard case .array(let targets) = raw else {
                    throw bad("\(entity).\(name) is not a list of global ids")
                }
                toMany[name] = try targets.map { item in
                    guard let target = gid(item) else {
                        throw bad("\(entity).\(name) holds something other than a global id")
                    }
                    return target
                }
            }
        }
        let key = string(c["p"]).flatMap { Int64($0) }
        return .upsert(
            MirrorObject(entity: entity, globalID: g, values: values, toOne: toOne, toMany: toMany, originKey: key))
    }

    private static func value(_ raw: JSONValue) -> Value? {
        switch raw {
        case .null: return .null
        case .array(let pair) where pair.count == 2:
            guard case .string(let tag) = pair[0] else { return nil }
            if tag == "b" {
                if case .bool(let b) = pair[1] { return .bool(b) }
                return nil
            }
            guard case .string(let s) = pair[1] else { return nil }
            switch tag {
            case "s": return .string(s)
            case "i": return Int64(s).map(Value.integer)
            case "f": return Double(s).map(Value.double)
            case "t": return Double(s).map { .date(Date(timeIntervalSince1970: $0)) }
            case "x": return Data(base64Encoded: s).map(Value.data)
            case "u": return UUID(uuidString: s).map(Value.uuid)
            default: return nil
            }
        default: return nil
        }
    }
}
