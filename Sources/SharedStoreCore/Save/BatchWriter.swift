import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// The objects of one streamed batch (``ObjectContext/batch(_:)``): inserted one at a time,
/// written at once, all in the batch's one write transaction. Valid only inside the closure
/// that receives it.
public struct BatchWriter: ~Copyable {
    var writer: ChangeWriter
    var count = 0
    /// Objects found or made by ``uniqueObject(_:_:)``, by entity and values.
    var unique: [String: [[String: Value]: ObjectID]] = [:]
    /// Related objects known to exist in this transaction (checked once, or made by the batch):
    /// the entity by primary key, an integer hashed per row rather than a whole id (the store is
    /// checked for every target). Two objects of different entities with one key take turns;
    /// each is still checked.
    var existing: [Int64: String] = [:]
    /// How many times `insert` and `uniqueObject` were called (an object's place in the batch).
    var placed = 0
    /// The related object checked last (``existing`` holds it).
    var lastExisting: (pk: Int64, entity: String)?
    /// The keys each record type inserted here encoded last (records of a type find their
    /// properties by comparing names).
    var recordMemos: [ObjectIdentifier: RecordEncoder.Memo] = [:]
    /// The memo of the record type inserted last (a batch's records are mostly of one type: a
    /// comparison instead of a hash).
    var lastMemo: (type: ObjectIdentifier, memo: RecordEncoder.Memo)?
    /// The entity the last insert by name named: a batch names one entity line after line
    /// (compared, not looked up by name).
    var lastEntity: Entity?

    var storeID: UUID { writer.s.storeID }

    /// Inserts an object with `values` and to-one `relationships` (stored objects, or objects this
    /// batch made); returns its permanent id.
    ///
    /// - Throws: `.validation`, `.uniqueness`, `.unknownProperty`, `.objectNotFound` naming
    ///   `object`.
    public mutating func insert(
        _ entityName: String, _ values: consuming [String: Value], relationships: [String: ObjectID?] = [:],
        object: @autoclosure () -> String
    ) throws -> ObjectID {
        placed += 1
        let e: Entity
        if let last = lastEntity, last.name == entityName {
            e = last
        } else {
            e = try writer.model.entity(entityName)
            lastEntity = e
        }
        return try insertObject(e, values, relationships: relationships, object: object())
    }

    /// Inserts one object by name: each name is checked to be a stored attribute of `e` that
    /// a caller may set.
    mutating func insertObject(
        _ e: Entity, _ values: consuming [String: Value], relationships: [String: ObjectID?],
        object: @autoclosure () -> String
    ) throws -> ObjectID {
        // Each value put in its place once: the insert reads them by position.
        var row = writer.takeRow(for: e)
        defer { writer.keep(row) }
        for (name, value) in values {
            guard let i = e.attributeIndex(name), !e.attributes[i].isDerived else {
                try e.checkAttribute(name, object: object())
                continue
            }
            row.values[i] = value
        }
        for (name, target) in relationships {
            guard let i = e.toOneIndex(name) else {
                throw StoreError(.unknownProperty, "\(object()): \(e.name) has no to-one relationship '\(name)'")
            }
            row.targets[i] = try target.map { try key(of: $0, e.toOneRelationships[i], object: object()) }
        }
        let pk = try writer.insert(e, &row, object: object())
        count += 1
        return ObjectID(storeID: storeID, entity: e.name, primaryKey: pk)
    }

    /// The key of `target`, which to-one `r` of an inserted object points at: a stored object of
    /// `r`'s entity, or one this batch made.
    mutating func key(of target: ObjectID, _ r: Relationship, object: @autoclosure () -> String) throws
        -> Int64
    {
        // Rows of a batch often point at the object the previous one did: its existence is
        // known then (compared, not hashed); that it is of the relationship's entity, never.
        // A target known to exist is looked up once (not looked up, then inserted again). The
        // id is read in place: a copy of it per row costs more than the lookup.
        let pk = target.primaryKey
        let known =
            (lastExisting.map { $0.pk == pk && $0.entity == target.entity } ?? false) || existing[pk] == target.entity
        guard target.storeID == storeID else {
            throw StoreError(
                .objectNotFound,
                "\(object()).\(r.name) refers to \(target), an object of another store (\(target.storeID.uuidString))")
        }
        guard target.entity == r.destination, !target.isTemporary,
            try known || writer.exists(try writer.model.entity(r.destination), target.primaryKey)
        else {
            throw StoreError(.objectNotFound, "\(object()).\(r.name) refers to \(target), which is not in the store")
        }
        if !known { existing[pk] = target.entity }
        lastExisting = (pk, target.entity)
        return pk
    }

    /// The object of `entityName` whose uniqueness constraint `values` hold: the stored one, or
    /// one this batch inserts now (a category named in many lines is one object).
    ///
    /// The stored object is the first that matches `values` on one of the entity's uniqueness
    /// constraints (a constraint with a nil part matches nothing); with none, the object is
    /// inserted.
    ///
    /// - Throws: `.validation` for a value of the wrong type; like
    ///   ``insert(_:_:relationships:object:)`` when it inserts.
    public mutating func uniqueObject(
        _ entityName: String, _ values: [String: Value], object: @autoclosure () -> String
    )
        throws -> ObjectID
    {
        placed += 1
        if let known = unique[entityName]?[values] { return known }
        let e = try writer.model.entity(entityName)
        let changes = PropertyChanges(values: values, relationships: [:])
        let id: ObjectID
        if let pk = try writer.existingUnique(e, changes, object: object()) {
            id = ObjectID(storeID: storeID, entity: e.name, primaryKey: pk)
        } else {
            id = try insertObject(e, values, relationships: [:], object: object())
        }
        unique[entityName, default: [:]][values] = id
        return id
    }

    /// ``insert(_:_:relationships:object:)`` naming the object in errors by its place among the
    /// batch's calls of `insert` and `uniqueObject` (`Article (batch object 3)`), whatever the
    /// store holds.
    public mutating func insert(
        _ entityName: String, _ values: consuming [String: Value], relationships: [String: ObjectID?] = [:]
    ) throws -> ObjectID {
        let place = placed + 1
        return try insert(
            entityName, values, relationships: relationships, object: "\(entityName) (batch object \(place))")
    }

    /// ``uniqueObject(_:_:object:)`` naming the object in errors by its place in the batch.
    public mutating func uniqueObject(_ entityName: String, _ values: [String: Value]) throws -> ObjectID {
        let place = placed + 1
        return try uniqueObject(entityName, values, object: "\(entityName) (batch object \(place))")
    }
}
