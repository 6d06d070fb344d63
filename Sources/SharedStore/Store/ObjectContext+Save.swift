import Foundation

extension ObjectContext {
    /// Writes every pending change and its history transaction in one SQLite transaction.
    ///
    /// Validation and delete rules run here. A failed save writes nothing, neither data nor
    /// history, and keeps the pending changes so that they can be fixed and saved again.
    ///
    /// - Throws: ``StoreError``: `.validation`, `.uniqueness`, `.deleteDenied` or
    ///   `.objectNotFound` naming the object and property; `.busy`, `.diskFull`, `.fileAccess`
    ///   when the store cannot be written.
    @discardableResult
    public func save() throws -> SaveResult {
        guard hasChanges else {
            return SaveResult(token: nil, permanentIDs: [:], insertedCount: 0, updatedCount: 0, deletedCount: 0)
        }
        let author = transactionAuthor, contextName = name, policy = mergePolicy
        let (token, permanent, counts, after) = try container.write { c -> (HistoryToken?, [ObjectID: ObjectID], (Int, Int, Int), [ObjectID: Snapshot]) in
            var w = ChangeWriter(container: container, connection: c)
            var permanent: [ObjectID: ObjectID] = [:]
            var deferred: [(Entity, Int64, String, ObjectID)] = []
            var conflicts: [MergeConflict] = []

            // 1. Inserts. References to objects inserted later in this save are set afterwards.
            for pending in inserts {
                let e = try model.entity(pending.id.entity)
                var rels: [String: Int64?] = [:]
                for (name, target) in pending.relationships {
                    guard let target else { rels[name] = .some(nil); continue }
                    if target.isTemporary {
                        if let p = permanent[target] { rels[name] = p.primaryKey }
                        else { rels[name] = .some(nil) }
                    } else {
                        rels[name] = try resolve(target, w, referencedBy: "\(pending.id).\(name)")
                    }
                }
                let pk: Int64
                var resolved = false
                if policy != .error, let existing = try w.existingUnique(e, values: pending.values, relationships: rels, object: pending.id.description) {
                    // A duplicate of a stored object: the two become one, resolved by the policy.
                    pk = existing
                    resolved = true
                    if policy == .objectTrump || policy == .overwrite {
                        var values = pending.values
                        if policy == .overwrite {
                            for a in e.attributes where values[a.name] == nil { values[a.name] = a.defaultValue }
                        }
                        try w.update(e, pk: existing, values: values, relationships: rels.filter { $0.value != nil }, object: "\(e.name)/\(existing)",
                                     conflicts: &conflicts)
                    }
                } else {
                    pk = try w.insert(e, values: pending.values, relationships: rels, object: pending.id.description)
                }
                let id = ObjectID(storeID: container.storeID, entity: e.name, primaryKey: pk)
                permanent[pending.id] = id
                for (name, target) in pending.relationships where !resolved || policy == .objectTrump || policy == .overwrite {
                    if let target, target.isTemporary, rels[name] == .some(nil) { deferred.append((e, pk, name, target)) }
                }
            }
            for (e, pk, name, target) in deferred {
                guard let p = permanent[target] else {
                    throw StoreError(.objectNotFound, "\(e.name)/\(pk).\(name) refers to \(target), which this context did not insert")
                }
                try c.cached("UPDATE \(SQLMapping.quote(e.name)) SET \(SQLMapping.quote(name)) = ? WHERE Z_PK = ?")
                    .execute([.integer(p.primaryKey), .integer(pk)])
            }

            // 2. Updates: only the properties that differ from the store are written and recorded.
            for id in updateOrder {
                guard let pending = updates[id] else { continue }
                let e = try model.entity(id.entity)
                var rels: [String: Int64?] = [:]
                for (name, target) in pending.relationships {
                    guard let target else { rels[name] = .some(nil); continue }
                    if target.isTemporary {
                        guard let p = permanent[target] else {
                            throw StoreError(.objectNotFound, "\(id).\(name) refers to \(target), which this context did not insert")
                        }
                        rels[name] = p.primaryKey
                    } else {
                        rels[name] = try resolve(target, w, referencedBy: "\(id).\(name)")
                    }
                }
                try w.update(e, pk: id.primaryKey, values: pending.values, relationships: rels, object: id.description,
                             read: registered[id], policy: policy, conflicts: &conflicts)
            }
            if !conflicts.isEmpty {
                throw StoreError(.conflict, "\(conflicts.count) object(s) changed in the store since this context read them: "
                                 + conflicts.map(\.description).joined(separator: " | "), conflicts: conflicts)
            }

            // 3. Many-to-many links, between stored objects or ones inserted above.
            for link in links {
                func key(_ id: ObjectID) throws -> Int64 {
                    guard let p = id.isTemporary ? permanent[id] : id else {
                        throw StoreError(.objectNotFound, "\(id) is a temporary id this context did not insert")
                    }
                    return p.primaryKey
                }
                let e = try model.entity(link.id.entity)
                guard let r = e.relationship(named: link.relationship) else { continue }
                try w.link(e, try key(link.id), r, try key(link.target), linked: link.linked)
            }

            // 4. Deletes, with delete rules.
            for id in deletes {
                try w.delete(try model.entity(id.entity), pks: [id.primaryKey])
            }

            let token = try w.writeHistory(author: author, contextName: contextName)
            let counts = ChangeWriter.coalesce(w.changes).reduce(into: (0, 0, 0)) { n, ch in
                switch ch.kind { case 0: n.0 += 1; case 1: n.1 += 1; default: n.2 += 1 }
            }
            return (token, permanent, counts, w.updatedSnapshots)
        }
        rollback()
        // What this save wrote is what the context has now read of those objects.
        registered = after
        container.didCommit(token)
        return SaveResult(token: token, permanentIDs: permanent, insertedCount: counts.0, updatedCount: counts.1, deletedCount: counts.2)
    }

    private func resolve(_ target: ObjectID, _ w: ChangeWriter, referencedBy: String) throws -> Int64 {
        guard target.storeID == container.storeID, try w.exists(try model.entity(target.entity), target.primaryKey) else {
            throw StoreError(.objectNotFound, "\(referencedBy) refers to \(target), which is not in the store")
        }
        return target.primaryKey
    }
}

// MARK: - Batch operations

/// What a batch operation did.
public struct BatchResult: Sendable, Hashable {
    public let count: Int
    public let token: HistoryToken?
    public let objectIDs: [ObjectID]
}

extension ObjectContext {
    private func commitBatch(_ body: (SQLiteConnection) throws -> BatchResult) throws -> BatchResult {
        let result = try container.write(body)
        container.didCommit(result.token)
        return result
    }

    /// Inserts many objects in one transaction, recorded in history object by object. Needs no
    /// pending changes in the context; does not touch them.
    ///
    /// - Throws: like ``save()``; a bad row rejects the whole batch, naming its index.
    @discardableResult
    public func batchInsert(_ entityName: String, _ rows: [[String: Value]]) throws -> BatchResult {
        let e = try model.entity(entityName)
        for row in rows {
            for key in row.keys where e.attribute(named: key) == nil {
                throw StoreError(.unknownProperty, "\(e.name) has no attribute '\(key)'")
            }
        }
        let author = transactionAuthor, contextName = name
        return try commitBatch { c in
            var w = ChangeWriter(container: container, connection: c)
            var ids: [ObjectID] = []
            ids.reserveCapacity(rows.count)
            for (i, row) in rows.enumerated() {
                let pk = try w.insert(e, values: row, relationships: [:], object: "\(e.name) (batch row \(i + 1))")
                ids.append(ObjectID(storeID: container.storeID, entity: e.name, primaryKey: pk))
            }
            let token = try w.writeHistory(author: author, contextName: contextName)
            return BatchResult(count: ids.count, token: token, objectIDs: ids)
        }
    }

    /// Sets `values` on every object matching `condition`, in one transaction, recorded in history
    /// object by object (objects whose values already match are left alone).
    @discardableResult
    public func batchUpdate(_ entityName: String, where condition: Condition, set values: [String: Value]) throws -> BatchResult {
        let e = try model.entity(entityName)
        for key in values.keys where e.attribute(named: key) == nil {
            throw StoreError(.unknownProperty, "\(e.name) has no attribute '\(key)'")
        }
        let author = transactionAuthor, contextName = name
        return try commitBatch { c in
            var w = ChangeWriter(container: container, connection: c)
            let pks = try container.primaryKeys(e, condition, c)
            var ids: [ObjectID] = []
            for pk in pks {
                let before = w.changes.count
                var ignored: [MergeConflict] = []
                try w.update(e, pk: pk, values: values, relationships: [:], object: "\(e.name)/\(pk)", conflicts: &ignored)
                if w.changes.count > before { ids.append(ObjectID(storeID: container.storeID, entity: e.name, primaryKey: pk)) }
            }
            let token = try w.writeHistory(author: author, contextName: contextName)
            return BatchResult(count: ids.count, token: token, objectIDs: ids)
        }
    }

    /// Deletes every object matching `condition` in one transaction, applying delete rules and
    /// recording each deleted object (with its tombstone) in history.
    @discardableResult
    public func batchDelete(_ entityName: String, where condition: Condition) throws -> BatchResult {
        let e = try model.entity(entityName)
        let author = transactionAuthor, contextName = name
        return try commitBatch { c in
            var w = ChangeWriter(container: container, connection: c)
            let pks = try container.primaryKeys(e, condition, c)
            try w.delete(e, pks: pks)
            let token = try w.writeHistory(author: author, contextName: contextName)
            return BatchResult(count: pks.count, token: token,
                               objectIDs: pks.map { ObjectID(storeID: container.storeID, entity: e.name, primaryKey: $0) })
        }
    }
}
