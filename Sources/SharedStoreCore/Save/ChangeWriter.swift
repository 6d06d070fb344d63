import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// Applies changes inside one write transaction: validates values, writes rows, and records
/// each change for history. Merge policies are resolved by ``MergeResolver``, delete rules by
/// ``DeleteRules``, history by ``ChangeRecorder``.
///
/// Shared by ``ObjectContext/save()`` and the batch operations so that both validate, apply delete
/// rules and record history the same way.
struct ChangeWriter {
    let s: TransactionSQL
    let resolver: MergeResolver
    var recorder = ChangeRecorder()
    /// What updates fill (``updatedSnapshots`` and the two after it), made by the first one: a
    /// save of inserts alone paid for the teardown of each of them.
    private var updated: Updated?
    /// What only deletes, restored objects, conflicts and derived values fill (``deleted`` and the
    /// rest below), made the first time one is written: a writer is made and dropped per save, and
    /// a save of inserts alone paid for the teardown of each of them. (What every update writes
    /// stays above: reached through here, it cost an update more than it saved an insert.)
    private var rare: Rare?
    /// The kept counts' changes in this transaction.
    var counter = KeptCounter()
    /// The time of this transaction: what every `now` derived attribute it writes holds.
    let saveTime = Date()
    /// Counts and sums this transaction changes (derived attributes), written before it commits.
    var aggregates = AggregateDeltas()
    /// The storage of the rows inserted by name, kept from one insert to the next.
    var spare = InsertRow.empty
    /// The entities' validation rules and lifecycle events (nil: none registered).
    let hooks: HookTable?

    /// - Parameter runsHooks: false for a mirror's import: the values were validated and the
    ///   lifecycle events ran on the machine that made them (run again, `awakeFromInsert` would
    ///   stamp this machine's time over the original's).
    /// - Parameter forMirror: the mirror's own writes (imports, a settled store taking the log's
    ///   state), the only ones that may record author ``MirrorKeys/author``.
    init(_ s: TransactionSQL, policy: MergePolicy = .objectTrump, runsHooks: Bool = true, forMirror: Bool = false) {
        self.s = s
        self.resolver = MergeResolver(policy: policy)
        self.hooks = runsHooks ? s.container.hookRegistry.all() : nil
        self.forMirror = forMirror
    }

    /// Whether this writer writes for the mirror (see ``init(_:policy:runsHooks:forMirror:)``).
    let forMirror: Bool

    var container: Container { s.container }
    var model: Model { s.model }

    // MARK: - Checks

    func validate(_ value: Value, _ a: Attribute, object: @autoclosure () -> String) throws -> SQLValue {
        try container.validator.validate(value, a, object: object())
    }

    func exists(_ e: Entity, _ pk: Int64) throws -> Bool { try s.exists(e, pk) }

    /// The stored object that has the same value as `changes` for one of the entity's uniqueness
    /// constraints (a nil part never conflicts, as in SQLite's unique indexes).
    func existingUnique(_ e: Entity, _ changes: PropertyChanges, object: @autoclosure () -> String) throws -> Int64? {
        for constraint in e.uniquenessConstraints {
            var bindings: [SQLValue] = []
            for name in constraint {
                if let a = e.attribute(named: name) {
                    bindings.append(
                        try SQLMapping.sqlValue(
                            changes.values[name] ?? a.defaultValue, a.type, object: object(), property: name))
                } else {
                    bindings.append(changes.relationships[name].flatMap { $0 }.map(SQLValue.integer) ?? .null)
                }
            }
            if bindings.contains(.null) { continue }
            if let pk = try s.objectMatching(e, columns: constraint, values: bindings) { return pk }
        }
        return nil
    }

    // MARK: - Updates

    /// Writes the properties that differ from the stored row and records them; a no-op when none do.
    ///
    /// With `read` (the snapshot the context read), an object whose version moved since is a
    /// conflict, resolved by the merge policy property by property; under `.error` it is added
    /// to ``conflicts`` and nothing is written for it.
    mutating func update(
        _ e: Entity, pk: Int64, _ changes: PropertyChanges, object: @autoclosure () -> String,
        read: Snapshot? = nil
    ) throws {
        guard let (current, globalID) = try stored(e, pk, read: read) else {
            guard let read else {
                throw StoreError(.objectNotFound, "no object \(object()) in the store (never saved, or deleted)")
            }
            switch resolver.deleted(read: read) {
            case .skip: return
            case .conflict(let conflict): conflicts.append(conflict)
            case .restore: try restore(e, read: read, changes)
            }
            return
        }
        var resolved = changes
        if read?.version == current.version { cleanUpdates.insert(current.id) }
        if let read {
            switch resolver.update(e, read: read, current: current, changes) {
            case .write(let c): resolved = c
            case .skip: return
            case .conflict(let conflict):
                conflicts.append(conflict)
                return
            }
        }
        // The mirror's imports may give a row another global id later in the transaction (a
        // collision's winner): their history reads it at the end.
        try write(e, current: current, resolved, object: object(), globalID: forMirror ? nil : globalID)
    }

    /// Object `pk` of `e` as stored, with its global id; nil when there is no such object.
    ///
    /// When the context's `read` is a whole row (``Snapshot/isRow(of:)``) at the version the store
    /// holds, it is the row: every write of an object's values bumps its version in the same
    /// transaction, and the save that wrote a snapshot remembers it as stored (or reads it back).
    /// Then only the version and global id are read (the global id is read each time: a mirror's
    /// collision gives a row another one without a version bump). That is 5k instructions against
    /// the row's 8k, measured. Otherwise, or when the versions differ (a conflict to resolve), the
    /// row is read. A foreign write that changed the row without its version goes unseen either
    /// way: conflicts are found by version.
    private func stored(_ e: Entity, _ pk: Int64, read: Snapshot?) throws -> (Snapshot, UUID?)? {
        if let read, read.id.primaryKey == pk, read.isRow(of: s.entitySQL(e).layout),
            let stored = try s.versionAndGlobalID(e, pk), stored.version == read.version
        {
            return (read, stored.globalID)
        }
        return try s.snapshotAndGlobalID(e, pk)
    }

    /// The columns an update writes: what differs between `current` and `changes`, validated.
    private struct Row {
        var columns: [String] = []
        var bindings: [SQLValue] = []
        var indexes: [Int] = []
    }

    /// Writes what differs between `current` and `changes`, records it (with `globalID`, the
    /// object's as read with `current`, when known), and keeps the result.
    private mutating func write(
        _ e: Entity, current: Snapshot, _ changes: PropertyChanges, object: @autoclosure () -> String,
        globalID: UUID?
    ) throws {
        var changes = changes
        let index = model.index(of: e)
        let hook = hooks?[index]
        if let will = hook?.willSave { try willSave(e, will, current: current, &changes, object: object()) }
        var row = Row()
        for (i, a) in e.attributes.enumerated() {
            guard let v = changes.values[a.name], v != current[a.name] else { continue }
            row.bindings.append(try validate(v, a, object: object()))
            row.columns.append(a.name)
            row.indexes.append(i)
        }
        for (i, r) in e.toOneRelationships.enumerated() {
            guard let target = changes.relationships[r.name], target != current.relationships[r.name]?.primaryKey else {
                continue
            }
            row.bindings.append(target.map(SQLValue.integer) ?? .null)
            row.columns.append(r.name)
            row.indexes.append(e.attributes.count + i)
        }
        guard !row.columns.isEmpty else {
            updatedSnapshots[current.id] = current
            return
        }
        let pk = current.id.primaryKey
        let derivedValues = try deriveOwn(e, index, current: current, changes, &row)
        let counted = !e.keptCounts.isEmpty && !counter.isNew(index, pk) && KeptCounter.reads(e, row.columns)
        if counted { counter.add(index, try s.keptCountFlags(e, pk), sign: -1) }
        try unique(e, object(), values: { changes.value($0, of: e, derived: derivedValues, current: current) }) {
            try s.updateRow(e, pk, columns: row.columns, properties: row.indexes, values: row.bindings)
        }
        if counted { counter.add(index, try s.keptCountFlags(e, pk), sign: 1) }
        recorder.updated(index, pk, properties: row.indexes, globalID: globalID)
        let after = Self.after(e, current: current, row, storeID: container.storeID)
        updatedSnapshots[current.id] = after.snapshot
        // Without derivations nothing else in the transaction writes an updated row (a delete
        // rule may: the save reads those back), and columns of the model's types keep what was
        // bound as it was bound.
        if after.exact && derivations.isEmpty, try s.columnsAsModelled(e) {
            writtenAsStored.insert(current.id)
        } else {
            writtenAsStored.remove(current.id)
        }
        if let hook, hook.readsSaved {
            try hook.hooks.check(after.snapshot, .update, object: current.id.description)
            hook.hooks.didSave?(after.snapshot)
        }
        if !derivations.isEmpty {
            let after = after.snapshot
            refeed(index, current: current, after: after)
            try propagate(index, pk, written: changes.values.filter { row.columns.contains($0.key) })
            relatedCache[ObjectKey(entity: index, pk: pk)] = after
        }
    }

    /// The object as `row` leaves it: `current` at the next version with the written columns as
    /// a read of them gives them (``SQLMapping/storedValue(_:_:)``). Not `exact` when a value has
    /// no known stored form (read it back to know it).
    private static func after(_ e: Entity, current: Snapshot, _ row: Row, storeID: UUID)
        -> (snapshot: Snapshot, exact: Bool)
    {
        var after = current.bumped()
        var exact = true
        let attributes = e.attributes
        let toOne = e.toOneRelationships
        for (k, p) in row.indexes.enumerated() {
            if p < attributes.count {
                let stored = SQLMapping.storedValue(row.bindings[k], attributes[p].type)
                if stored == nil { exact = false }
                after[attributes[p].name] = stored ?? .null
            } else if p - attributes.count < toOne.count {
                let r = toOne[p - attributes.count]
                if case .integer(let target) = row.bindings[k] {
                    after.relationships[r.name] = ObjectID(storeID: storeID, entity: r.destination, primaryKey: target)
                } else {
                    after.relationships[r.name] = nil
                }
            }
        }
        return (after, exact)
    }

    /// `willSave` of an object being updated: what it sets joins the changes.
    private func willSave(
        _ e: Entity, _ will: @Sendable (inout ObjectDraft) throws -> Void, current: Snapshot,
        _ changes: inout PropertyChanges, object: String
    ) throws {
        var values = current.values.merging(changes.values) { $1 }
        for a in e.derivedAttributes { values[a.name] = current[a.name] }
        var keys: [String: Int64?] = current.relationships.mapValues { $0.primaryKey }
        for (name, target) in changes.relationships { keys[name] = target }
        var draft = ObjectDraft(
            entity: e, id: current.id, storeID: container.storeID, values: values, relationships: keys)
        try EntityHooks.run("willSave", object) { try will(&draft) }
        for name in draft.changed { changes.values[name] = draft[name] }
    }

    /// The object's own derived values an update writes, added to `row`.
    private mutating func deriveOwn(
        _ e: Entity, _ index: Int, current: Snapshot, _ changes: PropertyChanges, _ row: inout Row
    ) throws -> [String: Value] {
        guard !derivations.isEmpty && !derivations.own[index].isEmpty else { return [:] }
        let derived = try ownDerived(
            e, index, values: { changes.values[$0] ?? current[$0] },
            target: { name in changes.relationships[name] ?? current.relationships[name]?.primaryKey },
            written: Set(row.columns))
        for (name, value) in derived.sorted(by: { $0.key < $1.key }) where value != current[name] {
            guard let i = e.attributes.firstIndex(where: { $0.name == name }) else { continue }
            row.bindings.append(try SQLMapping.sqlValue(value, e.attributes[i].type, object: e.name, property: name))
            row.columns.append(name)
            row.indexes.append(i)
        }
        return derived
    }

    /// Brings back an object another save deleted, under its own id, with what the context read
    /// and its changes on top. A related object deleted meanwhile is not brought back: the link
    /// is dropped.
    private mutating func restore(_ e: Entity, read: Snapshot, _ changes: PropertyChanges) throws {
        restored.insert(read.id)
        let index = model.index(of: e)
        let hook = hooks?[index]
        var changes = changes
        // As for any write of the object: willSave sees it as it comes back.
        if let will = hook?.willSave { try willSave(e, will, current: read, &changes, object: read.id.description) }
        var all = read.values.merging(changes.values) { $1 }
        var targets: [String: Int64?] = [:]
        var bindings: [SQLValue] = []
        for a in e.attributes {
            bindings.append(try validate(all[a.name] ?? a.defaultValue, a, object: read.id.description))
        }
        for r in e.toOneRelationships {
            let target = changes.relationships[r.name] ?? read.relationships[r.name]?.primaryKey
            let kept = try target.map { try exists(try model.entity(r.destination), $0) } ?? false
            bindings.append(kept ? target.map(SQLValue.integer) ?? .null : .null)
            targets[r.name] = kept ? target : nil
        }
        if !derivations.isEmpty && !derivations.own[index].isEmpty {
            // Computed again for the object as it comes back: the attributes came first above.
            let given = all
            let own = try ownDerived(
                e, index, values: { given[$0] ?? .null }, target: { targets[$0] ?? nil }, written: nil)
            all.merge(own) { $1 }
            bindings =
                try e.attributes.map { a in
                    a.isDerived
                        ? try SQLMapping.sqlValue(all[a.name] ?? .null, a.type, object: e.name, property: a.name)
                        : try validate(all[a.name] ?? a.defaultValue, a, object: read.id.description)
                } + Array(bindings.dropFirst(e.attributes.count))
        }
        // It comes back as a new object for other machines (its old global id went with the
        // delete), at a version none of its reads before the delete had.
        let globalID = GlobalID.make()
        let version = try s.restoredVersion(after: read.version)
        let restored = InsertRow(e, PropertyChanges(values: all, relationships: targets))
        try unique(e, read.id.description, values: { restored.value($0, of: e) }) {
            try s.insertRow(e, primaryKey: read.id.primaryKey, values: bindings, globalID: globalID, version: version)
        }
        recorder.inserted(index, read.id.primaryKey, globalID: globalID)
        if !e.keptCounts.isEmpty { counter.inserted(index, read.id.primaryKey) }
        if !derivations.isEmpty { inserted(e, index, read.id.primaryKey, restored) }
        if let hook, hook.readsSaved {
            // Checked as stored, as an insert and as an update (it is both: back in the store,
            // with the context's changes).
            let saved = snapshot(e, read.id.primaryKey, restored, version: version)
            try hook.hooks.check(saved, .insert, object: read.id.description)
            try hook.hooks.check(saved, .update, object: read.id.description)
            hook.hooks.didSave?(saved)
        }
    }

    /// Deletes objects with their delete rules (``DeleteRules``).
    mutating func delete(_ e: Entity, pks: [Int64]) throws {
        var rules = DeleteRules(s)
        // Moved out and back (held once, so the rules add to it in place).
        var gone = deleted
        deleted = []
        defer { deleted = gone }
        try rules.delete(
            e, pks: pks, deleted: &gone, recorder: &recorder, counter: &counter, aggregates: &aggregates)
    }

    // MARK: - Many-to-many links

    /// Makes (or, with `linked` false, breaks) the link between `pk` and `target` through
    /// many-to-many relationship `r`; records an update of both objects when it changed anything.
    mutating func link(_ e: Entity, _ pk: Int64, _ r: Relationship, _ target: Int64, linked: Bool) throws {
        guard let join = model.joinTable(e, r) else {
            throw StoreError(.unknownProperty, "\(e.name).\(r.name) is not a many-to-many relationship")
        }
        let dest = try model.entity(r.destination)
        guard try exists(e, pk) else {
            throw StoreError(.objectNotFound, "no object \(e.name)/\(pk) in the store (never saved, or deleted)")
        }
        guard try exists(dest, target) else {
            throw StoreError(.objectNotFound, "no object \(dest.name)/\(target) in the store (never saved, or deleted)")
        }
        guard try s.setLink(join, pk, target, linked: linked) else { return }
        recorder.updated(model.index(of: e), pk, properties: [e.historyIndex(of: r.name)])
        recorder.updated(model.index(of: dest), target, properties: [dest.historyIndex(of: r.inverse)])
    }

    // MARK: - History

    /// Writes the history transaction of everything recorded (see ``ChangeRecorder/write(_:author:contextName:)``).
    /// Writes the counts and sums and the kept counts' changes first: every write transaction
    /// ends here.
    mutating func writeHistory(author: String?, contextName: String?) throws -> HistoryToken? {
        // The recorded changes ran statements in this transaction (a save without history makes
        // this check: it costs no query).
        if !forMirror && !recorder.isEmpty && (author == MirrorKeys.author || !container.options.historyTracking),
            s.hasMirrorTablesInWrite()
        {
            throw StoreError(
                .invalidArgument,
                (author == MirrorKeys.author
                    ? "author '\(MirrorKeys.author)' is the mirror's own"
                    : "history tracking is off in this process")
                    + ", and this store is mirrored: the save would never reach the other machines, and the "
                    + "mirror puts the server's state over it once it settles; nothing was saved ("
                    + (author == MirrorKeys.author ? "save under another author)" : "open it with history tracking on)")
            )
        }
        if !aggregates.isEmpty { try writeAggregates() }
        try counter.write(s)
        return try recorder.write(s, author: author, contextName: contextName)
    }
}

extension ChangeWriter {
    /// The state of a writer that a transaction of inserts alone leaves empty.
    struct Rare {
        var deleted: Set<ObjectKey> = []
        var restored: Set<ObjectID> = []
        var conflicts: [MergeConflict] = []
        var relatedCache: [ObjectKey: Snapshot] = [:]
        var insertedTargets: Set<ObjectKey> = []
    }

    /// Objects deleted in this transaction.
    var deleted: Set<ObjectKey> {
        get { rare?.deleted ?? [] }
        _modify {
            var r = rare.take() ?? Rare()
            defer { rare = r }
            yield &r.deleted
        }
    }
    /// Objects another save had deleted that this one brought back (an object-trump or
    /// overwrite policy), which history records as inserts.
    var restored: Set<ObjectID> {
        get { rare?.restored ?? [] }
        _modify {
            var r = rare.take() ?? Rare()
            defer { rare = r }
            yield &r.restored
        }
    }
    /// Conflicts found under the `.error` policy; the caller fails the save when there are any.
    var conflicts: [MergeConflict] {
        get { rare?.conflicts ?? [] }
        _modify {
            var r = rare.take() ?? Rare()
            defer { rare = r }
            yield &r.conflicts
        }
    }
    /// Objects read for `related` derived attributes, by key.
    var relatedCache: [ObjectKey: Snapshot] {
        get { rare?.relatedCache ?? [:] }
        _modify {
            var r = rare.take() ?? Rare()
            defer { rare = r }
            yield &r.relatedCache
        }
    }
    /// Objects with counts or sums that this transaction inserted (recorded as inserts already).
    var insertedTargets: Set<ObjectKey> {
        get { rare?.insertedTargets ?? [] }
        _modify {
            var r = rare.take() ?? Rare()
            defer { rare = r }
            yield &r.insertedTargets
        }
    }
}

extension ChangeWriter {
    /// The state of a writer that only updates fill.
    struct Updated {
        var updatedSnapshots: [ObjectID: Snapshot] = [:]
        var writtenAsStored: Set<ObjectID> = []
        var cleanUpdates: Set<ObjectID> = []
    }

    /// The state of each object an update reached, as that update left it (an update that
    /// changed nothing: the object as stored). A save reads back the ones it wrote, which later
    /// writes of the same row (a count, a rule, a propagated value) may have moved on.
    var updatedSnapshots: [ObjectID: Snapshot] {
        get { updated?.updatedSnapshots ?? [:] }
        _modify {
            var u = updated.take() ?? Updated()
            defer { updated = u }
            yield &u.updatedSnapshots
        }
    }
    /// The objects of ``updatedSnapshots`` whose last write left them exactly as held there, with
    /// nothing else in the transaction writing them but a delete rule: a save need not read
    /// them back.
    var writtenAsStored: Set<ObjectID> {
        get { updated?.writtenAsStored ?? [] }
        _modify {
            var u = updated.take() ?? Updated()
            defer { updated = u }
            yield &u.writtenAsStored
        }
    }
    /// Objects updated on top of exactly the version their update was checked against (no
    /// other writer in between, nothing merged).
    var cleanUpdates: Set<ObjectID> {
        get { updated?.cleanUpdates ?? [] }
        _modify {
            var u = updated.take() ?? Updated()
            defer { updated = u }
            yield &u.cleanUpdates
        }
    }
}
