import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// The rows of entities and join tables.
extension TransactionSQL {
    private func table(_ e: Entity) -> String { SQLMapping.quote(e.name) }

    private func entityStatement(_ e: Entity, _ kind: EntityStatement) throws -> SQLiteStatement {
        guard let i = model.entityIndex[e.name] else {
            preconditionFailure("entity \(e.name) is not in the container's model")
        }
        return try container.entitySQL[i].statement(kind, c)
    }

    func exists(_ e: Entity, _ pk: Int64) throws -> Bool {
        try entityStatement(e, .exists).firstRow([.integer(pk)]) { _ in true } ?? false
    }

    /// The stored object, or nil.
    func snapshot(_ e: Entity, _ pk: Int64) throws -> Snapshot? {
        let (decoder, layout) = (rows, entitySQL(e).layout)
        return try entityStatement(e, .select).firstRow([.integer(pk)]) { decoder.snapshot($0, layout) }
    }

    /// Object `pk` of `e` as stored, with its global id (nil: the row holds none that is valid),
    /// read by one statement; nil when there is no such object.
    func snapshotAndGlobalID(_ e: Entity, _ pk: Int64) throws -> (Snapshot, UUID?)? {
        let (decoder, layout) = (rows, entitySQL(e).layout)
        let column = layout.globalIDColumn
        return try entityStatement(e, .select).firstRow([.integer(pk)]) {
            (decoder.snapshot($0, layout), GlobalID.uuid($0.blob(column)))
        }
    }

    /// The version of object `pk` of `e` and its global id (nil: the row holds none that is
    /// valid), without its values; nil when there is no such object.
    func versionAndGlobalID(_ e: Entity, _ pk: Int64) throws -> (version: Int64, globalID: UUID?)? {
        try entityStatement(e, .version).firstRow([.integer(pk)]) { ($0.int64(0), GlobalID.uuid($0.blob(1))) }
    }

    /// The prepared insert of the entity at `index`, reset: bind every stored property in order
    /// (``Entity/storedPropertyNames``) from 1 and the global id after them, then run it;
    /// ``lastInsertedKey`` is the new row's.
    func insertStatement(entity index: Int) throws -> SQLiteStatement {
        let stmt = try container.entitySQL[index].statement(.insert, c)
        stmt.reset()
        return stmt
    }

    /// The primary key of the row inserted last on this connection.
    var lastInsertedKey: Int64 { c.lastInsertRowID }

    /// Inserts a row with its primary key given (an object brought back under its own id).
    func insertRow(_ e: Entity, primaryKey: Int64, values: [SQLValue], globalID: UUID, version: Int64) throws {
        let names =
            [StoreColumn.primaryKey, StoreColumn.version] + e.storedPropertyNames.map(SQLMapping.quote)
            + [StoreColumn.globalID]
        let placeholders = Array(repeating: "?", count: names.count).joined(separator: ", ")
        try c.cached("INSERT INTO \(table(e))(\(names.joined(separator: ", "))) VALUES (\(placeholders))")
            .execute([.integer(primaryKey), .integer(version)] + values + [.blob(GlobalID.bytes(globalID))])
    }

    /// A version for an object that comes back under its old key: above any it had before it
    /// was deleted (what other contexts may still hold as read), so that an update based on one
    /// of those meets the restore as a change, never as the same version. A version grows by one
    /// per write of the object, and a transaction writes an object a few times at most: the last
    /// token (at least every transaction so far), times 65,536, is above them all.
    func restoredVersion(after read: Int64) throws -> Int64 {
        let last = try c.cached("SELECT coalesce(max(rowid), 0) FROM ss_history").firstRow { $0.int64(0) } ?? 0
        let (scaled, overflow) = max(last, 0).multipliedReportingOverflow(by: 1 << 16)
        let above = read < Int64.max ? read + 1 : read
        return overflow ? above : max(scaled, above)
    }

    /// Sets `columns` of one row to `values` and bumps its version.
    ///
    /// `properties` numbers the columns (an attribute's index in the entity's attributes, a to-one
    /// relationship's after them), in `columns`' order: the statement is kept under them, so an
    /// update of the same properties again neither builds nor hashes its SQL.
    func updateRow(_ e: Entity, _ pk: Int64, columns: [String], properties: [Int], values: [SQLValue]) throws {
        // The only statements kept by key are updates: the kind is the entity.
        let key = StatementKey(kind: model.index(of: e), numbers: properties)
        let statement = try c.statement(key: key) {
            let set = columns.map { "\(SQLMapping.quote($0)) = ?" }.joined(separator: ", ")
            return "UPDATE \(table(e)) SET \(set), \(StoreColumn.bumpVersion) WHERE \(StoreColumn.isKey)"
        }
        var bindings = values
        bindings.append(.integer(pk))
        try statement.execute(bindings)
    }

    /// Whether every attribute column of `e` is declared with the type the model gives it
    /// (``SQLMapping/columnType(_:)``): then a value bound to it reads back as
    /// ``SQLMapping/storedValue(_:_:)`` says. A custom migration step that changed an attribute's
    /// type leaves the column's old type, whose affinity converts what is written (text of digits
    /// into an INTEGER column becomes a number). Asked of the store once per container and entity.
    func columnsAsModelled(_ e: Entity) throws -> Bool {
        let index = model.index(of: e)
        if let known = container.modelledColumns.withLock({ $0[index] }) { return known }
        var declared: [String: String] = [:]
        try c.cached("SELECT name, type FROM pragma_table_info(?)").forEachRow([.text(e.name)]) { row in
            declared[row.text(0)] = row.text(1).uppercased()
        }
        let matches = e.attributes.allSatisfy { declared[$0.name] == SQLMapping.columnType($0.type) }
        container.modelledColumns.withLock { $0[index] = matches }
        return matches
    }

    /// Sets one to-one relationship column, without a version bump (a reference fixed up within
    /// the save that inserted the object).
    func setRelationship(_ e: Entity, _ name: String, of pk: Int64, to target: Int64) throws {
        try c.cached("UPDATE \(table(e)) SET \(SQLMapping.quote(name)) = ? WHERE \(StoreColumn.isKey)").execute([
            .integer(target), .integer(pk),
        ])
    }

    /// Deletes one row; returns its global id (nil: the row had none, or there was no row).
    @discardableResult
    func deleteRow(_ e: Entity, _ pk: Int64) throws -> UUID? {
        // With RETURNING, SQLite makes the change at the first step.
        try entityStatement(e, .delete).firstRow([.integer(pk)]) { GlobalID.uuid($0.blob(0)) } ?? nil
    }

    /// The global id of the object `pk` of `e` (nil: no such object, or a row a foreign tool
    /// inserted without one).
    func globalID(_ e: Entity, _ pk: Int64) throws -> UUID? { try SchemaSQL.globalID(c, e.name, pk) }

    /// The primary key of the object of `e` whose global id is `id`: through the mirror's map
    /// in a mirrored store, else by reading the table (there is no index on global ids).
    func primaryKey(_ e: Entity, globalID id: UUID) throws -> Int64? {
        if try hasMirrorTables(), let pk = try mirroredKey(e, id) { return pk }
        return try c.cached("SELECT \(StoreColumn.primaryKey) FROM \(table(e)) WHERE \(StoreColumn.globalID) = ?")
            .firstRow([.blob(GlobalID.bytes(id))]) { $0.int64(0) }
    }

    /// The stored object whose `columns` (a uniqueness constraint) hold `values`, if any.
    func objectMatching(_ e: Entity, columns: [String], values: [SQLValue]) throws -> Int64? {
        let whereSQL = columns.map { "\(SQLMapping.quote($0)) = ?" }.joined(separator: " AND ")
        return try c.cached("SELECT \(StoreColumn.primaryKey) FROM \(table(e)) WHERE \(whereSQL) LIMIT 1")
            .firstRow(values) { $0.int64(0) }
    }

    /// The objects whose to-one relationship `inverse` (of entity `e`) points to `pk`, in key order.
    func objects(_ e: Entity, whose inverse: String, is pk: Int64) throws -> [Int64] {
        let key = StoreColumn.primaryKey
        return try c.cached("SELECT \(key) FROM \(table(e)) WHERE \(SQLMapping.quote(inverse)) = ? ORDER BY \(key)")
            .rows([.integer(pk)]) { $0.int64(0) }
    }

    /// Clears the to-one relationship `inverse` of every object of `e` that points to `pk`, and
    /// the attributes `alsoClearing` (copies made through it).
    func nullify(_ e: Entity, _ inverse: String, pointingTo pk: Int64, alsoClearing: [String] = []) throws {
        let column = SQLMapping.quote(inverse)
        let cleared = alsoClearing.map { ", \(SQLMapping.quote($0)) = NULL" }.joined()
        let sql = "UPDATE \(table(e)) SET \(column) = NULL\(cleared), \(StoreColumn.bumpVersion) WHERE \(column) = ?"
        try c.cached(sql).execute([.integer(pk)])
    }

    // MARK: - Derived attributes

    /// Adds `amount` to count or sum `attribute` of object `pk`.
    func addToDerived(_ e: Entity, _ pk: Int64, _ attribute: String, _ amount: SQLValue) throws {
        let a = SQLMapping.quote(attribute)
        try c.cached(
            "UPDATE \(table(e)) SET \(a) = coalesce(\(a), 0) + ?, \(StoreColumn.bumpVersion) WHERE \(StoreColumn.isKey)"
        ).execute([amount, .integer(pk)])
    }

    /// Sets copy `attribute` to `value` in every object of `e` whose to-one `via` points at
    /// `target`; returns their keys.
    func propagate(_ e: Entity, _ attribute: String, via: String, to target: Int64, _ value: SQLValue) throws -> [Int64]
    {
        let changed = try objects(e, whose: via, is: target)
        guard !changed.isEmpty else { return [] }
        let (a, v) = (SQLMapping.quote(attribute), SQLMapping.quote(via))
        try c.cached("UPDATE \(table(e)) SET \(a) = ?, \(StoreColumn.bumpVersion) WHERE \(v) = ?").execute([
            value, .integer(target),
        ])
        return changed
    }

    // MARK: - Join tables

    /// The objects linked to `pk` through a many-to-many join table, in key order.
    func linked(_ join: JoinTable, to pk: Int64) throws -> [Int64] {
        try c.cached(
            "SELECT \(join.theirs) FROM \(SQLMapping.quote(join.name)) WHERE \(join.mine) = ? ORDER BY \(join.theirs)"
        )
        .rows([.integer(pk)]) { $0.int64(0) }
    }

    /// Removes every link of `pk`.
    func unlinkAll(_ join: JoinTable, from pk: Int64) throws {
        try c.cached("DELETE FROM \(SQLMapping.quote(join.name)) WHERE \(join.mine) = ?").execute([.integer(pk)])
    }

    /// Makes (`linked`) or breaks the link between `pk` and `target`; true when it changed anything.
    func setLink(_ join: JoinTable, _ pk: Int64, _ target: Int64, linked: Bool) throws -> Bool {
        let sql =
            linked
            ? "INSERT OR IGNORE INTO \(SQLMapping.quote(join.name))(\(join.mine), \(join.theirs)) VALUES (?, ?)"
            : "DELETE FROM \(SQLMapping.quote(join.name)) WHERE \(join.mine) = ? AND \(join.theirs) = ?"
        try c.cached(sql).execute([.integer(pk), .integer(target)])
        return c.changes > 0
    }
}
