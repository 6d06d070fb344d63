import Foundation
import SharedStoreSQLite
import SharedStoreSupport

extension ObjectContext {
    /// Writes every pending change and its history transaction in one SQLite transaction.
    ///
    /// Validation and delete rules run here. A failed save writes nothing, neither data nor
    /// history, and keeps the pending changes so that they can be fixed and saved again.
    ///
    /// - Throws: ``StoreError``: `.validation`, `.uniqueness`, `.deleteDenied` or
    ///   `.objectNotFound` naming the object and property; `.conflict` under the `.error` merge
    ///   policy; `.busy`, `.diskFull`, `.fileAccess` when the store cannot be written.
    @discardableResult
    public func save() throws -> SaveResult {
        checkOwner()
        guard hasChanges else {
            return SaveResult(token: nil, ids: PermanentIDs(), insertedCount: 0, updatedCount: 0, deletedCount: 0)
        }
        let outcome: SaveOutcome
        do {
            // The plan holds a copy of the reads: gone before they change below (no copy of them).
            let plan = SavePlan(self)
            // The storage of the row an insert fills, kept from one save to the next (given back
            // empty, also by a save that fails).
            var row = spareRow
            spareRow = .empty
            defer { spareRow = row }
            outcome = try container.write { s in try plan.apply(s, row: &row) }
        }
        // The reads outlive the save: an object read and not written is still the base of a
        // later save of it (forgetting it made that save blind to another process's change).
        var reads = registered
        var saves = recordSaves
        for (id, pending) in updates {
            // A record's change written on exactly what it read: that record (its fetch) now
            // reads as the object after the save.
            guard let source = pending.source, outcome.clean.contains(id), let after = outcome.snapshots[id],
                let from = pending.bases.values.first?.version
            else { continue }
            // The records of one fetch read one version of the object: a save on what an earlier
            // one left extends it (one entry per fetch, however often its records are saved).
            var kept = saves[id] ?? [:]
            let start = kept[source].flatMap { $0.after.version == from ? $0.from : nil } ?? from
            kept[source] = RecordSave(from: start, after: after)
            // A long-lived context keeps the last 32 fetches' per object: a record of an older
            // one is checked against its own read (a conflict at worst, never a lost change).
            if kept.count > 32, let oldest = kept.min(by: { $0.value.after.version < $1.value.after.version })?.key {
                kept[oldest] = nil
            }
            saves[id] = kept
        }
        rollback()
        reads.saved(
            touched: outcome.touched, inserted: outcome.permanentIDs.permanent, wrote: Array(outcome.snapshots.values))
        registered = reads
        recordSaves = saves
        // A pinned context sees its own save: its snapshot moves to the store after it (the
        // save stands whatever happens here: a pin that cannot move is released).
        if let p = pinned, (try? p.renew()) == nil { pinned = nil }
        container.didCommit(outcome.token)
        return SaveResult(
            token: outcome.token, ids: outcome.permanentIDs, insertedCount: outcome.counts.inserted,
            updatedCount: outcome.counts.updated, deletedCount: outcome.counts.deleted)
    }
}

/// What a save did: its token, the permanent id of each inserted object, the counts, and the
/// state of each object it updated.
struct SaveOutcome {
    let token: HistoryToken?
    let permanentIDs: PermanentIDs
    let counts: ChangeCounts
    let snapshots: [ObjectID: Snapshot]
    /// Every stored object the save updated or deleted, by a change of its own or by a rule or
    /// a derived value.
    let touched: [ObjectID]
    /// Objects updated on top of exactly what their update was checked against.
    let clean: Set<ObjectID>
}

/// One save, planned from a context's pending changes and applied in one write transaction:
/// inserts (references to objects inserted later in the save are set afterwards), updates,
/// many-to-many links, deletes with their rules, then the history transaction.
struct SavePlan {
    let model: Model
    let storeID: UUID
    let inserts: [ObjectContext.PendingInsert]
    let updates: [(ObjectID, ObjectContext.PendingUpdate)]
    let links: [(id: ObjectID, relationship: String, target: ObjectID, linked: Bool)]
    let deletes: [ObjectID]
    /// What the context read, indexed (``ReadSet/read(_:)`` is one lookup).
    let registered: ReadSet
    let policy: MergePolicy
    let author: String?
    let contextName: String?

    init(_ context: ObjectContext) {
        model = context.model
        storeID = context.container.storeID
        inserts = context.inserts
        updates = context.updateOrder.compactMap { id in context.updates[id].map { (id, $0) } }
        links = context.links
        deletes = context.deletes
        registered = context.registered
        policy = context.mergePolicy
        author = context.transactionAuthor
        contextName = context.name
    }

    /// Runs the plan; the caller's write transaction makes it all or nothing. `row` is storage
    /// for the rows inserted (given back empty: a context keeps no object's values in it).
    func apply(_ s: TransactionSQL, row: inout InsertRow) throws -> SaveOutcome {
        var w = ChangeWriter(s, policy: policy)
        let inserting = !inserts.isEmpty
        if inserting { swap(&w.spare, &row) }
        defer {
            if inserting {
                swap(&w.spare, &row)
                row.forget()
            }
        }
        var permanent = PermanentIDs(capacity: inserts.count)
        try insertAll(&w, &permanent)
        try updateAll(&w, permanent)
        if !w.conflicts.isEmpty {
            throw StoreError(
                .conflict,
                "\(w.conflicts.count) object(s) changed in the store since this context read them: "
                    + w.conflicts.map(\.description).joined(separator: " | "), conflicts: w.conflicts)
        }
        for link in links {
            let e = try model.entity(link.id.entity)
            guard let r = e.relationship(named: link.relationship) else { continue }
            try w.link(e, try key(link.id, permanent), r, try key(link.target, permanent), linked: link.linked)
        }
        for id in deletes { try w.delete(try model.entity(id.entity), pks: [id.primaryKey]) }
        let token = try w.writeHistory(author: author, contextName: contextName)
        let (touched, written) = try readBack(s, w)
        return SaveOutcome(
            token: token, permanentIDs: permanent, counts: w.recorder.counts, snapshots: written, touched: touched,
            clean: w.cleanUpdates)
    }

    /// Every stored object this save changed (history's updates and deletes, and the objects it
    /// restored) and, read again at the end of the save, the state of each one still there: a row
    /// the save wrote more than once (an update, then a derived count, a rule's nullify or a
    /// propagated value) is read as it ends, not as its first write left it. An update that
    /// changed nothing reads the object as the store holds it (``ChangeWriter/updatedSnapshots``).
    private func readBack(_ s: TransactionSQL, _ w: ChangeWriter) throws -> ([ObjectID], [ObjectID: Snapshot]) {
        var written = w.updatedSnapshots
        // A save of inserts alone records no other change (and a batch of a million is not
        // listed here).
        guard !w.recorder.changes.isEmpty else { return ([], written) }
        var touched: [ObjectID] = []
        for change in w.recorder.coalesced {
            let e = model.entities[change.entity]
            let id = ObjectID(storeID: storeID, entity: e.name, primaryKey: change.primaryKey)
            switch change.kind {
            case .delete:
                touched.append(id)
            case .update:
                touched.append(id)
                // A row written once, by its update, is as the writer left it (no read needed),
                // unless a delete's rule may have written it since.
                if deletes.isEmpty && w.writtenAsStored.contains(id) { continue }
                written[id] = try s.snapshot(e, change.primaryKey)
            case .insert:
                if w.restored.contains(id) {
                    touched.append(id)
                    written[id] = try s.snapshot(e, change.primaryKey)
                } else if written[id] != nil {
                    // Inserted and updated by this save (a second insert of its unique key): a
                    // reference to an object inserted after both was set after that update.
                    written[id] = try s.snapshot(e, change.primaryKey)
                }
            }
        }
        return (touched, written)
    }

    /// The inserts; a duplicate of a stored unique key becomes that object, by the policy.
    private func insertAll(_ w: inout ChangeWriter, _ permanent: inout PermanentIDs) throws {
        var deferred: [(Entity, Int64, String, ObjectID, stored: Bool)] = []
        for pending in inserts {
            let e = pending.entity
            var changes = PropertyChanges(values: pending.values, relationships: [:])
            for (name, target) in pending.relationships {
                // A reference to an object inserted later in this save is set afterwards (nil now).
                let key: Int64? = try target.flatMap { t in
                    t.isTemporary ? permanent[t]?.primaryKey : try resolve(t, w, referencedBy: "\(pending.id).\(name)")
                }
                changes.relationships[name] = .some(key)
            }
            var takesReferences = true
            var stored = false
            let pk: Int64
            // The name captures the id alone: an autoclosure over `pending` copied the whole
            // insert each time it was passed down (seven times a value checked).
            let id = pending.id
            if let existing = try duplicate(&w, e, changes, object: id.description) {
                pk = existing
                stored = true
                takesReferences = w.resolver.duplicateTakesReferences
            } else {
                pk = try w.insert(e, changes, object: id.description)
            }
            permanent.append(id, ObjectID(storeID: storeID, entity: e.name, primaryKey: pk))
            for (name, target) in pending.relationships where takesReferences {
                if let target, target.isTemporary, changes.relationships[name] == .some(nil) {
                    deferred.append((e, pk, name, target, stored))
                }
            }
        }
        for (e, pk, name, target, stored) in deferred {
            guard let p = permanent[target] else {
                throw StoreError(
                    .objectNotFound, "\(e.name)/\(pk).\(name) refers to \(target), which this context did not insert")
            }
            if stored {
                // A stored object the insert became: its new reference is an update, in history
                // like any other (setting the column alone left observers and the mirror blind).
                try w.update(
                    e, pk: pk, PropertyChanges(values: [:], relationships: [name: p.primaryKey]),
                    object: "\(e.name)/\(pk)")
            } else {
                try w.setRelationship(e, name, of: pk, to: p.primaryKey)
            }
        }
    }

    /// A stored object with the same unique key, updated by the policy; nil: insert.
    private func duplicate(
        _ w: inout ChangeWriter, _ e: Entity, _ changes: PropertyChanges, object: @autoclosure () -> String
    ) throws -> Int64? {
        // The object's name is made only for an error (made for every insert, it cost a save 3%).
        guard policy != .error, let existing = try w.existingUnique(e, changes, object: object()) else { return nil }
        switch w.resolver.duplicate(e, changes.values) {
        case .keepStored:
            break
        case .update(let values):
            let update = PropertyChanges(
                values: values, relationships: changes.relationships.filter { $0.value != nil })
            try w.update(e, pk: existing, update, object: "\(e.name)/\(existing)")
        }
        return existing
    }

    /// The updates: only the properties that differ from the store are written and recorded.
    private func updateAll(_ w: inout ChangeWriter, _ permanent: PermanentIDs) throws {
        for (id, pending) in updates {
            let e = try model.entity(id.entity)
            var changes = PropertyChanges(values: pending.values, relationships: [:])
            for (name, target) in pending.relationships {
                guard let target else {
                    changes.relationships[name] = .some(nil)
                    continue
                }
                if target.isTemporary {
                    guard let p = permanent[target] else {
                        throw StoreError(
                            .objectNotFound, "\(id).\(name) refers to \(target), which this context did not insert")
                    }
                    changes.relationships[name] = p.primaryKey
                } else {
                    changes.relationships[name] = try resolve(target, w, referencedBy: "\(id).\(name)")
                }
            }
            let read = registered.read(id) ?? pending.read
            try w.update(
                e, pk: id.primaryKey, changes, object: id.description,
                read: pending.bases.isEmpty ? read : Self.base(of: pending, read: read))
        }
    }

    /// What an update of several bases is checked against: the oldest of them (its version: the
    /// object changed since then is a conflict under `.error`), with each changed property as it
    /// read where it was changed (a property is another's change when the store differs from
    /// that).
    static func base(of pending: ObjectContext.PendingUpdate, read: Snapshot?) -> Snapshot? {
        let names = Set(pending.values.keys).union(pending.relationships.keys)
        let plain = names.filter { pending.bases[$0] == nil }
        var all = Array(pending.bases.values)
        if !plain.isEmpty {
            guard let read else { return nil }
            all.append(read)
        }
        guard let oldest = all.min(by: { $0.version < $1.version }) else { return read }
        var values: [String: Value] = [:]
        for name in oldest.attributeNames { values[name] = oldest[name] }
        var relationships = oldest.relationships
        for name in names {
            guard let from = pending.bases[name] ?? read else { continue }
            if pending.values[name] != nil {
                values[name] = from[name]
            } else {
                relationships[name] = from.relationships[name]
            }
        }
        return Snapshot(id: oldest.id, version: oldest.version, values: values, relationships: relationships)
    }

    private func key(_ id: ObjectID, _ permanent: PermanentIDs) throws -> Int64 {
        guard let p = id.isTemporary ? permanent[id] : id else {
            throw StoreError(.objectNotFound, "\(id) is a temporary id this context did not insert")
        }
        return p.primaryKey
    }

    private func resolve(_ target: ObjectID, _ w: ChangeWriter, referencedBy: String) throws -> Int64 {
        guard target.storeID == storeID, try w.exists(try model.entity(target.entity), target.primaryKey) else {
            throw StoreError(.objectNotFound, "\(referencedBy) refers to \(target), which is not in the store")
        }
        return target.primaryKey
    }
}

// MARK: - Batch operations

/// What a batch operation did.
public struct BatchResult: Sendable, Hashable {
    /// How many objects the batch inserted, updated or deleted.
    public let count: Int
    /// The batch's history token (nil when it changed nothing or history is off).
    public let token: HistoryToken?
    /// The ids of the objects it changed, in order; empty for ``ObjectContext/batch(_:)``, which may
    /// insert millions.
    public let objectIDs: [ObjectID]
}

extension ObjectContext {
    private func commitBatch(_ body: (inout ChangeWriter) throws -> [ObjectID]) throws -> BatchResult {
        let author = transactionAuthor
        let contextName = name
        let result = try container.write { s -> BatchResult in
            var w = ChangeWriter(s)
            let ids = try body(&w)
            return BatchResult(
                count: ids.count, token: try w.writeHistory(author: author, contextName: contextName), objectIDs: ids)
        }
        container.didCommit(result.token)
        return result
    }

    /// Inserts objects one at a time in one write transaction, recorded in history object by
    /// object: memory stays that of one object (and the history being recorded), so a batch can
    /// be read from a stream of any length. A thrown error rolls the whole batch back.
    ///
    /// For example:
    /// ```swift
    /// let result = try context.batch { batch in
    ///     for line in lines { _ = try batch.insert("Article", values(line), object: "line \(n)") }
    /// }
    /// ```
    /// - Returns: how many objects were inserted and the token (no ids: there may be millions).
    /// - Throws: what a save throws for the first object the model or a constraint refuses
    ///   (`.validation`, `.uniqueness`, named by the `object` given to the writer), or what `body`
    ///   throws; nothing of the batch is saved then.
    @discardableResult
    public func batch(_ body: (inout BatchWriter) throws -> Void) throws -> BatchResult {
        checkOwner()
        let author = transactionAuthor
        let contextName = name
        let result = try container.write { s -> BatchResult in
            var batch = BatchWriter(writer: ChangeWriter(s))
            try body(&batch)
            let token = try batch.writer.writeHistory(author: author, contextName: contextName)
            return BatchResult(count: batch.count, token: token, objectIDs: [])
        }
        container.didCommit(result.token)
        return result
    }

    /// Inserts many objects in one transaction, recorded in history object by object. Needs no
    /// pending changes in the context; does not touch them.
    ///
    /// - Throws: like ``save()``; a bad row rejects the whole batch, naming its index.
    @discardableResult
    public func batchInsert(_ entityName: String, _ rows: [[String: Value]]) throws -> BatchResult {
        checkOwner()
        let e = try model.entity(entityName)
        for row in rows { try e.checkAttributes(row) }
        return try commitBatch { w in
            var ids: [ObjectID] = []
            ids.reserveCapacity(rows.count)
            for (i, row) in rows.enumerated() {
                let pk = try w.insert(
                    e, PropertyChanges(values: row, relationships: [:]), object: "\(e.name) (batch row \(i + 1))")
                ids.append(ObjectID(storeID: container.storeID, entity: e.name, primaryKey: pk))
            }
            return ids
        }
    }

    /// Inserts many objects with to-one relationships (`relationships[i]` for `rows[i]`: stored
    /// objects), in one transaction, recorded in history object by object.
    ///
    /// - Throws: like ``save()``; a bad row rejects the whole batch, naming its index.
    @discardableResult
    public func batchInsert(_ entityName: String, _ rows: [[String: Value]], relationships: [[String: ObjectID?]])
        throws
        -> BatchResult
    {
        checkOwner()
        guard relationships.count == rows.count else {
            throw StoreError(
                .invalidArgument, "batch insert: \(rows.count) rows but \(relationships.count) relationship sets")
        }
        var ids: [ObjectID] = []
        ids.reserveCapacity(rows.count)
        let result = try batch { batch in
            for (i, row) in rows.enumerated() {
                ids.append(
                    try batch.insert(
                        entityName, row, relationships: relationships[i], object: "\(entityName) (batch row \(i + 1))"))
            }
        }
        return BatchResult(count: result.count, token: result.token, objectIDs: ids)
    }

    /// Sets `values` on every object matching `condition`, in one transaction, recorded in history
    /// object by object (objects whose values already match are left alone).
    ///
    /// - Throws: like ``save()``: `.unknownEntity`, `.unknownProperty`, `.validation`,
    ///   `.uniqueness`, and `.busy` or `.diskFull` when the store cannot be written; the whole batch
    ///   rolls back.
    @discardableResult
    public func batchUpdate(_ entityName: String, where condition: Condition, set values: [String: Value]) throws
        -> BatchResult
    {
        checkOwner()
        let e = try model.entity(entityName)
        try e.checkAttributes(values)
        return try commitBatch { w in
            var ids: [ObjectID] = []
            for pk in try w.s.primaryKeys(e, condition) {
                let before = w.recorder.count
                try w.update(e, pk: pk, PropertyChanges(values: values, relationships: [:]), object: "\(e.name)/\(pk)")
                if w.recorder.count > before {
                    ids.append(ObjectID(storeID: container.storeID, entity: e.name, primaryKey: pk))
                }
            }
            return ids
        }
    }

    /// Deletes every object matching `condition` in one transaction, applying delete rules and
    /// recording each deleted object (with its tombstone) in history.
    ///
    /// - Throws: like ``save()``: `.unknownEntity`, `.deleteDenied` for a `deny` rule, and `.busy`
    ///   or `.diskFull` when the store cannot be written; the whole batch rolls back.
    @discardableResult
    public func batchDelete(_ entityName: String, where condition: Condition) throws -> BatchResult {
        checkOwner()
        let e = try model.entity(entityName)
        return try commitBatch { w in
            let pks = try w.s.primaryKeys(e, condition)
            try w.delete(e, pks: pks)
            return pks.map { ObjectID(storeID: container.storeID, entity: e.name, primaryKey: $0) }
        }
    }
}
