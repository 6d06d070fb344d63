import Foundation
import SharedStoreSQLite

/// Global ids (issue 14): every object gets one at insert, the same on every machine a mirror
/// reaches; a primary key (``ObjectID``) names an object in one store only.
extension ObjectContext {
    /// The global id of the stored object `id`.
    ///
    /// - Throws: `.objectNotFound` when there is no such object (or a foreign tool inserted its
    ///   row without one: `storectl verify` reports those).
    public func globalID(of id: ObjectID) throws -> UUID {
        checkOwner()
        let entity = try storedEntity(id)
        guard let gid = try readStatement({ s in try s.globalID(entity, id.primaryKey) }) else {
            throw StoreError(.objectNotFound, "no object \(id) with a global id in the store")
        }
        return gid
    }

    /// The global ids of the stored objects of `ids` (one read; objects without one are left out).
    ///
    /// - Throws: `.unknownEntity` for an id of an entity the model lacks; ``StoreError`` when the
    ///   store cannot be read.
    public func globalIDs(of ids: [ObjectID]) throws -> [ObjectID: UUID] {
        checkOwner()
        var out: [ObjectID: UUID] = [:]
        try readStore { s in
            for id in ids where id.storeID == container.storeID && !id.isTemporary {
                if let gid = try s.globalID(try model.entity(id.entity), id.primaryKey) { out[id] = gid }
            }
        }
        return out
    }

    /// The object of `entity` whose global id is `globalID`, or nil.
    ///
    /// - Throws: `.unknownEntity`; ``StoreError`` when the store cannot be read.
    public func objectID(forGlobalID globalID: UUID, entity: String) throws -> ObjectID? {
        checkOwner()
        let e = try model.entity(entity)
        return try readStatement { s in try s.primaryKey(e, globalID: globalID) }.map {
            ObjectID(storeID: container.storeID, entity: e.name, primaryKey: $0)
        }
    }

    /// ``forEach(_:_:)`` with each object's global id (nil for a row a foreign tool inserted
    /// without one), read in the same statement.
    ///
    /// - Throws: like ``forEach(_:_:)``.
    public func forEachWithGlobalID(_ request: FetchRequest, _ body: (Snapshot, UUID?) throws -> Void) throws {
        checkOwner()
        let awake = container.awakeFromFetch(request.entity)
        try readStatement { s in
            try s.forEachWithGlobalID(request) { snapshot, gid in
                awake?(snapshot)
                try body(snapshot, gid)
            }
        }
    }
}
