import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// An index as SQLite has it: its table, whether it is unique, its key columns in order.
struct IndexDefinition: Hashable {
    let name: String
    let table: String
    let unique: Bool
    let columns: [StoredSchema.IndexPart]

    /// What makes two indexes the same: a unique index's column set (order does not change
    /// what it forbids), a plain index's columns in order with their directions.
    var content: String {
        unique
            ? "unique \(table)(\(columns.map(\.property).sorted().joined(separator: ",")))"
            : "index \(table)(\(columns.map(\.text).joined(separator: ",")))"
    }
}

/// The SQL of migrations (``MigrationRunner``): SQLite's constant-time ALTER TABLE paths where they
/// exist (ADD COLUMN with a constant default, RENAME COLUMN, RENAME TO), DROP COLUMN, and
/// indexes reconciled by what they cover rather than by name.
extension SchemaSQL {
    static func renameTable(_ c: SQLiteConnection, _ from: String, _ to: String) throws {
        try c.execute("ALTER TABLE \(SQLMapping.quote(from)) RENAME TO \(SQLMapping.quote(to))")
    }

    static func renameColumn(_ c: SQLiteConnection, _ table: String, _ from: String, _ to: String) throws {
        let q = SQLMapping.quote
        try c.execute("ALTER TABLE \(q(table)) RENAME COLUMN \(q(from)) TO \(q(to))")
    }

    static func dropColumn(_ c: SQLiteConnection, _ table: String, _ column: String) throws {
        try c.execute("ALTER TABLE \(SQLMapping.quote(table)) DROP COLUMN \(SQLMapping.quote(column))")
    }

    static func dropTable(_ c: SQLiteConnection, _ table: String) throws {
        try c.execute("DROP TABLE IF EXISTS \(SQLMapping.quote(table))")
        c.knownTables.removeAll()
    }

    /// `ALTER TABLE … ADD COLUMN` with a constant default (SQLite keeps it in the schema: existing
    /// rows read it without being rewritten). `type` nil: a to-one relationship's key column.
    static func addColumn(
        _ c: SQLiteConnection, _ table: String, _ column: String, _ type: AttributeType?, _ value: SQLValue
    )
        throws
    {
        let declared = type.map(SQLMapping.columnType) ?? "INTEGER"
        let fallback = value == .null ? "" : " DEFAULT \(literal(value))"
        try c.execute(
            "ALTER TABLE \(SQLMapping.quote(table)) ADD COLUMN \(SQLMapping.quote(column)) \(declared)\(fallback)")
    }

    /// A constant as SQL text (for a column default, where SQLite takes no binding).
    static func literal(_ v: SQLValue) -> String {
        switch v {
        case .null: return "NULL"
        case .integer(let i): return String(i)
        case .double(let d): return d.isFinite ? "\(d)" : "NULL"
        case .text(let s): return "'" + s.replacingOccurrences(of: "'", with: "''") + "'"
        case .blob(let b): return "X'" + b.map { String(format: "%02X", $0) }.joined() + "'"
        }
    }

    /// Sets `column` to `value` where it is NULL; returns how many rows changed.
    static func fillNulls(_ c: SQLiteConnection, _ table: String, _ column: String, _ value: SQLValue) throws -> Int {
        let q = SQLMapping.quote
        try c.execute("UPDATE \(q(table)) SET \(q(column)) = ? WHERE \(q(column)) IS NULL", [value])
        return c.changes
    }

    /// How many rows hold NULL in `column`.
    static func nullCount(_ c: SQLiteConnection, _ table: String, _ column: String) throws -> Int64 {
        let q = SQLMapping.quote
        return try c.cached("SELECT count(*) FROM \(q(table)) WHERE \(q(column)) IS NULL").firstRow { $0.int64(0) } ?? 0
    }

    /// Up to `limit` value combinations that more than one row holds in `columns` (a uniqueness
    /// constraint the rows would break), each with how many rows hold it.
    static func duplicateValues(_ c: SQLiteConnection, _ table: String, _ columns: [String], limit: Int) throws
        -> [(values: [String], count: Int64)]
    {
        let q = SQLMapping.quote
        let cols = columns.map(q).joined(separator: ", ")
        let notNull = columns.map { "\(q($0)) IS NOT NULL" }.joined(separator: " AND ")
        let n = Int32(columns.count)
        return try c.cached(
            "SELECT \(cols), count(*) FROM \(q(table)) WHERE \(notNull) GROUP BY \(cols) HAVING count(*) > 1 LIMIT ?"
        ).rows([.integer(Int64(limit))]) { row in
            ((0..<n).map { TextSafety.visible(String(row.text($0).prefix(60))) }, row.int64(n))
        }
    }

    /// Every index SharedStore made for the model (names starting `ss_`, join tables' own aside;
    /// names starting `ss_gid_` are left alone, for an index on global ids an app may make), with
    /// what it covers.
    static func indexDefinitions(_ c: SQLiteConnection) throws -> [IndexDefinition] {
        let rows = try c.cached(
            "SELECT name, tbl_name FROM sqlite_schema WHERE type = 'index' AND name LIKE 'ss\\_%' ESCAPE '\\' "
                + "AND name NOT LIKE 'ss\\_gid\\_%' ESCAPE '\\' "
                + "AND tbl_name NOT LIKE 'ss\\_%' ESCAPE '\\' ORDER BY name"
        ).rows { ($0.text(0), $0.text(1)) }
        return try rows.map { name, table in
            let unique =
                try c.cached("SELECT \"unique\" FROM pragma_index_list(?) WHERE name = ?")
                .firstRow([.text(table), .text(name)]) { $0.int64(0) != 0 } ?? false
            let columns = try c.cached("SELECT name, \"desc\" FROM pragma_index_xinfo(?) WHERE key = 1 ORDER BY seqno")
                .rows([.text(name)]) { StoredSchema.IndexPart(property: $0.text(0), ascending: $0.int64(1) == 0) }
            return IndexDefinition(name: name, table: table, unique: unique, columns: columns)
        }
    }

    static func dropIndex(_ c: SQLiteConnection, _ name: String) throws {
        try c.execute("DROP INDEX IF EXISTS \(SQLMapping.quote(name))")
    }

    static func createIndex(_ c: SQLiteConnection, _ index: IndexDefinition) throws {
        let q = SQLMapping.quote
        let columns = index.columns.map { q($0.property) + ($0.ascending ? "" : " DESC") }.joined(separator: ", ")
        try c.execute(
            "CREATE \(index.unique ? "UNIQUE " : "")INDEX \(q(index.name)) ON \(q(index.table))(\(columns))")
    }

    /// What a store of format 2 lacks before a migration: the kept counts' table.
    static func prepareMigration(_ c: SQLiteConnection) throws {
        try c.execute(createCountsTable)
    }

    /// Names of the tables of the database.
    static func tableSet(_ c: SQLiteConnection) throws -> Set<String> { Set(try tableNames(c)) }

    /// A table for an entity a migration adds (its indexes come with the reconciliation).
    static func createEntityTable(_ c: SQLiteConnection, _ e: Entity) throws {
        try c.execute("CREATE TABLE \(SQLMapping.quote(e.name))(\(entityColumns(e).joined(separator: ", ")))")
    }

    /// A many-to-many join table with its reverse index.
    static func createJoinTable(_ c: SQLiteConnection, _ name: String) throws {
        let q = SQLMapping.quote
        try c.execute(
            "CREATE TABLE \(q(name))(a INTEGER NOT NULL, b INTEGER NOT NULL, PRIMARY KEY (a, b)) WITHOUT ROWID;"
                + "CREATE INDEX \(q(name + "_b")) ON \(q(name))(b, a);")
    }

    /// Makes a schema change that touches no table, so that every other process's next read or
    /// write sees the schema cookie move (a migration that changed only rules or the version).
    static func touchSchema(_ c: SQLiteConnection) throws {
        try c.execute("CREATE TABLE ss_migration_mark(x); DROP TABLE ss_migration_mark;")
    }

    /// SQLite's schema cookie: it moves with every schema change by any connection.
    static func schemaCookie(_ c: SQLiteConnection) throws -> Int64 {
        try c.cached("PRAGMA schema_version").firstRow { $0.int64(0) } ?? 0
    }

    /// The model version the store's meta records (nil: a store of format 2, which has none).
    static func storedModelVersion(_ c: SQLiteConnection) throws -> Int? {
        try c.cached("SELECT value FROM ss_meta WHERE key = 'model_version'").firstRow { Int($0.text(0)) } ?? nil
    }

    /// Removes kept count `name`'s row.
    static func deleteKeptCount(_ c: SQLiteConnection, _ name: String) throws {
        try c.execute("DELETE FROM ss_counts WHERE name = ?", [.text(name)])
    }
}

/// Which half of ``SchemaSQL/reconcileIndexes(_:model:phase:)`` to run.
enum IndexPhase { case drop, create }

extension SchemaSQL {
    /// How many rows `table` holds.
    static func rowCount(_ c: SQLiteConnection, _ table: String) throws -> Int64 {
        try c.cached("SELECT count(*) FROM \(SQLMapping.quote(table))").firstRow { $0.int64(0) } ?? 0
    }

    /// The indexes `model` wants: a to-one relationship's, each declared index, each uniqueness
    /// constraint's.
    static func desiredIndexes(_ model: Model) -> [IndexDefinition] {
        var out: [IndexDefinition] = []
        for e in model.entities {
            for r in e.toOneRelationships {
                out.append(
                    IndexDefinition(
                        name: "ss_fk_\(e.name)_\(r.name)", table: e.name, unique: false,
                        columns: [StoredSchema.IndexPart(property: r.name, ascending: true)]))
            }
            for index in e.indexes {
                out.append(
                    IndexDefinition(
                        name: indexName(e, index), table: e.name, unique: false,
                        columns: index.parts.map {
                            StoredSchema.IndexPart(property: $0.property, ascending: $0.ascending)
                        }
                    ))
            }
            for u in e.uniquenessConstraints {
                out.append(
                    IndexDefinition(
                        name: "ss_unique_\(e.name)_" + u.joined(separator: "_"), table: e.name, unique: true,
                        columns: u.map { StoredSchema.IndexPart(property: $0, ascending: true) }))
            }
        }
        return out
    }

    /// Makes the store's indexes those `model` wants, compared by what they cover (a renamed
    /// column's index stays as it is): `.drop` removes the others (before columns go), `.create`
    /// makes the missing ones (after new columns came). A new unique index fails on duplicates.
    static func reconcileIndexes(_ c: SQLiteConnection, model: Model, phase: IndexPhase) throws {
        let existing = try indexDefinitions(c)
        let desired = desiredIndexes(model)
        switch phase {
        case .drop:
            let wanted = Set(desired.map(\.content))
            for index in existing where !wanted.contains(index.content) { try dropIndex(c, index.name) }
        case .create:
            let have = Set(existing.map(\.content))
            var names = Set(try c.cached("SELECT name FROM sqlite_schema WHERE type = 'index'").rows { $0.text(0) })
            for index in desired where !have.contains(index.content) {
                var name = index.name
                var k = 2
                while names.contains(name) {
                    name = "\(index.name)_\(k)"
                    k += 1
                }
                names.insert(name)
                try createIndex(
                    c, IndexDefinition(name: name, table: index.table, unique: index.unique, columns: index.columns))
            }
        }
    }

    /// Counts kept count `count` of `entity` from its table and stores it.
    static func recount(_ c: SQLiteConnection, model: Model, entity: String, count: String) throws {
        let e = try model.entity(entity)
        guard let k = e.keptCounts.first(where: { $0.name == count }) else { return }
        var q = QueryBuilder(model: model, entity: e, storeID: UUID())
        let condition = try q.sql(k.condition)
        let n =
            try c.cached(SelectFrame.select(["count(*)"], from: e, where: condition))
            .firstRow(q.bindings) { $0.int64(0) } ?? 0
        try c.execute(
            "INSERT INTO ss_counts(name, value) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = excluded.value",
            [.text(keptCountName(e, k)), .integer(n)])
    }

    /// The last of a migration, in its transaction: the meta rows of the new model, a history
    /// transaction with no change (so that every consumer and live query looks again), and a
    /// schema change every other process notices at its next read or write.
    static func finishMigration(
        _ c: SQLiteConnection, meta: [(MetaKey, String)], history: (author: String, context: String), changes: [UInt8]
    ) throws {
        for (key, value) in meta { try setMeta(c, key, value) }
        // A store of format 2 kept its model as a description; format 3 keeps `schema`.
        try c.execute("DELETE FROM ss_meta WHERE key = 'model'")
        try c.cached(
            """
            INSERT INTO ss_history(timestamp, author, context, process, executable, entities, changes)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """
        ).execute([
            .double(Date().timeIntervalSince1970), .text(history.author), .text(history.context),
            .integer(Int64(getpid())), .text(ProcessInfo.processInfo.processName),
            .integer(HistoryCodec.allEntities), .blob(changes),
        ])
        try touchSchema(c)
    }
}

/// The token lease inside a migration's transaction, which runs before a container exists
/// (``Container/leaseForMigration(_:meta:)``).
extension SchemaSQL {
    /// The newest token ever given, on a bare connection (``currentToken()``'s statement).
    static func newestToken(_ c: SQLiteConnection) throws -> Int64 {
        try c.cached(TransactionSQL.currentTokenSQL).firstRow { $0.int64(0) } ?? 0
    }

    /// A transaction of `author` with no changes at `token` (moving the sequence on).
    static func insertEmptyTransaction(_ c: SQLiteConnection, token: Int64, author: String, context: String) throws {
        try c.cached(
            """
            INSERT INTO ss_history(timestamp, author, context, process, executable, entities, changes, token)
            VALUES (?, ?, ?, ?, ?, 0, ?, ?)
            """
        ).execute([
            .double(Date().timeIntervalSince1970), .text(author), .text(context), .integer(Int64(getpid())),
            .text(ProcessInfo.processInfo.processName), .blob(HistoryCodec.empty), .integer(token),
        ])
    }

    /// The level of `synchronous` in force: 2 for FULL, 1 for NORMAL.
    static func synchronousLevel(_ c: SQLiteConnection) throws -> Int64 {
        try c.cached("PRAGMA synchronous").firstRow { $0.int64(0) } ?? 1
    }
}

/// SQL for resolving the duplicates a new uniqueness constraint meets (``DuplicateResolution``).
extension SchemaSQL {
    /// The primary keys of each group of rows sharing the values of `columns`, ascending.
    static func duplicateGroups(_ c: SQLiteConnection, _ table: String, _ columns: [String]) throws -> [[Int64]] {
        let q = SQLMapping.quote
        let cols = columns.map(q).joined(separator: ", ")
        let notNull = columns.map { "\(q($0)) IS NOT NULL" }.joined(separator: " AND ")
        let key = StoreColumn.primaryKey
        let sql =
            "SELECT group_concat(\(key)) FROM (SELECT \(key), \(cols) FROM \(q(table)) WHERE \(notNull) "
            + "ORDER BY \(key)) GROUP BY \(cols) HAVING count(*) > 1"
        return try c.cached(sql).rows { row in row.text(0).split(separator: ",").compactMap { Int64($0) }.sorted() }
    }

    /// `?` bound to a JSON array of keys, for `IN (SELECT value FROM json_each(?))`.
    private static func keyList(_ keys: [Int64]) -> SQLValue {
        .text("[" + keys.map(String.init).joined(separator: ",") + "]")
    }

    /// Points to-one `column` of `table` at `target` wherever it points at one of `from`;
    /// returns the keys of the rows changed.
    static func repoint(_ c: SQLiteConnection, _ table: String, _ column: String, from: [Int64], to target: Int64)
        throws -> [Int64]
    {
        let q = SQLMapping.quote
        let match = "\(q(column)) IN (SELECT value FROM json_each(?))"
        let changed = try c.cached("SELECT \(StoreColumn.primaryKey) FROM \(q(table)) WHERE \(match)")
            .rows([keyList(from)]) { $0.int64(0) }
        try c.execute(
            "UPDATE \(q(table)) SET \(q(column)) = ?, \(StoreColumn.bumpVersion) WHERE \(match)",
            [.integer(target), keyList(from)])
        return changed
    }

    /// Moves the links of join table `join` from any of `from` (in column `mine`) to `target`;
    /// returns the keys on the other side (column `theirs`) whose links moved.
    static func moveLinks(
        _ c: SQLiteConnection, _ join: String, mine: String, theirs: String, from: [Int64], to target: Int64
    )
        throws -> [Int64]
    {
        let q = SQLMapping.quote
        let match = "\(mine) IN (SELECT value FROM json_each(?))"
        let others = try c.cached("SELECT DISTINCT \(theirs) FROM \(q(join)) WHERE \(match)").rows([keyList(from)]) {
            $0.int64(0)
        }
        try c.execute(
            "INSERT OR IGNORE INTO \(q(join))(\(mine), \(theirs)) SELECT ?, \(theirs) FROM \(q(join)) WHERE \(match)",
            [.integer(target), keyList(from)])
        try c.execute("DELETE FROM \(q(join)) WHERE \(match)", [keyList(from)])
        return others
    }

    /// The values of `columns` of row `pk` (a tombstone before a delete), by column.
    static func rowValues(_ c: SQLiteConnection, _ table: String, _ pk: Int64, _ columns: [(String, AttributeType)])
        throws -> [Value]
    {
        guard !columns.isEmpty else { return [] }
        let q = SQLMapping.quote
        let list = columns.map { q($0.0) }.joined(separator: ", ")
        let sql = "SELECT \(list) FROM \(q(table)) WHERE \(StoreColumn.isKey)"
        return try c.cached(sql).firstRow([.integer(pk)]) { row in
            columns.enumerated().map { SQLMapping.value(row, Int32($0.offset), $0.element.1) }
        } ?? []
    }

    /// Deletes rows `keys` of `table`.
    static func deleteRows(_ c: SQLiteConnection, _ table: String, _ keys: [Int64]) throws {
        let match = "\(StoreColumn.primaryKey) IN (SELECT value FROM json_each(?))"
        try c.execute("DELETE FROM \(SQLMapping.quote(table)) WHERE \(match)", [keyList(keys)])
    }
}

/// Derived attributes computed in SQL from what they derive from: for a migration that adds one,
/// `storectl verify` (which compares) and `storectl recount` (which puts them right).
extension SchemaSQL {
    /// The SQL expression of derived attribute `a` of `e` for the row `t0`; nil for `now` (the
    /// time of a save cannot be computed again).
    static func derivedExpression(_ model: Model, _ e: Entity, _ a: Attribute) -> String? {
        let (q, row, key) = (SQLMapping.quote, SelectFrame.column, StoreColumn.primaryKey)
        guard let d = a.derivation else { return nil }
        switch d {
        case .now: return nil
        case .canonical(let source): return "ss_canonical(\(row(q(source))))"
        case .related(let via, let source):
            guard let r = e.relationship(named: via) else { return nil }
            return "(SELECT d.\(q(source)) FROM \(q(r.destination)) AS d WHERE d.\(key) = \(row(q(via))))"
        case .count(let rel):
            guard let r = e.relationship(named: rel) else { return nil }
            return "(SELECT count(*) FROM \(q(r.destination)) AS d WHERE d.\(q(r.inverse)) = \(row(key)))"
        case .sum(let rel, let source):
            guard let r = e.relationship(named: rel) else { return nil }
            let total = a.type == .double ? "total(d.\(q(source)))" : "coalesce(sum(d.\(q(source))), 0)"
            return "(SELECT \(total) FROM \(q(r.destination)) AS d WHERE d.\(q(r.inverse)) = \(row(key)))"
        }
    }

    /// Computes derived attribute `attribute` of `entity` again for every object; returns how
    /// many objects held another value.
    @discardableResult
    static func recomputeDerived(
        _ c: SQLiteConnection, model: Model, entity: String, attribute: String, rows: RowProgress? = nil
    ) throws -> Int {
        let e = try model.entity(entity)
        guard let a = e.attribute(named: attribute), let expr = derivedExpression(model, e, a) else { return 0 }
        let col = SQLMapping.quote(a.name)
        return try updateInRanges(
            c, e.name, set: "\(col) = \(expr)", where: "\(SelectFrame.column(col)) IS NOT \(expr)", rows: rows)
    }

    /// How many objects of `e` hold a derived attribute `a` that computing it again would change.
    static func derivedMismatches(_ c: SQLiteConnection, model: Model, _ e: Entity, _ a: Attribute) throws -> Int64 {
        guard let expr = derivedExpression(model, e, a) else { return 0 }
        let stored = SelectFrame.column(SQLMapping.quote(a.name))
        return try c.cached(SelectFrame.select(["count(*)"], from: e, where: "\(stored) IS NOT \(expr)"))
            .firstRow { $0.int64(0) } ?? 0
    }
}
