import Foundation

/// Creates the schema of a model on first open and checks it on every later open.
enum Schema {
    static let formatVersion = "2"

    static func configure(_ c: SQLiteConnection, synchronous: String) throws {
        // journal_mode answers with a row; it fails here first when the file is not a database.
        _ = try c.cached("PRAGMA journal_mode = WAL").firstRow { $0.text(0) }
        try c.execute("PRAGMA synchronous = \(synchronous)")
    }

    /// The store's UUID when the schema exists and matches; nil for an empty database. Throws
    /// when the file is not a store, another application's database or a store of another model.
    static func existingStoreID(_ c: SQLiteConnection, model: Model, path: String) throws -> UUID? {
        let expected = model.schemaDescription
        return try StoreError.wrap(path: path) { try c.readTransaction { try check(c, expected: expected, path: path) } }
    }

    /// Creates the schema, unless another process created it since `existingStoreID` looked;
    /// returns the store's UUID.
    static func create(_ c: SQLiteConnection, model: Model, path: String) throws -> UUID {
        let expected = model.schemaDescription
        return try StoreError.wrap(path: path) {
            try c.writeTransaction {
                if let id = try check(c, expected: expected, path: path) { return id }
                return try create(c, model: model)
            }
        }
    }

    /// The store's UUID when the schema exists and matches, nil when the store is empty.
    private static func check(_ c: SQLiteConnection, expected: String, path: String) throws -> UUID? {
        let tables = try c.cached("SELECT name FROM sqlite_schema WHERE type = 'table'").rows { $0.text(0) }
        if tables.isEmpty { return nil }
        guard tables.contains("ss_meta") else {
            throw StoreError(.notAStore, "\(path) is an SQLite database of another application (no ss_meta table); left untouched")
        }
        var meta: [String: String] = [:]
        try c.cached("SELECT key, value FROM ss_meta").forEachRow { meta[$0.text(0)] = $0.text(1) }
        guard meta["format"] == formatVersion else {
            throw StoreError(.notAStore, "\(path) has an unknown SharedStore format '\(meta["format"] ?? "none")'")
        }
        guard let idText = meta["store_id"], let id = UUID(uuidString: idText) else {
            let shown = meta["store_id"].map { "'\(TextSafety.visible(String($0.prefix(60))))'" } ?? "none"
            throw StoreError(.notAStore, "\(path) has an invalid store id \(shown) in ss_meta: the store is damaged; left untouched")
        }
        let stored = meta["model"] ?? ""
        if stored != expected {
            let a = stored.split(separator: "\n").map(String.init), b = expected.split(separator: "\n").map(String.init)
            let detail: String
            if let first = a.first(where: { !b.contains($0) }) {
                detail = "the store has '\(first.trimmingCharacters(in: .whitespaces))', the model does not"
            } else if let first = b.first(where: { !a.contains($0) }) {
                detail = "the model has '\(first.trimmingCharacters(in: .whitespaces))', the store does not"
            } else {
                detail = "the declarations are in another order"
            }
            throw StoreError(.modelMismatch, "\(path) was made with a different model: \(detail); left untouched")
        }
        return id
    }

    private static func create(_ c: SQLiteConnection, model: Model) throws -> UUID {
        let id = UUID()
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
        for e in model.entities {
            // AUTOINCREMENT: a deleted object's id is never given to another object.
            var columns = ["Z_PK INTEGER PRIMARY KEY AUTOINCREMENT", "Z_OPT INTEGER NOT NULL DEFAULT 1"]
            columns += e.attributes.map { "\(SQLMapping.quote($0.name)) \(SQLMapping.columnType($0.type))" }
            columns += e.toOneRelationships.map { "\(SQLMapping.quote($0.name)) INTEGER" }
            sql += "CREATE TABLE \(SQLMapping.quote(e.name))(\(columns.joined(separator: ", ")));\n"
            for r in e.toOneRelationships {
                sql += "CREATE INDEX \(SQLMapping.quote("ss_fk_\(e.name)_\(r.name)")) ON \(SQLMapping.quote(e.name))(\(SQLMapping.quote(r.name)));\n"
            }
            for r in e.toManyRelationships {
                guard let join = model.joinTable(e, r), join.isOwner else { continue }
                sql += "CREATE TABLE \(SQLMapping.quote(join.name))(a INTEGER NOT NULL, b INTEGER NOT NULL, PRIMARY KEY (a, b)) WITHOUT ROWID;\n"
                sql += "CREATE INDEX \(SQLMapping.quote(join.name + "_b")) ON \(SQLMapping.quote(join.name))(b, a);\n"
            }
            for (i, u) in e.uniquenessConstraints.enumerated() {
                sql += "CREATE UNIQUE INDEX \(SQLMapping.quote("ss_unique_\(e.name)_\(i)")) ON \(SQLMapping.quote(e.name))(\(u.map(SQLMapping.quote).joined(separator: ", ")));\n"
            }
        }
        try c.execute(sql)
        let insert = try c.cached("INSERT INTO ss_meta(key, value) VALUES (?, ?)")
        try insert.execute([.text("format"), .text(formatVersion)])
        try insert.execute([.text("store_id"), .text(id.uuidString)])
        try insert.execute([.text("model"), .text(model.schemaDescription)])
        try insert.execute([.text("created_at"), .text(ISO8601.string(Date()))])
        try insert.execute([.text("history_deleted_through"), .text("0")])
        try insert.execute([.text("history_deleted_time"), .text("0")])
        return id
    }
}
