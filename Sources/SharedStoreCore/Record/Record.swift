import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// A Codable struct that maps to an entity: its stored properties are the entity's attributes
/// (String, integers, Double, Float, Bool, Date, Data, UUID, optionals of these) and to-one
/// relationships (`ObjectID?`); `id` is the object id, nil before the first save.
///
/// For example:
/// ```swift
/// struct Article: Record {
///     static let entityName = "Article"
///     var id: ObjectID?
///     var title: String
///     var category: ObjectID?
/// }
/// let id = try context.insert(Article(title: "Hello"))
/// let unread = try context.fetch(Article.self, where: Key("isRead") == false)
/// ```
///
/// A record's `init(from:)` reads what it needs while it runs: the records of one fetch are
/// decoded through one decoder, so a decoder or container kept for later reads the fetch's last
/// row.
public protocol Record: Codable, Sendable, FetchedElement {
    /// The name of the entity the record maps to; a model without it makes every use fail with
    /// `.unknownEntity`.
    static var entityName: String { get }
    /// The object's id: nil for a record not inserted yet, set by the fetch that read it. The record
    /// encoder leaves it out of the values it writes.
    var id: ObjectID? { get set }
    /// What the type declares about its entity for a types-first model
    /// (``Model/init(version:records:)``): rules, relationships, indexes, hooks. None by default.
    static var schema: RecordSchema<Self> { get }
}

extension Record {
    /// No declarations: every property is a plain attribute.
    public static var schema: RecordSchema<Self> { RecordSchema() }
}

extension ObjectContext {
    /// Inserts a record; returns its temporary id.
    ///
    /// - Throws: `.unknownEntity` when the model lacks `R.entityName`, `.unknownProperty` for a
    ///   property the entity lacks, `.validation` for a value the record cannot store (a nested value
    ///   outside a `.json` attribute, an object id in an attribute). Value rules are checked on save.
    @discardableResult
    public func insert<R: Record>(_ record: R) throws -> ObjectID {
        let (values, rels) = try RecordEncoder.encode(record, entity: try model.entity(R.entityName), inserting: true)
        return try insert(R.entityName, values, relationships: rels)
    }

    /// Writes the properties a fetched record changed since it was read, in this context or any
    /// other (a record's id carries what it was read as): a property the record left alone is
    /// never written, so another process's change to it survives, and a property both changed is
    /// a conflict for the ``mergePolicy`` (under `.error` the save throws, naming the property,
    /// what the record read, what the store holds and what the record saves), as for an object
    /// this context read itself.
    ///
    /// A record made by hand with an id (not fetched) is compared with what this context read of
    /// its object, or with the store as it is now when it read nothing.
    ///
    /// For example:
    /// ```swift
    /// var article = try await container.read { try $0.record(Article.self, with: id) }
    /// article.isRead = true
    /// try await container.write(author: "MainApp") { try $0.update(article) }   // isRead only
    /// ```
    ///
    /// A record whose object another writer deleted since it was read is, like an object this
    /// context read, the merge policy's: `.error` throws a conflict naming the deletion,
    /// `.objectTrump` and `.overwrite` bring the object back as the record has it (at a version
    /// above any it had, through the entity's `willSave`, rules and `didSave`), `.storeTrump`
    /// and `.rollback` leave it deleted. A record that changed nothing it read writes nothing,
    /// whether its object is there or not.
    ///
    /// - Throws: `.objectNotFound` for a record without an id (never inserted), or made by hand
    ///   for an object that is gone; `.validation` for a property the record cannot encode; otherwise like
    ///   ``update(_:_:relationships:)``.
    public func update<R: Record>(_ record: R) throws {
        guard let id = record.id else {
            throw StoreError(.objectNotFound, "\(R.entityName) record has no id: insert it first")
        }
        let (values, rels) = try RecordEncoder.encode(record, entity: try model.entity(R.entityName))
        if insertPosition(id) != nil {
            try update(id, values, relationships: rels)
            return
        }
        guard let reads = id.readAs, var base = reads.snapshot(of: id) else {
            // Made by hand (or decoded from JSON): compared with what this context read.
            let read = try registered[id] ?? object(with: id)
            let changed = values.filter { read[$0.key] != $0.value }
            let relinked = rels.filter { read.relationships[$0.key] != $0.value }
            guard !changed.isEmpty || !relinked.isEmpty else { return }
            try update(id, changed, relationships: relinked)
            return
        }
        let source = ObjectIdentifier(reads)
        // A change of a record of this fetch that this context saved on exactly what the record
        // read: the record reads as the object after that save (its own change is no conflict,
        // and nothing else moved in between).
        if let saved = recordSaves[id]?[source], saved.from == base.version, saved.after.version > base.version {
            base = saved.after
        }

        // What the record changed; an earlier update of a record of this fetch that set a
        // property it now has back as it read it is taken back.
        let changed = values.filter { base[$0.key] != $0.value }
        let relinked = rels.filter { base.relationships[$0.key] != $0.value }
        if var pending = updates[id] {
            for (name, from) in pending.fromRecord where from == source && changed[name] == nil && relinked[name] == nil
            {
                guard values[name] != nil || rels[name] != nil else { continue }
                pending.values[name] = nil
                pending.relationships[name] = nil
                pending.bases[name] = nil
                pending.fromRecord[name] = nil
            }
            updates[id] = pending
        }
        guard !changed.isEmpty || !relinked.isEmpty else { return }
        try readForRecord(id, base: base)
        try update(id, changed, relationships: relinked)
        // Each property is checked against what the record read (a plain update's, against
        // what the context read).
        for name in Array(changed.keys) + Array(relinked.keys) {
            updates[id]?.bases[name] = base
            updates[id]?.fromRecord[name] = source
        }
    }

    /// What this context reads of `id` before updating it from a record read as `base`: the
    /// object as the store holds it now, or `base` when another writer deleted it.
    private func readForRecord(_ id: ObjectID, base: Snapshot) throws {
        if registered[id] == nil, !deleteSet.contains(id), id.storeID == container.storeID {
            // The object as the store holds it now is this context's read (one read, which the
            // update then needs not make). Deleted by another writer since the record read
            // it: what the record read is the context's read, and the save resolves the deletion
            // by the merge policy (a conflict, the object back, or left deleted), as for an
            // object the context read itself.
            do {
                _ = try object(with: id)
            } catch let error as StoreError where error.code == .objectNotFound {
                registered.record([base])
            }
        }
    }

    /// Fetches records of type `R`.
    ///
    /// - Throws: like ``fetch(_:)``, and `.validation` for an object the record cannot be decoded
    ///   from (a property it requires is nil, or of another type).
    public func fetch<R: Record>(
        _ type: R.Type, where condition: Condition = .always, sortedBy sort: [SortKey] = [],
        limit: Int? = nil, offset: Int = 0
    ) throws -> [R] {
        try R.records(
            from: try fetch(FetchRequest(R.entityName, where: condition, sortedBy: sort, limit: limit, offset: offset)))
    }

    /// The first record of type `R` matching `condition` in `sort` order, or nil.
    ///
    /// - Throws: like ``fetch(_:where:sortedBy:limit:offset:)``.
    public func fetchOne<R: Record>(_ type: R.Type, where condition: Condition = .always, sortedBy sort: [SortKey] = [])
        throws -> R?
    {
        try fetch(type, where: condition, sortedBy: sort, limit: 1).first
    }

    /// How many objects of `R`'s entity match `condition` (a kept count when one matches).
    ///
    /// - Throws: like ``count(_:)``.
    public func count<R: Record>(_ type: R.Type, where condition: Condition = .always) throws -> Int {
        try count(FetchRequest(R.entityName, where: condition))
    }

    /// Whether any object of `R`'s entity matches `condition`.
    ///
    /// - Throws: like ``fetch(_:)``.
    public func exists<R: Record>(_ type: R.Type, where condition: Condition = .always) throws -> Bool {
        try !fetch(FetchRequest(R.entityName, where: condition, limit: 1)).isEmpty
    }

    /// Deletes a fetched or saved record's object (pending until the save, like ``delete(_:)``).
    ///
    /// - Throws: `.objectNotFound` for a record without an id (never saved); otherwise like
    ///   ``delete(_:)-(ObjectID)``.
    public func delete<R: Record>(_ record: R) throws {
        guard let id = record.id else {
            throw StoreError(.objectNotFound, "\(R.entityName) record has no id: it was never saved")
        }
        try delete(id)
    }

    /// The stored object with `id` as a record of type `R`.
    ///
    /// - Throws: `.objectNotFound` when no object has `id`; `.validation` when the object cannot
    ///   be decoded as `R` (a property it requires is nil, or of another type).
    public func record<R: Record>(_ type: R.Type, with id: ObjectID) throws -> R {
        try R(snapshot: object(with: id))
    }
}

extension Record {
    /// Decodes a record from a snapshot.
    ///
    /// - Throws: `.validation` when the snapshot lacks a property the record requires or holds a
    ///   value of another type.
    public init(snapshot: Snapshot) throws { try self.init(snapshot: snapshot, layout: nil) }

    /// Records decoded from the snapshots of one fetch, each knowing what it was read as.
    ///
    /// - Throws: `.validation` naming the first object that cannot be decoded as `Self`.
    package static func records(from snapshots: [Snapshot]) throws -> [Self] {
        // One layout and one decoding row for the fetch: each record finds its properties by one
        // comparison, and its decoder and container are the first record's.
        // The row reads each snapshot where it is in the array: no copy of one per record.
        guard let first = snapshots.first else { return [] }
        let row = DecodingRow(snapshots, layout: RecordLayout(names: first.attributeNames))
        var records: [Self] = []
        records.reserveCapacity(snapshots.count)
        for i in snapshots.indices {
            row.begin(i)
            records.append(try Self(row: row))
        }
        return records
    }

    /// Decodes a record from a snapshot of a fetch whose attributes `layout` describes.
    init(snapshot: Snapshot, layout: RecordLayout?) throws {
        try self.init(row: DecodingRow(snapshot, layout: layout))
    }

    /// Decodes a record from the snapshot `row` is at.
    init(row: DecodingRow) throws {
        do {
            try self.init(from: SnapshotDecoder(row: row))
        } catch let e as StoreError {
            // The decoder's own errors do not know the object: they name it here.
            throw e.describing(ValidationFailure(object: row.snapshot.id.description, property: nil, rule: .record))
        } catch {
            let id = row.snapshot.id
            throw StoreError.validation(
                "cannot read \(id) as \(Self.self): \(error)", object: id.description, property: nil, rule: .record)
        }
    }
}
