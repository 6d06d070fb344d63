import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// A change as the save path records it: entity and properties by index, no strings.
struct RecordedChange {
    var kind: HistoryChange.Kind
    var entity: Int
    var primaryKey: Int64
    var updated: [Int] = []
    var tombstone: [(Int, Value)] = []
    /// The object's global id (nil: a row a foreign tool inserted without one).
    var globalID: UUID? = nil
}

/// The compact binary form of a transaction's changes, one BLOB per history row.
///
/// One row per transaction keeps the cost of history near the measured limit of a compact row
/// (DESIGN.md: 0.65× a raw insert, against 0.30× for a row per change plus an index).
/// Layout: version byte, change count, then per change: kind, entity index, primary key, the
/// global id (version 2: a byte 0 for none, 16 followed by its bytes, or 1 for the successor of
/// the previous change's id — a batch of inserts made by one process in one millisecond, which
/// costs a byte each instead of 17), updated property indexes (update) or tombstone index/value
/// pairs (delete), all varints. Version 1 records (before global ids) read with no global id.
package enum HistoryCodec {
    static let version: UInt8 = 2

    /// Encodes changes recorded with model indexes under the store's catalog numbers.
    static func encode(_ changes: [RecordedChange], _ numbering: HistoryNumbering) -> [UInt8] {
        // Reserved before the first byte: a literal of one would be allocated, then moved.
        var out: [UInt8] = []
        out.reserveCapacity(8 + changes.count * 24)
        out.append(version)
        putVarint(UInt64(changes.count), &out)
        let identity = numbering.isIdentity
        var previous: UUID?
        for c in changes {
            out.append(code(c.kind))
            putVarint(UInt64(identity ? c.entity : numbering.entityNumber[c.entity]), &out)
            putVarint(UInt64(bitPattern: c.primaryKey), &out)
            putGlobalID(c.globalID, after: &previous, &out)
            let number = { (i: Int) in identity ? i : numbering.propertyNumber[c.entity][i] }
            switch c.kind {
            case .insert:
                break
            case .update:
                putVarint(UInt64(c.updated.count), &out)
                for i in c.updated { putVarint(UInt64(number(i)), &out) }
            case .delete:
                putVarint(UInt64(c.tombstone.count), &out)
                for (i, v) in c.tombstone {
                    putVarint(UInt64(number(i)), &out)
                    putValue(v, &out)
                }
            }
        }
        return out
    }

    /// Encodes inserts recorded as runs: the same bytes as ``encode(_:_:)`` of them.
    static func encode(_ inserts: InsertRuns, _ numbering: HistoryNumbering) -> [UInt8] {
        // Reserved before the first byte: a literal of one would be allocated, then moved.
        var out: [UInt8] = []
        out.reserveCapacity(12 + inserts.count * 6 + inserts.runs.count * 16)
        out.append(version)
        putVarint(UInt64(inserts.count), &out)
        let identity = numbering.isIdentity
        let insert = code(.insert)
        var previous: UUID?
        for run in inserts.runs {
            let entity = UInt64(identity ? Int(run.entity) : numbering.entityNumber[Int(run.entity)])
            var gid: UUID? = run.firstGlobalID
            for k in 0..<run.count {
                out.append(insert)
                putVarint(entity, &out)
                putVarint(UInt64(bitPattern: run.firstKey &+ Int64(k)), &out)
                putGlobalID(gid, after: &previous, &out)
                gid = gid.flatMap(GlobalID.successor)
            }
        }
        return out
    }

    static func entityMask(_ inserts: InsertRuns, _ numbering: HistoryNumbering) -> Int64 {
        let identity = numbering.isIdentity
        return inserts.runs.reduce(0) { $0 | bit(identity ? Int($1.entity) : numbering.entityNumber[Int($1.entity)]) }
    }

    /// A change's global id: 1 when it is the successor of the previous change's, else 16 and
    /// its bytes (0: none).
    static func putGlobalID(_ id: UUID?, after previous: inout UUID?, _ out: inout [UInt8]) {
        guard let id else {
            out.append(0)
            previous = nil
            return
        }
        if let p = previous, GlobalID.successor(of: p) == id {
            out.append(1)
        } else {
            out.append(16)
            withUnsafeBytes(of: id.uuid) { out.append(contentsOf: $0) }
        }
        previous = id
    }

    /// A transaction with no change (a migration's, a restore's).
    static let empty: [UInt8] = [version, 0]

    /// The byte of a change kind on disk, and back.
    static func code(_ kind: HistoryChange.Kind) -> UInt8 {
        switch kind {
        case .insert: return 0
        case .update: return 1
        case .delete: return 2
        }
    }

    static func kind(_ code: UInt8) -> HistoryChange.Kind? {
        switch code {
        case 0: return .insert
        case 1: return .update
        case 2: return .delete
        default: return nil
        }
    }

    /// Bit mask of the entities (by catalog number) a transaction touches, for filtering in SQL.
    static func entityMask(_ changes: [RecordedChange], _ numbering: HistoryNumbering) -> Int64 {
        if numbering.isIdentity { return changes.reduce(0) { $0 | bit($1.entity) } }
        return changes.reduce(0) { $0 | bit(numbering.entityNumber[$1.entity]) }
    }

    /// The mask of a transaction that concerns every entity (a migration's).
    static let allEntities: Int64 = -1

    static func bit(_ entity: Int) -> Int64 { entity < 62 ? (1 << Int64(entity)) : (1 << 62) }

    /// Decodes a record: entities and properties by catalog number, named as `model` names them
    /// now (a removed entity's changes and a removed property are left out); `entityFilter`
    /// holds model indexes.
    package static func decode(
        _ bytes: [UInt8], model: Model, numbering: HistoryNumbering, storeID: UUID, entityFilter: Set<Int>?
    ) throws -> [HistoryChange] {
        var r = Reader(bytes: bytes)
        let format = try r.byte()
        guard format == 1 || format == version else { throw r.corrupt("unknown history format") }
        let count = try r.count()
        var changes: [HistoryChange] = []
        changes.reserveCapacity(count)
        var previous: UUID?
        for _ in 0..<count {
            let code = try r.byte()
            guard let kind = kind(code) else { throw r.corrupt("change kind \(code)") }
            let number = try r.count()
            guard number < numbering.decoding.count else { throw r.corrupt("entity number \(number)") }
            let pk = Int64(bitPattern: try r.varint())
            let globalID = format == 1 ? nil : try r.globalID(after: previous)
            previous = globalID
            // An entity a migration removed: its changes are read past and left out.
            let mapped = numbering.decoding[number]
            let props = mapped?.properties ?? []
            var updated: [String] = []
            var tombstone: [String: Value]?
            switch kind {
            case .insert:
                break
            case .update:
                for _ in 0..<(try r.count()) {
                    if let p = try r.property(props, removed: mapped == nil) { updated.append(p) }
                }
            case .delete:
                var t: [String: Value] = [:]
                for _ in 0..<(try r.count()) {
                    let p = try r.property(props, removed: mapped == nil)
                    let v = try r.value()
                    if let p { t[p] = v }
                }
                tombstone = t
            }
            guard let (ei, _) = mapped else { continue }
            let entity = model.entities[ei]
            if let entityFilter, !entityFilter.contains(ei) { continue }
            changes.append(
                HistoryChange(
                    kind: kind, objectID: ObjectID(storeID: storeID, entity: entity.name, primaryKey: pk),
                    updatedProperties: updated, tombstone: tombstone, globalID: globalID))
        }
        return changes
    }

    // MARK: - Primitives

    static func putVarint(_ v: UInt64, _ out: inout [UInt8]) {
        var v = v
        while v >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }

    static func putBytes(_ b: some Collection<UInt8>, _ out: inout [UInt8]) {
        putVarint(UInt64(b.count), &out)
        out.append(contentsOf: b)
    }

    static func putValue(_ v: Value, _ out: inout [UInt8]) {
        switch v {
        case .null: out.append(0)
        case .integer(let i):
            out.append(1)
            putVarint(UInt64(bitPattern: i), &out)
        case .double(let d):
            out.append(2)
            putVarint(d.bitPattern, &out)
        case .string(let s):
            out.append(3)
            putBytes(s.utf8, &out)
        case .bool(let b): out.append(b ? 4 : 5)
        case .date(let d):
            out.append(6)
            putVarint(d.timeIntervalSince1970.bitPattern, &out)
        case .data(let d):
            out.append(7)
            putBytes(d, &out)
        case .uuid(let u):
            out.append(8)
            putBytes(withUnsafeBytes(of: u.uuid) { Array($0) }, &out)
        }
    }

    struct Reader {
        let bytes: [UInt8]
        var i = 0

        func corrupt(_ what: String) -> StoreError {
            StoreError(.historyCorrupt, "corrupt history record: \(what)")
        }

        mutating func byte() throws -> UInt8 {
            guard i < bytes.count else { throw corrupt("truncated") }
            defer { i += 1 }
            return bytes[i]
        }

        mutating func varint() throws -> UInt64 {
            var v: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                let b = try byte()
                guard shift < 64 else { throw corrupt("varint too long") }
                v |= UInt64(b & 0x7f) << shift
                if b < 0x80 { return v }
                shift += 7
            }
        }

        mutating func count() throws -> Int {
            let v = try varint()
            guard v <= UInt64(bytes.count) * 8 + 64 else { throw corrupt("count \(v)") }
            return Int(v)
        }

        /// A global id: 0 (none), 1 (the successor of `previous`) or 16 and its bytes.
        mutating func globalID(after previous: UUID?) throws -> UUID? {
            let n = try byte()
            if n == 0 { return nil }
            if n == 1 {
                guard let previous, let next = GlobalID.successor(of: previous) else {
                    throw corrupt("a global id follows none")
                }
                return next
            }
            guard n == 16, i + 16 <= bytes.count else { throw corrupt("global id of \(n) bytes") }
            defer { i += 16 }
            return GlobalID.uuid(Array(bytes[i..<(i + 16)]))
        }

        /// A property number, as the name it has in `names` now (nil: removed by a migration;
        /// any number of an entity that was removed).
        mutating func property(_ names: [String?], removed: Bool) throws -> String? {
            let i = try count()
            if removed { return nil }
            guard i < names.count else { throw corrupt("property number \(i)") }
            return names[i]
        }

        mutating func bytes(_ n: Int) throws -> ArraySlice<UInt8> {
            guard n <= bytes.count - i else { throw corrupt("truncated") }
            defer { i += n }
            return bytes[i..<(i + n)]
        }

        mutating func value() throws -> Value {
            switch try byte() {
            case 0: return .null
            case 1: return .integer(Int64(bitPattern: try varint()))
            case 2: return .double(Double(bitPattern: try varint()))
            case 3: return .string(String(decoding: try bytes(try count()), as: UTF8.self))
            case 4: return .bool(true)
            case 5: return .bool(false)
            case 6: return .date(Date(timeIntervalSince1970: Double(bitPattern: try varint())))
            case 7: return .data(Data(try bytes(try count())))
            case 8:
                let b = Array(try bytes(try count()))
                guard b.count == 16 else { throw corrupt("uuid length") }
                return .uuid(
                    UUID(
                        uuid: (
                            b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                            b[14], b[15]
                        )))
            default: throw corrupt("value tag")
            }
        }
    }
}
