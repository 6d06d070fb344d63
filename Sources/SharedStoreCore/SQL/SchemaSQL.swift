import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// The SQL of opening, making and migrating a store, on a bare connection: the connection's
/// settings, SharedStore's own tables, one table per entity, join tables, indexes, the meta rows,
/// the functions SQL calls back. It needs no container, so it also serves the few statements a
/// container's transaction runs on its connection as such, not on the model's objects: the
/// schema check of every transaction, a lost token range, the mirror's tables, the token lease.
/// Its sibling ``TransactionSQL`` is the SQL of the objects, history and queries of an open
/// container's transactions.
enum SchemaSQL {
    /// WAL mode, the synchronous level and when the writer checkpoints (``CheckpointPolicy``:
    /// the WAL keeps restarting while several processes write). `journal_mode` answers with a
    /// row; it fails here first when the file is not a database.
    static func configure(_ c: SQLiteConnection, synchronous: Container.Options.Synchronous) throws {
        _ = try c.cached("PRAGMA journal_mode = WAL").firstRow { $0.text(0) }
        try setSynchronous(c, synchronous)
        try c.checkpoint(by: CheckpointPolicy())
    }

    /// The synchronous level of the connection's next commits (outside a transaction: SQLite
    /// refuses to change it inside one).
    static func setSynchronous(_ c: SQLiteConnection, _ synchronous: Container.Options.Synchronous) throws {
        switch synchronous {
        case .normal: try c.execute("PRAGMA synchronous = NORMAL")
        case .full: try c.execute("PRAGMA synchronous = FULL")
        }
    }

    /// A connection that can only read (the container's reader).
    static func makeQueryOnly(_ c: SQLiteConnection) throws {
        try c.execute("PRAGMA query_only = 1")
    }

    /// The names of the database's tables.
    static func tableNames(_ c: SQLiteConnection) throws -> [String] {
        try c.cached("SELECT name FROM sqlite_schema WHERE type = 'table'").rows { $0.text(0) }
    }

    /// Brings a store of format 2 to format 3: its meta rows, and the kept counts' table.
    static func upgradeLegacy(_ c: SQLiteConnection, meta: [(MetaKey, String)]) throws {
        try c.execute(createCountsTable)
        try c.execute("DELETE FROM ss_meta WHERE key = 'model'")
        let upsert = try c.cached(
            "INSERT INTO ss_meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
        for (key, value) in meta { try upsert.execute([.text(key.rawValue), .text(value)]) }
    }

    /// The table that marks a SharedStore store.
    static let metaTable = "ss_meta"

    // MARK: - Meta

    /// Every meta value, by key text (unknown keys included: a newer version may add some).
    static func meta(_ c: SQLiteConnection) throws -> [String: String] {
        var meta: [String: String] = [:]
        try c.cached("SELECT key, value FROM ss_meta").forEachRow { meta[$0.text(0)] = $0.text(1) }
        return meta
    }

    /// Sets `key` in `ss_meta` to `value`.
    static func setMeta(_ c: SQLiteConnection, _ key: MetaKey, _ value: String) throws {
        try c.cached(
            "INSERT INTO ss_meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"
        )
        .execute([.text(key.rawValue), .text(value)])
    }

    /// Removes `key` from `ss_meta`.
    static func deleteMeta(_ c: SQLiteConnection, _ key: MetaKey) throws {
        try c.cached("DELETE FROM ss_meta WHERE key = ?").execute([.text(key.rawValue)])
    }

    // MARK: - Kept counts

    /// The table of kept counts (``KeptCount``), made with every store.
    static let createCountsTable =
        "CREATE TABLE IF NOT EXISTS ss_counts(name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;\n"

    /// The row name of a kept count: `Entity.name`.
    static func keptCountName(_ e: Entity, _ k: KeptCount) -> String { "\(e.name).\(k.name)" }

    // MARK: - Tables

    /// Creates every table and index of `model` and writes `meta`.
    static func createSchema(_ c: SQLiteConnection, model: Model, meta: [(MetaKey, String)]) throws {
        var sql = """
            CREATE TABLE ss_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
            CREATE TABLE ss_history(
                token INTEGER PRIMARY KEY,
                timestamp REAL NOT NULL,
                author TEXT,
                context TEXT,
                process INTEGER NOT NULL,
                executable TEXT NOT NULL,
                entities INTEGER NOT NULL,
                changes BLOB NOT NULL);

            """
        sql += createCountsTable
        for e in model.entities { sql += entityTables(e, model: model) }
        try c.execute(sql)
        let insert = try c.cached("INSERT INTO ss_meta(key, value) VALUES (?, ?)")
        for (key, value) in meta { try insert.execute([.text(key.rawValue), .text(value)]) }
        // A new store is empty: every kept count starts at 0.
        let count = try c.cached("INSERT INTO ss_counts(name, value) VALUES (?, 0)")
        for e in model.entities {
            for k in e.keptCounts { try count.execute([.text(keptCountName(e, k))]) }
        }
    }

    /// The table of `e` (AUTOINCREMENT: a deleted object's id is never given to another), its
    /// foreign-key indexes, the join tables it owns, its uniqueness indexes.
    private static func entityTables(_ e: Entity, model: Model) -> String {
        let q = SQLMapping.quote
        var sql = "CREATE TABLE \(q(e.name))(\(entityColumns(e).joined(separator: ", ")));\n"
        for r in e.toOneRelationships {
            sql += "CREATE INDEX \(q("ss_fk_\(e.name)_\(r.name)")) ON \(q(e.name))(\(q(r.name)));\n"
        }
        for r in e.toManyRelationships {
            guard let join = model.joinTable(e, r), join.isOwner else { continue }
            sql +=
                "CREATE TABLE \(q(join.name))(a INTEGER NOT NULL, b INTEGER NOT NULL, PRIMARY KEY (a, b)) "
                + "WITHOUT ROWID;\n"
            sql += "CREATE INDEX \(q(join.name + "_b")) ON \(q(join.name))(b, a);\n"
        }
        for index in e.indexes { sql += createIndex(e, index) + ";\n" }
        for (i, u) in e.uniquenessConstraints.enumerated() {
            sql +=
                "CREATE UNIQUE INDEX \(q("ss_unique_\(e.name)_\(i)")) ON "
                + "\(q(e.name))(\(u.map(q).joined(separator: ", ")));\n"
        }
        return sql
    }

    /// The column definitions of the table of `e`: SharedStore's own columns around its
    /// properties (``StoreColumn``).
    static func entityColumns(_ e: Entity) -> [String] {
        let q = SQLMapping.quote
        var columns = [
            "\(StoreColumn.primaryKey) INTEGER PRIMARY KEY AUTOINCREMENT",
            "\(StoreColumn.version) INTEGER NOT NULL DEFAULT 1",
        ]
        columns += e.attributes.map { "\(q($0.name)) \(SQLMapping.columnType($0.type))" }
        columns += e.toOneRelationships.map { "\(q($0.name)) INTEGER" }
        columns.append("\(StoreColumn.globalID) BLOB")
        return columns
    }

    /// Gives every table of `tables` that lacks it the global id column and an id for each of
    /// its rows (a store of format 2 or 3 becoming format 4). Idempotent.
    static func addGlobalIDs(_ c: SQLiteConnection, tables: [String], rows: RowProgress? = nil) throws {
        for table in tables {
            let q = SQLMapping.quote(table)
            let has =
                try c.cached("SELECT 1 FROM pragma_table_info(?) WHERE name = ?")
                .firstRow([.text(table), .text(StoreColumn.globalID)]) { _ in true } ?? false
            if !has {
                try c.execute("ALTER TABLE \(q) ADD COLUMN \(StoreColumn.globalID) BLOB")
                _ = try updateInRanges(c, table, set: "\(StoreColumn.globalID) = ss_new_gid()", rows: rows)
            }
        }
    }

    /// Told, while a statement goes over a table in ranges, how many of its rows are done of all.
    typealias RowProgress = (_ done: Int, _ total: Int) -> Void

    /// `UPDATE table AS t0 SET assignment [WHERE condition]`, run over ranges of 65,536 rows in
    /// the order of their ids (in the caller's transaction), telling `rows` after each range how
    /// many are done: a statement over a million rows shows its progress. Without `rows`, one
    /// statement. Returns the rows changed.
    static func updateInRanges(
        _ c: SQLiteConnection, _ table: String, set assignment: String, where condition: String? = nil,
        rows: RowProgress?
    ) throws -> Int {
        let q = SQLMapping.quote(table)
        let update = "UPDATE \(q) AS \(SelectFrame.alias) SET \(assignment)"
        let also = condition.map { " AND (\($0))" } ?? ""
        guard let rows, let count = try c.cached("SELECT count(*) FROM \(q)").firstRow([], { Int($0.int64(0)) }),
            count > 0
        else {
            try c.execute(update + (condition.map { " WHERE \($0)" } ?? ""))
            return c.changes
        }
        let size = 65_536
        let key = StoreColumn.primaryKey
        let pk = SelectFrame.column(key)
        rows(0, count)
        var changed = 0
        var done = 0
        // The last id of the range before (nil: none yet, the first range starts at the lowest).
        var after: Int64?
        while true {
            let from: SQLValue = .integer(after ?? Int64.min)
            let above = after == nil ? ">=" : ">"
            // The id that ends the next range of `size` rows (nil: the rest of the table is less).
            let end = try c.cached("SELECT \(key) FROM \(q) WHERE \(key) \(above) ? ORDER BY \(key) LIMIT 1 OFFSET ?")
                .firstRow([from, .integer(Int64(size - 1))]) { $0.int64(0) }
            if let end {
                try c.cached(update + " WHERE \(pk) \(above) ? AND \(pk) <= ?" + also).execute([from, .integer(end)])
                done += size
            } else {
                try c.cached(update + " WHERE \(pk) \(above) ?" + also).execute([from])
                done = count
            }
            changed += c.changes
            rows(min(done, count), count)
            guard let end else { return changed }
            after = end
        }
    }

    /// The global id of row `pk` of `table` (a migration's connection).
    static func globalID(_ c: SQLiteConnection, _ table: String, _ pk: Int64) throws -> UUID? {
        try c.cached("SELECT \(StoreColumn.globalID) FROM \(SQLMapping.quote(table)) WHERE \(StoreColumn.isKey)")
            .firstRow([.integer(pk)]) { GlobalID.uuid($0.blob(0)) } ?? nil
    }

    /// `CREATE INDEX IF NOT EXISTS "ss_index_Entity_a_b_desc" ON "Entity"("a", "b" DESC)`.
    private static func createIndex(_ e: Entity, _ index: Index) -> String {
        let q = SQLMapping.quote
        let name = indexName(e, index)
        let columns = index.parts.map { q($0.property) + ($0.ascending ? "" : " DESC") }.joined(separator: ", ")
        return "CREATE INDEX IF NOT EXISTS \(q(name)) ON \(q(e.name))(\(columns))"
    }

    static func indexName(_ e: Entity, _ index: Index) -> String {
        "ss_index_\(e.name)_" + index.parts.map { $0.property + ($0.ascending ? "" : "_desc") }.joined(separator: "_")
    }

    /// `ss_strop(value, pattern, operator)`, the string matcher behind CONTAINS, BEGINSWITH,
    /// ENDSWITH, LIKE and == with case- and diacritic-insensitive variants (``StringMatch``).
    static func defineFunctions(_ c: SQLiteConnection) throws {
        // `ss_new_gid()`: a new global id (``GlobalID``), for the rows of a store made before them.
        try c.defineBlobFunction("ss_new_gid", argumentCount: 0) { _ in GlobalID.bytes(GlobalID.make()) }
        // `ss_canonical(text)`: what a `canonical` derived attribute holds (a migration and
        // `storectl verify` compute it in SQL).
        try c.defineTextFunction("ss_canonical", argumentCount: 1) { args in
            args.isNull(0) ? nil : DerivationMap.canonical(args.text(0))
        }
        try c.defineFunction("ss_strop", argumentCount: 3) { args in
            guard !args.isNull(0), !args.isNull(1), let match = StringMatch(code: args.int64(2)) else { return 0 }
            return match.matches(args.text(0), args.text(1)) ? 1 : 0
        }
    }
}

/// The mirror's tables (issue 14), made by its first run (see ``TransactionSQL`` for what each holds).
extension SchemaSQL {
    /// The table of a mirror's state: a store holds it once a mirror ran.
    static let mirrorTable = "ss_mirror"

    static func createMirrorTables(_ c: SQLiteConnection) throws {
        try c.execute(
            """
            CREATE TABLE IF NOT EXISTS ss_mirror(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS ss_mirror_ids(gid BLOB PRIMARY KEY, pk INTEGER NOT NULL) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS ss_mirror_alias(gid BLOB PRIMARY KEY, target BLOB NOT NULL) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS ss_mirror_merges(
                loser BLOB PRIMARY KEY, winner BLOB NOT NULL, entity TEXT NOT NULL) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS ss_mirror_quarantine(
                id INTEGER PRIMARY KEY, sequence INTEGER UNIQUE, origin TEXT NOT NULL, token INTEGER NOT NULL,
                gid BLOB, reason TEXT NOT NULL, at REAL NOT NULL);
            CREATE TABLE IF NOT EXISTS ss_mirror_reclaim(token INTEGER PRIMARY KEY);
            """)
        c.knownTables.removeAll()
    }
}
