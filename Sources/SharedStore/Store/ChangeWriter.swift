import Foundation

/// Writes changes inside one write transaction and records them for history.
///
/// Shared by ``ObjectContext/save()`` and the batch operations so that both validate, apply delete
/// rules and record history the same way.
struct ChangeWriter {
    let container: Container
    let c: SQLiteConnection
    var changes: [RecordedChange] = []
    /// Objects deleted in this transaction (entity index, primary key).
    var deleted: Set<ObjectKey> = []
    /// The state of each updated object after this transaction, so that a context can go on
    /// from it without reading the object again.
    var updatedSnapshots: [ObjectID: Snapshot] = [:]

    struct ObjectKey: Hashable { let entity: Int; let pk: Int64 }

    init(container: Container, connection: SQLiteConnection) {
        self.container = container
        self.c = connection
    }

    var model: Model { container.model }

    func entityIndex(_ e: Entity) -> Int { model.entityIndex[e.name] ?? 0 }

    // MARK: - Validation

    func validate(_ value: Value, _ a: Attribute, object: @autoclosure () -> String) throws -> SQLValue {
        try container.validate(value, a, object: object())
    }

    func exists(_ e: Entity, _ pk: Int64) throws -> Bool {
        try container.entitySQL[entityIndex(e)].statement(EntitySQL.existsKind, c).firstRow([.integer(pk)]) { _ in true } ?? false
    }

    /// Runs a write, turning a broken uniqueness constraint into an error that names the object.
    func unique<T>(_ object: @autoclosure () -> String, _ body: () throws -> T) throws -> T {
        do { return try body() }
        catch let e as SQLiteError where e.isUniqueViolation {
            let columns = e.message.components(separatedBy: "failed: ").last ?? e.message
            throw StoreError(.uniqueness, "\(object()) breaks a uniqueness constraint: another object already has the same \(columns)")
        }
    }

    // MARK: - Uniqueness

    /// The stored object that has the same value as `values` for one of the entity's uniqueness
    /// constraints (a nil part never conflicts, as in SQLite's unique indexes).
    func existingUnique(_ e: Entity, values: [String: Value], relationships: [String: Int64?], object: @autoclosure () -> String) throws -> Int64? {
        for constraint in e.uniquenessConstraints {
            var bindings: [SQLValue] = []
            for name in constraint {
                if let a = e.attribute(named: name) {
                    bindings.append(try SQLMapping.sqlValue(values[name] ?? a.defaultValue, a.type, name: "\(object()).\(name)"))
                } else {
                    bindings.append(relationships[name].flatMap { $0 }.map(SQLValue.integer) ?? .null)
                }
            }
            if bindings.contains(.null) { continue }
            let whereSQL = constraint.map { "\(SQLMapping.quote($0)) = ?" }.joined(separator: " AND ")
            if let pk = try c.cached("SELECT Z_PK FROM \(SQLMapping.quote(e.name)) WHERE \(whereSQL) LIMIT 1").firstRow(bindings, { $0.int64(0) }) {
                return pk
            }
        }
        return nil
    }

    // MARK: - Rows

    /// Inserts a validated row and records the insert; returns the new primary key.
    mutating func insert(_ e: Entity, values: [String: Value], relationships: [String: Int64?], object: @autoclosure () -> String) throws -> Int64 {
        let index = entityIndex(e)
        let stmt = try container.entitySQL[index].statement(EntitySQL.insertKind, c)
        try stmt.reset()
        var column: Int32 = 1
        for a in e.attributes {
            try stmt.bind(try validate(values[a.name] ?? a.defaultValue, a, object: object()), at: column)
            column += 1
        }
        for r in e.toOneRelationships {
            try stmt.bind(relationships[r.name].flatMap { $0 }.map(SQLValue.integer) ?? .null, at: column)
            column += 1
        }
        try unique(object()) { try stmt.run() }
        let pk = c.lastInsertRowID
        changes.append(RecordedChange(kind: 0, entity: index, primaryKey: pk))
        return pk
    }

    /// Writes the properties that differ from the stored row and records them; a no-op when none do.
    ///
    /// With `read` (the snapshot the context read), an object whose version moved since is a
    /// conflict, resolved by `policy` property by property; with `.error` it is added to
    /// `conflicts` and nothing is written for it (the caller fails the save).
    mutating func update(_ e: Entity, pk: Int64, values: [String: Value], relationships: [String: Int64?],
                         object: @autoclosure () -> String, read: Snapshot? = nil, policy: MergePolicy = .objectTrump,
                         conflicts: inout [MergeConflict]) throws {
        guard let current = try container.snapshot(e, primaryKey: pk, c) else {
            guard let read else { throw StoreError(.objectNotFound, "no object \(object()) in the store (never saved, or deleted)") }
            try deletedInStore(e, read: read, values: values, relationships: relationships, policy: policy, conflicts: &conflicts)
            return
        }
        var values = values, relationships = relationships
        if let read, read.version != current.version {
            let mine = Set(values.keys).union(relationships.keys)
            let theirs = Set(e.attributes.map(\.name).filter { read[$0] != current[$0] })
                .union(e.toOneRelationships.map(\.name).filter { read.relationships[$0] != current.relationships[$0] })
            switch policy {
            case .error:
                conflicts.append(Self.conflict(e, read: read, current: current, values: values, relationships: relationships, theirs: theirs))
                return
            case .rollback:
                return
            case .storeTrump:
                for name in mine.intersection(theirs) {
                    values.removeValue(forKey: name)
                    relationships.removeValue(forKey: name)
                }
            case .objectTrump:
                break
            case .overwrite:
                // The context's whole object: what it read, with its own changes on top.
                for a in e.attributes where values[a.name] == nil { values[a.name] = read[a.name] }
                for r in e.toOneRelationships where relationships[r.name] == nil {
                    relationships[r.name] = .some(read.relationships[r.name]?.primaryKey)
                }
            }
        }
        var columns: [String] = [], bindings: [SQLValue] = [], indexes: [Int] = []
        for (i, a) in e.attributes.enumerated() {
            guard let v = values[a.name], v != current[a.name] else { continue }
            bindings.append(try validate(v, a, object: object()))
            columns.append(a.name)
            indexes.append(i)
        }
        for (i, r) in e.toOneRelationships.enumerated() {
            guard let target = relationships[r.name], target != current.relationships[r.name]?.primaryKey else { continue }
            bindings.append(target.map(SQLValue.integer) ?? .null)
            columns.append(r.name)
            indexes.append(e.attributes.count + i)
        }
        guard !columns.isEmpty else {
            updatedSnapshots[current.id] = current
            return
        }
        let set = columns.map { "\(SQLMapping.quote($0)) = ?" }.joined(separator: ", ")
        let stmt = try c.cached("UPDATE \(SQLMapping.quote(e.name)) SET \(set), Z_OPT = Z_OPT + 1 WHERE Z_PK = ?")
        try unique(object()) { try stmt.execute(bindings + [.integer(pk)]) }
        changes.append(RecordedChange(kind: 1, entity: entityIndex(e), primaryKey: pk, updated: indexes))
        var after = Snapshot(id: current.id, version: current.version + 1, values: current.values, relationships: current.relationships)
        for name in columns {
            if let v = values[name] { after.values[name] = v }
            if let r = e.relationship(named: name), let target = relationships[name] {
                after.relationships[name] = target.map { ObjectID(storeID: container.storeID, entity: r.destination, primaryKey: $0) }
            }
        }
        updatedSnapshots[current.id] = after
    }

    /// An update of an object another save deleted: stays deleted (store trump, rollback), fails
    /// (error), or comes back with the same id and the context's values (object trump, overwrite).
    private mutating func deletedInStore(_ e: Entity, read: Snapshot, values: [String: Value], relationships: [String: Int64?],
                                         policy: MergePolicy, conflicts: inout [MergeConflict]) throws {
        switch policy {
        case .error:
            conflicts.append(MergeConflict(objectID: read.id, deletedInStore: true, properties: [], versionRead: read.version, versionStored: nil))
        case .storeTrump, .rollback:
            return
        case .objectTrump, .overwrite:
            var all = read.values.merging(values) { $1 }
            for a in e.attributes where all[a.name] == nil { all[a.name] = a.defaultValue }
            var rels: [String: Int64?] = [:]
            for r in e.toOneRelationships {
                let target = relationships[r.name] ?? read.relationships[r.name]?.primaryKey
                // A related object deleted meanwhile is not brought back: the link is dropped.
                if let t = target, try exists(try model.entity(r.destination), t) { rels[r.name] = t } else { rels[r.name] = .some(nil) }
            }
            let names = ["Z_PK"] + e.storedPropertyNames.map(SQLMapping.quote)
            var bindings: [SQLValue] = [.integer(read.id.primaryKey)]
            for a in e.attributes { bindings.append(try validate(all[a.name] ?? .null, a, object: read.id.description)) }
            for r in e.toOneRelationships { bindings.append(rels[r.name].flatMap { $0 }.map(SQLValue.integer) ?? .null) }
            let sql = "INSERT INTO \(SQLMapping.quote(e.name))(\(names.joined(separator: ", "))) VALUES (\(Array(repeating: "?", count: bindings.count).joined(separator: ", ")))"
            try unique(read.id.description) { try c.cached(sql).execute(bindings) }
            changes.append(RecordedChange(kind: 0, entity: entityIndex(e), primaryKey: read.id.primaryKey))
        }
    }

    static func conflict(_ e: Entity, read: Snapshot, current: Snapshot, values: [String: Value], relationships: [String: Int64?],
                         theirs: Set<String>) -> MergeConflict {
        func link(_ id: ObjectID?) -> Value { id.map { .string($0.description) } ?? .null }
        var properties: [MergeConflict.Property] = []
        for a in e.attributes {
            guard let v = values[a.name] else { continue }
            properties.append(.init(name: a.name, read: read[a.name], stored: current[a.name], saving: v))
        }
        for r in e.toOneRelationships {
            guard let target = relationships[r.name] else { continue }
            let saving: Value = target.map { .string("\(r.destination)/\($0)") } ?? .null
            properties.append(.init(name: r.name, read: link(read.relationships[r.name]), stored: link(current.relationships[r.name]), saving: saving))
        }
        properties.sort { (theirs.contains($0.name) ? 0 : 1, $0.name) < (theirs.contains($1.name) ? 0 : 1, $1.name) }
        return MergeConflict(objectID: read.id, deletedInStore: false, properties: properties, versionRead: read.version, versionStored: current.version)
    }

    /// Deletes objects and applies their relationships' delete rules: nullify (recorded as an
    /// update of the related object), cascade (recorded as its delete) and deny.
    mutating func delete(_ e: Entity, pks: [Int64]) throws {
        let requested = Set(pks.map { ObjectKey(entity: entityIndex(e), pk: $0) })
        var work = pks.map { (e, $0) }
        var i = 0
        while i < work.count {
            let (entity, pk) = work[i]
            i += 1
            let key = ObjectKey(entity: entityIndex(entity), pk: pk)
            guard deleted.insert(key).inserted else { continue }
            let object = "\(entity.name)/\(pk)"
            guard let row = try container.snapshot(entity, primaryKey: pk, c) else {
                throw StoreError(.objectNotFound, "no object \(object) in the store (never saved, or deleted)")
            }
            for r in entity.relationships {
                let dest = try model.entity(r.destination)
                if let join = model.joinTable(entity, r) {
                    // Many-to-many: the links go in every case; the rule says what happens to the others.
                    let related = try c.cached("SELECT \(join.theirs) FROM \(SQLMapping.quote(join.name)) WHERE \(join.mine) = ?")
                        .rows([.integer(pk)]) { $0.int64(0) }
                        .filter { !deleted.contains(ObjectKey(entity: entityIndex(dest), pk: $0)) }
                    if r.deleteRule == .deny, related.contains(where: { !requested.contains(ObjectKey(entity: entityIndex(dest), pk: $0)) }) {
                        throw StoreError(.deleteDenied, "cannot delete \(object): \(entity.name).\(r.name) still has \(related.count) \(dest.name) object(s) (delete rule deny)")
                    }
                    try c.cached("DELETE FROM \(SQLMapping.quote(join.name)) WHERE \(join.mine) = ?").execute([.integer(pk)])
                    if r.deleteRule == .cascade {
                        work += related.map { (dest, $0) }
                    } else {
                        let inverse = historyIndex(dest, r.inverse)
                        for other in related { changes.append(RecordedChange(kind: 1, entity: entityIndex(dest), primaryKey: other, updated: [inverse])) }
                    }
                } else if r.isToMany {
                    let related = try c.cached("SELECT Z_PK FROM \(SQLMapping.quote(dest.name)) WHERE \(SQLMapping.quote(r.inverse)) = ?")
                        .rows([.integer(pk)]) { $0.int64(0) }
                        .filter { !deleted.contains(ObjectKey(entity: entityIndex(dest), pk: $0)) }
                    guard !related.isEmpty else { continue }
                    switch r.deleteRule {
                    case .deny:
                        if related.contains(where: { !requested.contains(ObjectKey(entity: entityIndex(dest), pk: $0)) }) {
                            throw StoreError(.deleteDenied, "cannot delete \(object): \(entity.name).\(r.name) still has \(related.count) \(dest.name) object(s) (delete rule deny)")
                        }
                    case .cascade:
                        work += related.map { (dest, $0) }
                    case .nullify:
                        let inverseIndex = historyIndex(dest, r.inverse)
                        try c.cached("UPDATE \(SQLMapping.quote(dest.name)) SET \(SQLMapping.quote(r.inverse)) = NULL, Z_OPT = Z_OPT + 1 WHERE \(SQLMapping.quote(r.inverse)) = ?")
                            .execute([.integer(pk)])
                        for other in related {
                            changes.append(RecordedChange(kind: 1, entity: entityIndex(dest), primaryKey: other, updated: [inverseIndex]))
                        }
                    }
                } else if let target = row.relationships[r.name] {
                    switch r.deleteRule {
                    case .deny:
                        throw StoreError(.deleteDenied, "cannot delete \(object): \(entity.name).\(r.name) is set to \(target) (delete rule deny)")
                    case .cascade:
                        work.append((dest, target.primaryKey))
                    case .nullify:
                        break  // the to-many side stores nothing
                    }
                }
            }
            var tombstone: [(Int, Value)] = []
            for (ai, a) in entity.attributes.enumerated() where a.preservesValueInHistoryOnDeletion {
                tombstone.append((ai, row[a.name]))
            }
            try container.entitySQL[entityIndex(entity)].statement(EntitySQL.deleteKind, c).execute([.integer(pk)])
            changes.append(RecordedChange(kind: 2, entity: entityIndex(entity), primaryKey: pk, tombstone: tombstone))
        }
    }

    /// The index history uses for property `name` of `e`.
    func historyIndex(_ e: Entity, _ name: String) -> Int {
        e.historyPropertyNames.firstIndex(of: name) ?? 0
    }

    // MARK: - Many-to-many links

    /// Makes (or, with `linked` false, breaks) the link between `pk` and `target` through
    /// many-to-many relationship `r`; records an update of both objects when it changed anything.
    mutating func link(_ e: Entity, _ pk: Int64, _ r: Relationship, _ target: Int64, linked: Bool) throws {
        guard let join = model.joinTable(e, r) else { throw StoreError(.unknownProperty, "\(e.name).\(r.name) is not a many-to-many relationship") }
        let dest = try model.entity(r.destination)
        guard try exists(e, pk) else { throw StoreError(.objectNotFound, "no object \(e.name)/\(pk) in the store (never saved, or deleted)") }
        guard try exists(dest, target) else { throw StoreError(.objectNotFound, "no object \(dest.name)/\(target) in the store (never saved, or deleted)") }
        let sql = linked
            ? "INSERT OR IGNORE INTO \(SQLMapping.quote(join.name))(\(join.mine), \(join.theirs)) VALUES (?, ?)"
            : "DELETE FROM \(SQLMapping.quote(join.name)) WHERE \(join.mine) = ? AND \(join.theirs) = ?"
        try c.cached(sql).execute([.integer(pk), .integer(target)])
        guard c.changes > 0 else { return }
        changes.append(RecordedChange(kind: 1, entity: entityIndex(e), primaryKey: pk, updated: [historyIndex(e, r.name)]))
        changes.append(RecordedChange(kind: 1, entity: entityIndex(dest), primaryKey: target, updated: [historyIndex(dest, r.inverse)]))
    }

    /// One change per object: an insert absorbs later updates, updates merge their properties,
    /// a delete replaces what came before.
    static func coalesce(_ changes: [RecordedChange]) -> [RecordedChange] {
        var out: [RecordedChange] = []
        var at: [ObjectKey: Int] = [:]
        for change in changes {
            let key = ObjectKey(entity: change.entity, pk: change.primaryKey)
            guard let i = at[key] else {
                at[key] = out.count
                out.append(change)
                continue
            }
            switch (out[i].kind, change.kind) {
            case (0, 1), (2, 1): break
            case (1, 1): out[i].updated = Array(Set(out[i].updated).union(change.updated)).sorted()
            default: out[i] = change
            }
        }
        return out
    }

    // MARK: - History

    /// Writes the history transaction of everything recorded, in the same SQLite transaction as
    /// the data (invariant 1). Returns its token, or nil when nothing changed or history is off.
    func writeHistory(author: String?, contextName: String?) throws -> HistoryToken? {
        guard container.options.historyTracking, !changes.isEmpty else { return nil }
        let changes = changes.count > 1 ? Self.coalesce(changes) : changes
        try c.statement(Slot.historyInsert, """
            INSERT INTO ss_history(timestamp, author, context, process, executable, entities, changes)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """).execute([
                .double(Date().timeIntervalSince1970),
                author.map(SQLValue.text) ?? .null,
                contextName.map(SQLValue.text) ?? .null,
                .integer(container.process.pid),
                .text(container.process.executable),
                .integer(HistoryCodec.entityMask(changes)),
                .blob(HistoryCodec.encode(changes)),
            ])
        let token = c.lastInsertRowID
        // Tokens only grow; a lower one means SQLite ran out of row ids (see `newestSeen`).
        guard token > container.newestSeen.load(ordering: .relaxed) else {
            throw StoreError(.tokenSpaceExhausted, "token space exhausted: the store already holds the largest token; nothing was saved")
        }
        container.noteToken(token)
        return HistoryToken(storeID: container.storeID, value: token)
    }
}
