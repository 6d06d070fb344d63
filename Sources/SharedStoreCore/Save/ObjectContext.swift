import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// A unit of work on the store: Core Data's `NSManagedObjectContext`.
///
/// A context collects inserts, updates and deletes and writes them in one SQLite transaction on
/// ``save()``, together with one history transaction that carries its ``name`` and
/// ``transactionAuthor``. It is confined to the task that uses it (not Sendable); what crosses
/// tasks are ``Snapshot`` values and ``ObjectID``s. A fetch or a count sees what the store holds
/// with this context's unsaved changes applied (``FetchRequest/includesPendingChanges``); a
/// failed save keeps the changes pending.
///
/// For example:
/// ```swift
/// let context = container.newContext(name: "share", author: "ShareExtension")
/// let id = try context.insert("Article", ["title": "Hello", "url": "https://swift.org"])
/// let result = try context.save()   // result.token, result.permanentID(for: id)
/// ```
public final class ObjectContext {
    /// The container whose store the context reads and writes.
    public let container: Container
    // These three, like the pending changes below, skip Swift's run-time exclusivity check (see
    // there): a save reads each of them.

    /// The context's name (Core Data's `name`): every history transaction it saves records it, for
    /// diagnostics.
    @exclusivity(unchecked) public var name: String?
    /// The author its saves record in history (Core Data's `transactionAuthor`): a consumer excludes
    /// its own author when it fetches history, so that it does not merge its own changes.
    @exclusivity(unchecked) public var transactionAuthor: String?
    /// How a save resolves conflicts with the store (default `.error`).
    @exclusivity(unchecked) public var mergePolicy: MergePolicy = .error
    /// How many of its latest reads the context keeps as the base of conflict detection: at
    /// least this many objects, at most twice as many, or all that one fetch larger than that
    /// read (at least 1; by default every read, until ``rollback()``). An update of an object
    /// read before those is checked against the store as it is when the update is made, as
    /// after a rollback; an update keeps the read it was made on until the save, however many
    /// reads follow. Set it for a context that reads more objects than it will change (a daemon
    /// over a large store): then it holds neither the whole store in memory nor a table of
    /// every object it read. A fetch of objects read before and since forgotten keeps each
    /// anew, which costs more than finding it kept.
    public var maximumReadsKept: Int {
        get { registered.capacity }
        set {
            registered.capacity = max(1, newValue)
            // Updates made before the bound keep their reads from now on, as later ones do.
            for id in updateOrder where updates[id]?.read == nil { updates[id]?.read = registered[id] }
        }
    }

    struct PendingInsert {
        var id: ObjectID
        /// The entity of `id`, found when the object was inserted (a save does not look it up again).
        let entity: Entity
        var values: [String: Value]
        var relationships: [String: ObjectID?]
    }

    struct PendingUpdate {
        var values: [String: Value] = [:]
        var relationships: [String: ObjectID?] = [:]
        /// The state each property was changed against when that is not what this context read
        /// of the object: a record's read (``update(_:)``). The save checks each property against
        /// its own.
        var bases: [String: Snapshot] = [:]
        /// What the context had read of the object when it was first updated: the base of the
        /// save when a bounded read set (``maximumReadsKept``) forgets it before the save.
        var read: Snapshot?
        /// The properties an update of a record set, with the fetch of that record (a later
        /// update of a record of the same fetch that has one back as it read it takes that change
        /// back).
        var fromRecord: [String: ObjectIdentifier] = [:]
        /// The fetch of the record whose read every changed property was checked against (nil:
        /// plain updates, or records of several fetches).
        var source: ObjectIdentifier? {
            let sources = Set(fromRecord.values)
            let names = Set(values.keys).union(relationships.keys)
            guard sources.count == 1, Set(fromRecord.keys) == names,
                Set(bases.values.map(\.version)).count == 1
            else { return nil }
            return sources.first
        }

        /// Forgets what `names` were changed against and who set them: a plain update's are
        /// changed against what the context read.
        mutating func plain(_ names: some Sequence<String>) {
            for name in names {
                bases[name] = nil
                fromRecord[name] = nil
            }
        }
    }

    /// A record's change this context saved on exactly what the record read: records of that
    /// fetch read as the object after the save (their own change is no conflict; their other
    /// values are not stale).
    struct RecordSave {
        /// The version the fetch's records read.
        let from: Int64
        /// The object after the last such save.
        let after: Snapshot
    }

    // The pending changes and the reads below skip Swift's run-time exclusivity checks. A
    // context is used by one thread or task at a time (its contract: ``checkOwner()`` checks it
    // with SHAREDSTORE_CONCURRENCY_DEBUG=1, and those checks never saw another thread's access
    // anyway), and no method calls out of the library (a hook, a caller's closure) while it holds
    // one of them in place: hooks and merge policies run in the save's writer on its own copies,
    // forEach bodies and awakeFromFetch after the reads are done. So no two accesses can overlap.
    // Each check cost about 75 instructions, and a save made some 20 of them (a save of one
    // object: 55k instructions).

    /// By object, then by the fetch (its ``ReadBase``) whose records' changes were saved.
    @exclusivity(unchecked) var recordSaves: [ObjectID: [ObjectIdentifier: RecordSave]] = [:]

    private var nextTemporaryKey: Int64 = 1
    /// The entity of the last ``insert(_:_:relationships:)`` (of this context's model).
    @exclusivity(unchecked) private var lastInsertedEntity: Entity?
    @exclusivity(unchecked) var inserts: [PendingInsert] = []
    @exclusivity(unchecked) var updates: [ObjectID: PendingUpdate] = [:]
    @exclusivity(unchecked) var updateOrder: [ObjectID] = []
    @exclusivity(unchecked) var deletes: [ObjectID] = []
    @exclusivity(unchecked) var deleteSet: Set<ObjectID> = []
    /// Many-to-many links to make (true) or break (false), in call order.
    @exclusivity(unchecked) var links: [(id: ObjectID, relationship: String, target: ObjectID, linked: Bool)] = []
    /// What this context last read of each object: the base of conflict detection on save.
    @exclusivity(unchecked) var registered = ReadSet()
    /// The storage of the row a save's inserts are filled in, kept from one save to the next
    /// (empty between saves: ``InsertRow/forget()``).
    @exclusivity(unchecked) var spareRow = InsertRow.empty

    /// With `SHAREDSTORE_CONCURRENCY_DEBUG=1`: the task or thread the context belongs to.
    private let owner: ConcurrencyDebug.Owner?
    /// The snapshot the context is pinned to (``pin()``).
    @exclusivity(unchecked) var pinned: PinnedRead?

    /// A context; `confined`: its user keeps it to one thread or task at a time by a lock of its
    /// own, and the concurrency debug switch does not check it.
    init(container: Container, name: String?, author: String?, confined: Bool = false) {
        self.container = container
        self.name = name
        self.transactionAuthor = author
        owner = ConcurrencyDebug.isOn && !confined ? .current : nil
    }

    /// With `SHAREDSTORE_CONCURRENCY_DEBUG=1`, stops the process when this context is used from
    /// a task or thread other than its own (``ConcurrencyDebug``).
    @inline(__always)
    func checkOwner(_ call: StaticString = #function) {
        guard let owner else { return }
        let here = ConcurrencyDebug.Owner.current
        if !owner.admits(here) { ConcurrencyDebug.trap(name ?? "(unnamed)", call, owner: owner, here: here) }
    }

    var model: Model { container.model }

    /// Whether the context holds unsaved inserts, updates, deletes or links.
    public var hasChanges: Bool { !inserts.isEmpty || !updates.isEmpty || !deletes.isEmpty || !links.isEmpty }

    /// Drops every pending change, and forgets what the context read (the base of conflict
    /// detection, which a save keeps): a later update reads the object as the store holds it then.
    public func rollback() {
        checkOwner()
        // Keep the storage: a context is usually saved again and again (one save per change).
        // What is empty already is left alone (a save of one update empties two of seven).
        if !inserts.isEmpty {
            inserts.removeAll(keepingCapacity: true)
        }
        if !updates.isEmpty {
            updates.removeAll(keepingCapacity: true)
            updateOrder.removeAll(keepingCapacity: true)
        }
        if !deletes.isEmpty {
            deletes.removeAll(keepingCapacity: true)
            deleteSet.removeAll(keepingCapacity: true)
        }
        if !links.isEmpty { links.removeAll(keepingCapacity: true) }
        registered.reset()
        if !recordSaves.isEmpty { recordSaves.removeAll() }
    }

    // MARK: - Changes

    /// Inserts a new object; returns its temporary id (``SaveResult`` maps it to the permanent one).
    ///
    /// - Throws: `.unknownEntity` or `.unknownProperty` at once; value rules are checked on save.
    @discardableResult
    public func insert(_ entityName: String, _ values: [String: Value], relationships: [String: ObjectID?] = [:]) throws
        -> ObjectID
    {
        checkOwner()
        let entity: Entity
        // The entity the last insert named (a context inserts objects of one entity again and
        // again): its name compared, not hashed.
        if let last = lastInsertedEntity, last.name == entityName {
            entity = last
        } else {
            entity = try model.entity(entityName)
            lastInsertedEntity = entity
        }
        try checkNames(entity, values: values, relationships: relationships)
        let id = ObjectID(storeID: container.storeID, entity: entityName, primaryKey: -nextTemporaryKey)
        nextTemporaryKey += 1
        inserts.append(PendingInsert(id: id, entity: entity, values: values, relationships: relationships))
        return id
    }

    /// Sets attributes (and to-one `relationships`) of an object, stored or inserted in this
    /// context, on the next save. The values it sets replace what the store holds only for those
    /// properties; a save of an object another save changed since this context read it is a
    /// conflict for the ``mergePolicy``.
    ///
    /// For example:
    /// ```swift
    /// try context.update(id, ["isRead": true])
    /// try context.save()
    /// ```
    ///
    /// - Throws: ``StoreError``: `.unknownEntity`, `.unknownProperty` for a name the entity lacks,
    ///   `.validation` for a derived attribute or a relationship to an object of the wrong entity,
    ///   `.objectNotFound` for an object the store does not hold (or this context deleted),
    ///   `.foreignID` for an id of another store. Value rules are checked on save.
    public func update(_ id: ObjectID, _ values: [String: Value], relationships: [String: ObjectID?] = [:]) throws {
        checkOwner()
        let entity = try checkID(id)
        try checkNames(entity, values: values, relationships: relationships)
        // Each lookup hashes the whole id: the sets a context usually leaves empty are not asked.
        guard deleteSet.isEmpty || !deleteSet.contains(id) else {
            throw StoreError(.objectNotFound, "\(id) is deleted in this context")
        }
        if let i = insertPosition(id) {
            inserts[i].values.merge(values) { $1 }
            inserts[i].relationships.merge(relationships) { $1 }
            return
        }
        var read = registered[id]
        if read == nil {
            // A blind update: what the store holds now is what this context "read".
            read = try object(with: id)
        }
        let pending = updates.count
        Self.add(values, relationships, to: &updates[id, default: PendingUpdate()])
        if updates.count != pending {
            updateOrder.append(id)
            // Kept only when the read set may forget it (every read is kept by default).
            if registered.capacity != Int.max { updates[id]?.read = read }
        }
    }

    /// `values` and `relationships` merged into `pending`, as plain changes (not a record's).
    private static func add(
        _ values: [String: Value], _ relationships: [String: ObjectID?], to pending: inout PendingUpdate
    ) {
        pending.values.merge(values) { $1 }
        pending.relationships.merge(relationships) { $1 }
        if !pending.bases.isEmpty || !pending.fromRecord.isEmpty {
            pending.plain(Array(values.keys) + Array(relationships.keys))
        }
    }

    /// Sets a to-one relationship (nil clears it) on the next save.
    ///
    /// - Throws: like ``update(_:_:relationships:)``; `.unknownProperty` when `relationship` is not
    ///   a to-one relationship of the object's entity.
    public func set(_ relationship: String, of id: ObjectID, to target: ObjectID?) throws {
        try update(id, [:], relationships: [relationship: target])
    }

    /// Links `id` to `target` through many-to-many relationship `relationship` on save (and the
    /// inverse with it); a link that exists already is left as it is.
    ///
    /// For example: `try context.relate(post, "topics", to: swift)`
    ///
    /// - Throws: `.unknownProperty` when `relationship` is not many-to-many, `.validation` when
    ///   `target` is not of its destination entity, `.foreignID` or `.objectNotFound` for an id
    ///   this context cannot name.
    public func relate(_ id: ObjectID, _ relationship: String, to target: ObjectID) throws {
        checkOwner()
        try checkLink(id, relationship, target)
        links.append((id, relationship, target, true))
    }

    /// Breaks the link between `id` and `target` through many-to-many `relationship` on save; a
    /// link that does not exist is left alone.
    ///
    /// - Throws: like ``relate(_:_:to:)``.
    public func unrelate(_ id: ObjectID, _ relationship: String, from target: ObjectID) throws {
        checkOwner()
        try checkLink(id, relationship, target)
        links.append((id, relationship, target, false))
    }

    private func checkLink(_ id: ObjectID, _ relationship: String, _ target: ObjectID) throws {
        let entity = try checkID(id)
        _ = try checkID(target)
        guard let r = entity.relationship(named: relationship), model.joinTable(entity, r) != nil else {
            throw StoreError(.unknownProperty, "\(entity.name) has no many-to-many relationship '\(relationship)'")
        }
        guard target.entity == r.destination else {
            throw StoreError.validation(
                "\(entity.name).\(relationship) takes \(r.destination) objects, not \(target)", object: entity.name,
                property: relationship, rule: .destination(r.destination))
        }
    }

    /// Deletes an object on save, applying the delete rules of its relationships (the save
    /// fails with `.deleteDenied` for a `deny` rule with related objects, and with
    /// `.objectNotFound` when the object is gone). An object inserted in this context is simply
    /// dropped.
    ///
    /// - Throws: `.foreignID` for an id of another store, `.unknownEntity`, `.objectNotFound` for
    ///   a temporary id this context did not insert.
    public func delete(_ id: ObjectID) throws {
        checkOwner()
        _ = try checkID(id)
        if let i = insertPosition(id) {
            inserts.remove(at: i)
            links.removeAll { $0.id == id || $0.target == id }
            return
        }
        if updates.removeValue(forKey: id) != nil { updateOrder.removeAll { $0 == id } }
        if deleteSet.insert(id).inserted { deletes.append(id) }
    }

    /// The entity of `id` when it can name a stored object of this store.
    ///
    /// - Throws: `.objectNotFound` for a temporary id or one of another store.
    func storedEntity(_ id: ObjectID) throws -> Entity {
        guard id.storeID == container.storeID, !id.isTemporary else {
            throw StoreError(.objectNotFound, "\(id) is not a stored object of this store")
        }
        return try model.entity(id.entity)
    }

    private func checkID(_ id: ObjectID) throws -> Entity {
        guard id.storeID == container.storeID else { throw StoreError(.foreignID, "\(id) belongs to another store") }
        let entity = try model.entity(id.entity)
        if id.isTemporary, insertPosition(id) == nil {
            throw StoreError(.objectNotFound, "\(id) is a temporary id this context did not insert (or already saved)")
        }
        return entity
    }

    /// The place in ``inserts`` of the object `id` names (nil: not one this context inserted and
    /// has not saved). A context gives temporary keys in order and never again, so ``inserts``
    /// runs from the highest key (the least negative) down: the key is found by bisection, with no
    /// table kept for it per insert, and then the whole id compared.
    func insertPosition(_ id: ObjectID) -> Int? {
        guard id.isTemporary else { return nil }
        let i = ObjectID.position(of: id, among: inserts.count) { inserts[$0].id.primaryKey }
        return i < inserts.count && inserts[i].id == id ? i : nil
    }

    private func checkNames(_ entity: Entity, values: [String: Value], relationships: [String: ObjectID?]) throws {
        try entity.checkAttributes(values)
        for (key, target) in relationships {
            guard let r = entity.relationship(named: key), !r.isToMany else {
                throw StoreError(.unknownProperty, "\(entity.name) has no to-one relationship '\(key)'")
            }
            if let target, target.entity != r.destination {
                throw StoreError.validation(
                    "\(entity.name).\(key) takes a \(r.destination), not \(target)", object: entity.name, property: key,
                    rule: .destination(r.destination))
            }
        }
    }

    // MARK: - Reading

    /// The objects matching `request`, in its order: what the store holds, with this context's
    /// unsaved inserts, updates and deletes of the entity applied unless
    /// ``FetchRequest/includesPendingChanges`` is off. The context remembers the versions it
    /// read, so that a save of those objects detects a conflict.
    ///
    /// For example:
    /// ```swift
    /// let unread = try context.fetch(FetchRequest("Article", where: Key("isRead") == false,
    ///                                             sortedBy: [Key("createdAt").descending], limit: 20))
    /// ```
    ///
    /// - Throws: ``StoreError``: `.unknownEntity`, `.unknownProperty` for a key path the model
    ///   lacks, `.validation` for a value of the wrong type, `.invalidArgument` for a comparison
    ///   that has no meaning or a negative window, `.modelOutdated` when another process migrated
    ///   the store to a newer model, `.busy` or `.storage` when SQLite fails.
    public func fetch(_ request: FetchRequest) throws -> [Snapshot] {
        checkOwner()
        if request.includesPendingChanges && hasChanges && hasPendingChanges(of: request.entity) {
            let snapshots = try fetchIncludingPending(request, try model.entity(request.entity))
            container.awake(snapshots)
            return snapshots
        }
        let snapshots = try readStatement { s in try s.fetch(request) }
        registered.record(snapshots)
        container.awake(snapshots)
        return snapshots
    }

    /// Streams the objects matching `request`, in order, from one consistent read: `body` sees
    /// one object at a time, so a million objects cost the memory of one (a cursor). Streamed
    /// objects are not remembered as read (a save of them is not checked for conflicts). The read
    /// lasts as long as the stream: `body` must not read this container itself (its reader is
    /// busy: such a read fails with `.invalidArgument`); collect what it needs first, as
    /// `main-app list` does with the categories.
    ///
    /// For example:
    /// ```swift
    /// try context.forEach(FetchRequest("Article", sortedBy: [Key("createdAt").ascending])) { print($0.id) }
    /// ```
    ///
    /// - Throws: like ``fetch(_:)``, or what `body` throws (the stream stops there).
    public func forEach(_ request: FetchRequest, _ body: (Snapshot) throws -> Void) throws {
        checkOwner()
        guard let awake = container.awakeFromFetch(request.entity) else {
            return try readStatement { s in try s.forEach(request, body) }
        }
        try readStatement { s in
            try s.forEach(request) { snapshot in
                awake(snapshot)
                try body(snapshot)
            }
        }
    }

    /// Aggregates (count, sum, min, max, average) of the objects of `entity` matching
    /// `condition`, one row per distinct value of the `groupedBy` key paths (attributes, or
    /// attributes through a to-one relationship), in their order; one row without grouping.
    ///
    /// For example, how many articles each category has, and its newest:
    /// ```swift
    /// try context.aggregate("Article", [.count, .max("createdAt")], groupedBy: ["category.label"])
    /// ```
    ///
    /// - Throws: `.unknownEntity`, `.unknownProperty` for a key path the model lacks,
    ///   `.invalidArgument` for a grouping by a relationship, an aggregate over an attribute that is
    ///   not a number, date, string or decimal, or a sum that is not of a number; the errors of
    ///   ``fetch(_:)`` for the condition.
    public func aggregate(
        _ entity: String, _ aggregates: [Aggregate], where condition: Condition = .always, groupedBy: [String] = []
    ) throws -> [AggregateRow] {
        checkOwner()
        let e = try model.entity(entity)
        return try readStatement { s in
            try s.aggregate(e, aggregates, where: condition, groupedBy: groupedBy)
        }
    }

    /// How many objects match `request` (with this context's unsaved changes, as ``fetch(_:)``),
    /// within its window. A request without a window whose condition is one of the entity's
    /// ``KeptCount``s reads that count, one row whatever the size of the store.
    ///
    /// - Throws: like ``fetch(_:)``.
    public func count(_ request: FetchRequest) throws -> Int {
        checkOwner()
        if request.includesPendingChanges && hasChanges && hasPendingChanges(of: request.entity) {
            return try countIncludingPending(request, try model.entity(request.entity))
        }
        return try readStatement { s in try s.count(request) }
    }

    /// The stored object with `id`.
    ///
    /// - Throws: `.objectNotFound` when there is none.
    public func object(with id: ObjectID) throws -> Snapshot {
        checkOwner()
        let entity = try storedEntity(id)
        guard let s = try readStore({ s in try s.snapshot(entity, id.primaryKey) }) else {
            throw StoreError(.objectNotFound, "no object \(id) in the store")
        }
        registered.record([s])
        container.awake([s])
        return s
    }

    /// The ids of the objects on the to-many side of `relationship` of `id`, as stored (pending
    /// changes aside).
    ///
    /// - Throws: `.unknownEntity`, `.unknownProperty` when `relationship` is not a to-many
    ///   relationship of the object's entity.
    public func related(_ relationship: String, of id: ObjectID) throws -> [ObjectID] {
        checkOwner()
        let entity = try model.entity(id.entity)
        guard let r = entity.relationship(named: relationship), r.isToMany else {
            throw StoreError(.unknownProperty, "\(entity.name) has no to-many relationship '\(relationship)'")
        }
        let dest = try model.entity(r.destination)
        let keys = try readStore { s in
            try model.joinTable(entity, r).map { try s.linked($0, to: id.primaryKey) }
                ?? s.objects(dest, whose: r.inverse, is: id.primaryKey)
        }
        return keys.map { ObjectID(storeID: container.storeID, entity: dest.name, primaryKey: $0) }
    }
}
