import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// The identity of an object: entity, primary key and the store it lives in.
///
/// Prints as `Article/42`; its URI form `x-sharedstore://<store-uuid>/Article/42` names the store
/// too. An id made by `insert` before the save is temporary (negative key) until the save.
///
/// The `id` of a fetched ``Record`` also carries what the record was read as (the object's
/// version and values then), so that ``ObjectContext/update(_:)`` in any context writes
/// only what the record changed and meets another process's change as a conflict. It is not part
/// of the identity: two ids of one object are equal, and it is not encoded. It holds the
/// snapshots of the fetch that read the record (shared by its records, not copied): a record or
/// its id kept for long keeps them; keep an id made with ``init(storeID:entity:primaryKey:)`` (or
/// parsed) to hold just the identity.
public struct ObjectID: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    /// The store the object lives in (``Container/storeID``).
    public let storeID: UUID
    /// The name of the object's entity.
    public let entity: String
    /// The object's key in its entity's table (`Z_PK`): positive once saved, negative while the id is
    /// temporary.
    public let primaryKey: Int64
    /// What a record decoded with this id was read as (nil: an id of anything else).
    package private(set) var readAs: ReadBase?

    /// The id of `entity`'s object with key `primaryKey` in store `storeID`, unchecked: an id the
    /// store does not hold makes a later read or write fail with `.objectNotFound`.
    public init(storeID: UUID, entity: String, primaryKey: Int64) {
        self.storeID = storeID
        self.entity = entity
        self.primaryKey = primaryKey
    }

    /// Whether the id was made by an insert not yet saved: ``SaveResult/permanentID(for:)`` gives the
    /// id the save assigned.
    public var isTemporary: Bool { primaryKey < 0 }

    /// This id carrying `reads` (the fetch that read its object) as what it was read as (a
    /// record's id).
    package func reading(_ reads: ReadBase) -> ObjectID {
        var id = self
        id.readAs = reads
        return id
    }

    /// Equal when they name the same object: what a record's id was read as does not count.
    public static func == (a: ObjectID, b: ObjectID) -> Bool {
        a.primaryKey == b.primaryKey && a.entity == b.entity && a.storeID == b.storeID
    }

    /// Hashes the key alone: ids of one context, view or result nearly always share their store,
    /// and keys of different entities rarely meet in one table, so hashing the store's 16 bytes
    /// and the entity's name would cost every lookup (a fetch registers each object) and tell
    /// little; == still compares all three.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(primaryKey)
    }

    /// `Article/42` (`Article/t3` for a temporary id).
    public var description: String {
        // Written in place, not interpolated: a list prints an id per row.
        let number = primaryKey.magnitude
        let digits = Digits.count(number)
        let marker = isTemporary ? 1 : 0
        var name = entity
        return name.withUTF8 { name in
            let total = name.count + 1 + marker + digits
            return String(unsafeUninitializedCapacity: total) { out in
                _ = out.initialize(from: name)
                out[name.count] = UInt8(ascii: "/")
                if marker == 1 { out[name.count + 1] = UInt8(ascii: "t") }
                Digits.write(number, width: digits, at: total - digits, into: out)
                return total
            }
        }
    }

    /// The id with its store: `x-sharedstore://<store-uuid>/Article/42` (Core Data's
    /// `uriRepresentation()`). ``init(parsing:storeID:)`` reads it back, and refuses it for another
    /// store.
    public var uri: String { "x-sharedstore://\(storeID.uuidString.lowercased())/\(description)" }

    /// Orders ids by entity name, then key (the store is not compared).
    public static func < (a: ObjectID, b: ObjectID) -> Bool {
        (a.entity, a.primaryKey) < (b.entity, b.primaryKey)
    }

    /// Parses `Entity/N` (or the URI form) as an id of the store `storeID`.
    ///
    /// - Throws: ``StoreError`` `.malformedID` for anything else, `.foreignID` when a URI names
    ///   another store.
    public init(parsing text: String, storeID: UUID) throws {
        var body = Substring(text)
        if body.hasPrefix("x-sharedstore://") {
            body = body.dropFirst("x-sharedstore://".count)
            guard let slash = body.firstIndex(of: "/"), let uuid = UUID(uuidString: String(body[..<slash])) else {
                throw StoreError(.malformedID, "malformed object id '\(text)': expected Entity/N")
            }
            guard uuid == storeID else {
                throw StoreError(.foreignID, "object id '\(text)' belongs to another store")
            }
            body = body[body.index(after: slash)...]
        }
        let parts = body.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, Model.isIdentifier(String(parts[0])), let pk = Int64(parts[1]), pk > 0,
            parts[1].allSatisfy(\.isASCII), parts[1].first != "+"
        else {
            throw StoreError(.malformedID, "malformed object id '\(text)': expected Entity/N with N a positive integer")
        }
        self.init(storeID: storeID, entity: String(parts[0]), primaryKey: pk)
    }

    /// Decodes the URI form (``uri``), a single string.
    ///
    /// - Throws: ``StoreError`` `.malformedID` for anything else.
    public init(from decoder: Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard text.hasPrefix("x-sharedstore://"), let uuid = UUID(uuidString: String(text.dropFirst(16).prefix(36)))
        else {
            throw StoreError(.malformedID, "malformed object id URI '\(text)'")
        }
        try self.init(parsing: text, storeID: uuid)
    }

    /// Encodes the URI form (``uri``) as a single string, so that a decoded id knows its store.
    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(uri)
    }
}

/// What the records of one fetch were read as: its snapshots, shared by every record's id (one
/// reference each, no allocation per record), found by id when a record is updated.
package final class ReadBase: Sendable {
    private let snapshots: [Snapshot]
    /// Each snapshot's position by key, made at the first lookup in a fetch of many (updates of
    /// fetched records are rare next to fetches).
    private let positions = Protected<[Int64: Int]?>(nil)

    init(snapshots: [Snapshot]) { self.snapshots = snapshots }

    /// The snapshot of `id`'s object in the fetch (nil: it read no such object).
    package func snapshot(of id: ObjectID) -> Snapshot? {
        guard snapshots.count > 8 else { return snapshots.first { $0.id == id } }
        let i = positions.withLock { positions -> Int? in
            if positions == nil {
                var made: [Int64: Int] = [:]
                made.reserveCapacity(snapshots.count)
                for (i, s) in snapshots.enumerated() { made[s.id.primaryKey] = i }
                positions = made
            }
            return positions?[id.primaryKey]
        }
        return i.flatMap { snapshots[$0].id == id ? snapshots[$0] : nil }
    }
}
