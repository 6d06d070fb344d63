import CSQLite
import Foundation
import SharedStore

/// The baseline: the same rows written straight through SQLite's C API, with the same pragmas
/// (WAL, synchronous NORMAL), prepared statements and `BEGIN IMMEDIATE`, and no history.
final class Baseline {
    let db: OpaquePointer
    private var insert: OpaquePointer?
    private var update: OpaquePointer?
    private var begin: OpaquePointer?
    private var commit: OpaquePointer?

    /// `synchronous`: SQLite's level, NORMAL as the store's default, FULL against a durable store.
    init(path: String, synchronous: String = "NORMAL") throws {
        var handle: OpaquePointer?
        guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK, let handle
        else {
            sqlite3_close_v2(handle)
            throw BenchError("cannot open baseline database \(path)")
        }
        db = handle
        try exec(
            """
            PRAGMA journal_mode = WAL; PRAGMA synchronous = \(synchronous == "FULL" ? "FULL" : "NORMAL");
            CREATE TABLE IF NOT EXISTS "Item"(Z_PK INTEGER PRIMARY KEY AUTOINCREMENT, Z_OPT INTEGER NOT NULL DEFAULT 1,
              "title" TEXT, "value" INTEGER, "createdAt" REAL, "isRead" INTEGER);
            """)
        insert = try prepare(#"INSERT INTO "Item"("title", "value", "createdAt", "isRead") VALUES (?, ?, ?, ?)"#)
        update = try prepare(#"UPDATE "Item" SET "isRead" = ?, Z_OPT = Z_OPT + 1 WHERE Z_PK = ?"#)
        begin = try prepare("BEGIN IMMEDIATE")
        commit = try prepare("COMMIT")
    }

    deinit {
        [insert, update, begin, commit].forEach { sqlite3_finalize($0) }
        sqlite3_close_v2(db)
    }

    func exec(_ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
            throw BenchError(String(cString: sqlite3_errmsg(db)))
        }
    }

    /// SQLite's own ADD COLUMN of a text column to "Item" (the migrate case's baseline).
    func addColumn(_ name: String) throws {
        try exec(#"ALTER TABLE "Item" ADD COLUMN "\#(name)" TEXT"#)
    }

    func prepare(_ sql: String) throws -> OpaquePointer? {
        var stmt: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &stmt, nil) == SQLITE_OK else {
            throw BenchError(String(cString: sqlite3_errmsg(db)))
        }
        return stmt
    }

    private func run(_ stmt: OpaquePointer?) throws {
        guard sqlite3_step(stmt) == SQLITE_DONE else {
            sqlite3_reset(stmt)
            throw BenchError(String(cString: sqlite3_errmsg(db)))
        }
        sqlite3_reset(stmt)
    }

    private func insertRow(_ i: Int) throws {
        let title = "item \(i)"
        sqlite3_bind_text(insert, 1, title, -1, sharedstore_sqlite_transient())
        sqlite3_bind_int64(insert, 2, Int64(i))
        sqlite3_bind_double(insert, 3, Date().timeIntervalSince1970)
        sqlite3_bind_int64(insert, 4, 0)
        try run(insert)
    }

    /// One row per transaction.
    func saveOne(_ i: Int) throws {
        try run(begin)
        try insertRow(i)
        try run(commit)
    }

    /// `count` rows in one transaction.
    func saveBatch(_ count: Int, from start: Int) throws {
        try run(begin)
        for i in start..<(start + count) { try insertRow(i) }
        try run(commit)
    }

    func updateOne(pk: Int64, isRead: Bool) throws {
        try run(begin)
        sqlite3_bind_int64(update, 1, isRead ? 1 : 0)
        sqlite3_bind_int64(update, 2, pk)
        try run(update)
        try run(commit)
    }

    /// Reads `count` history rows after `token` of a SharedStore store, without decoding them:
    /// what a raw client would do to fetch the same transactions.
    static func readHistory(path: String, after token: Int64, count: Int) throws -> Int {
        var db: OpaquePointer?
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK, let db else {
            throw BenchError("cannot open \(path)")
        }
        defer { sqlite3_close_v2(db) }
        var stmt: OpaquePointer?
        sqlite3_prepare_v2(
            db,
            "SELECT token, timestamp, author, context, process, executable, changes FROM ss_history WHERE "
                + "token > ? ORDER BY token LIMIT ?",
            -1, &stmt, nil)
        defer { sqlite3_finalize(stmt) }
        sqlite3_bind_int64(stmt, 1, token)
        sqlite3_bind_int64(stmt, 2, Int64(count))
        var n = 0
        var bytes = 0
        while sqlite3_step(stmt) == SQLITE_ROW {
            n += 1
            bytes += Int(sqlite3_column_bytes(stmt, 6))
            _ = sqlite3_column_text(stmt, 2)
        }
        return n + (bytes < 0 ? 1 : 0)
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

// MARK: - Reads through the C API

extension Baseline {
    /// A read-only connection to the database at `path`.
    static func openReadOnly(_ path: String) throws -> OpaquePointer {
        var handle: OpaquePointer?
        guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READONLY, nil) == SQLITE_OK, let handle else {
            sqlite3_close_v2(handle)
            throw BenchError("cannot open \(path)")
        }
        return handle
    }

    /// "50 newest unread" through the C API: one prepared statement, the same index.
    final class NewestUnread {
        private let db: OpaquePointer
        private let stmt: OpaquePointer

        /// `synchronous`: SQLite's level, NORMAL as the store's default, FULL against a durable store.
        init(path: String, synchronous: String = "NORMAL") throws {
            db = try Baseline.openReadOnly(path)
            var s: OpaquePointer?
            let sql = #"""
                SELECT Z_PK, Z_OPT, "title", "value", "createdAt", "isRead" FROM "Item"
                WHERE "isRead" = 0 ORDER BY "createdAt" DESC, Z_PK DESC LIMIT 50
                """#
            guard sqlite3_prepare_v2(db, sql, -1, &s, nil) == SQLITE_OK, let s else {
                sqlite3_close_v2(db)
                throw BenchError("cannot prepare the baseline query")
            }
            stmt = s
        }

        deinit {
            sqlite3_finalize(stmt)
            sqlite3_close_v2(db)
        }

        /// Runs the query, reading every column of every row; returns how many rows.
        func run() throws -> Int {
            defer { sqlite3_reset(stmt) }
            var n = 0
            while sqlite3_step(stmt) == SQLITE_ROW {
                _ = sqlite3_column_int64(stmt, 0)
                _ = sqlite3_column_int64(stmt, 1)
                _ = sqlite3_column_text(stmt, 2).map { String(cString: $0) }
                _ = sqlite3_column_int64(stmt, 3)
                _ = sqlite3_column_double(stmt, 4)
                _ = sqlite3_column_int64(stmt, 5)
                n += 1
            }
            return n
        }
    }
}

extension Baseline {
    /// One prepared query through the C API, run with bindings, reading every column of every
    /// row as its type says (text as a String, as a client would).
    final class Query {
        enum Binding {
            case double(Double)
            case text(String)
        }

        private let db: OpaquePointer
        private let stmt: OpaquePointer

        init(path: String, sql: String) throws {
            db = try Baseline.openReadOnly(path)
            var s: OpaquePointer?
            guard sqlite3_prepare_v2(db, sql, -1, &s, nil) == SQLITE_OK, let s else {
                let message = String(cString: sqlite3_errmsg(db))
                sqlite3_close_v2(db)
                throw BenchError("cannot prepare the baseline query: \(message)")
            }
            stmt = s
        }

        deinit {
            sqlite3_finalize(stmt)
            sqlite3_close_v2(db)
        }

        /// The columns a fetch of a ReadLater article reads (the library reads the same).
        static let articleColumns =
            #"Z_PK, Z_OPT, "title", "url", "createdAt", "isRead", "note", "searchTitle", "tags", "category""#

        /// Articles with `createdAt` in [?, ?), by date: `query-range`'s SQL.
        static func articlesByDate(path: String) throws -> Query {
            try Query(
                path: path,
                sql: #"SELECT \#(articleColumns) FROM "Article" WHERE "createdAt" >= ? AND "createdAt" < ? "#
                    + #"ORDER BY "createdAt", Z_PK"#)
        }

        /// Articles with `searchTitle` in [?, ?), by it: `query-prefix`'s SQL.
        static func articlesByPrefix(path: String) throws -> Query {
            try Query(
                path: path,
                sql: #"SELECT \#(articleColumns) FROM "Article" WHERE "searchTitle" >= ? AND "searchTitle" < ? "#
                    + #"ORDER BY "searchTitle", Z_PK"#)
        }

        /// Runs the query with `bindings`; returns how many rows it read.
        func run(_ bindings: [Binding]) throws -> Int {
            defer {
                sqlite3_reset(stmt)
                sqlite3_clear_bindings(stmt)
            }
            for (i, b) in bindings.enumerated() {
                switch b {
                case .double(let d): sqlite3_bind_double(stmt, Int32(i + 1), d)
                case .text(let t): sqlite3_bind_text(stmt, Int32(i + 1), t, -1, sharedstore_sqlite_transient())
                }
            }
            var n = 0
            let columns = sqlite3_column_count(stmt)
            while sqlite3_step(stmt) == SQLITE_ROW {
                for c in 0..<columns {
                    switch sqlite3_column_type(stmt, c) {
                    case SQLITE_INTEGER: _ = sqlite3_column_int64(stmt, c)
                    case SQLITE_FLOAT: _ = sqlite3_column_double(stmt, c)
                    case SQLITE_TEXT: _ = sqlite3_column_text(stmt, c).map { String(cString: $0) }
                    case SQLITE_BLOB: _ = sqlite3_column_bytes(stmt, c)
                    default: break
                    }
                }
                n += 1
            }
            return n
        }
    }
}

// MARK: - A full model through the C API

extension Baseline {
    /// `batch-insert-full-model`'s baseline: links with a unique URL, indexes on the canonical
    /// title, the date and the folder, and folders' link counts, written in one transaction per
    /// batch with prepared statements; the plain rules (length, single line, an http(s) URL without
    /// white space) checked in Swift, and the canonical title lowercased, as a careful C client
    /// would. No history.
    final class FullModel {
        private let db: OpaquePointer
        private let insert: OpaquePointer
        private let count: OpaquePointer

        init(path: String, folders: Int) throws {
            var handle: OpaquePointer?
            guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK,
                let handle
            else {
                sqlite3_close_v2(handle)
                throw BenchError("cannot open baseline database \(path)")
            }
            db = handle
            let schema = """
                PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
                CREATE TABLE "Folder"(Z_PK INTEGER PRIMARY KEY, "name" TEXT NOT NULL,
                  "linkCount" INTEGER NOT NULL DEFAULT 0);
                CREATE TABLE "Link"(Z_PK INTEGER PRIMARY KEY AUTOINCREMENT, Z_OPT INTEGER NOT NULL DEFAULT 1,
                  "url" TEXT NOT NULL, "title" TEXT NOT NULL, "createdAt" REAL, "searchTitle" TEXT, "folder" INTEGER);
                CREATE UNIQUE INDEX "Link_url" ON "Link"("url");
                CREATE INDEX "Link_searchTitle" ON "Link"("searchTitle");
                CREATE INDEX "Link_createdAt" ON "Link"("createdAt");
                CREATE INDEX "Link_folder" ON "Link"("folder");
                WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < \(folders))
                INSERT INTO "Folder"("name") SELECT 'folder ' || x FROM c;
                """
            var i: OpaquePointer?
            var c: OpaquePointer?
            guard sqlite3_exec(db, schema, nil, nil, nil) == SQLITE_OK,
                sqlite3_prepare_v2(
                    db,
                    #"INSERT INTO "Link"("url", "title", "createdAt", "searchTitle", "folder") VALUES (?, ?, ?, ?, ?)"#,
                    -1, &i, nil) == SQLITE_OK,
                sqlite3_prepare_v2(
                    db, #"UPDATE "Folder" SET "linkCount" = "linkCount" + ? WHERE Z_PK = ?"#, -1, &c, nil) == SQLITE_OK,
                let i, let c
            else {
                let message = String(cString: sqlite3_errmsg(db))
                sqlite3_close_v2(db)
                throw BenchError("baseline full model: \(message)")
            }
            insert = i
            count = c
        }

        deinit {
            sqlite3_finalize(insert)
            sqlite3_finalize(count)
            sqlite3_close_v2(db)
        }

        private func step(_ stmt: OpaquePointer) throws {
            defer { sqlite3_reset(stmt) }
            guard sqlite3_step(stmt) == SQLITE_DONE else { throw BenchError(String(cString: sqlite3_errmsg(db))) }
        }

        private func exec(_ sql: String) throws {
            guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
                throw BenchError(String(cString: sqlite3_errmsg(db)))
            }
        }

        /// The plain rules: a title of 1 to 500 characters on one line, an http(s) URL with no
        /// white space or control character.
        private static func check(_ url: String, _ title: String) throws {
            let n = title.count
            guard n >= 1, n <= 500, !title.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" }),
                url.hasPrefix("http"), !url.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F })
            else { throw BenchError("invalid link \(url)") }
        }

        /// Inserts `rows` in one transaction, the i-th in folder `folderOf(i)`; counts the links
        /// of each folder once per batch.
        func insert(_ rows: [(url: String, title: String)], folderOf: (Int) -> Int) throws {
            try exec("BEGIN IMMEDIATE")
            var tally: [Int: Int] = [:]
            let now = Date().timeIntervalSince1970
            for (k, row) in rows.enumerated() {
                try Self.check(row.url, row.title)
                let folder = folderOf(k)
                sqlite3_bind_text(insert, 1, row.url, -1, sharedstore_sqlite_transient())
                sqlite3_bind_text(insert, 2, row.title, -1, sharedstore_sqlite_transient())
                sqlite3_bind_double(insert, 3, now)
                sqlite3_bind_text(insert, 4, row.title.lowercased(), -1, sharedstore_sqlite_transient())
                sqlite3_bind_int64(insert, 5, Int64(folder))
                try step(insert)
                tally[folder, default: 0] += 1
            }
            for (folder, n) in tally {
                sqlite3_bind_int64(count, 1, Int64(n))
                sqlite3_bind_int64(count, 2, Int64(folder))
                try step(count)
            }
            try exec("COMMIT")
        }
    }
}

// MARK: - Set-up through the C API

/// Makes `count` history transactions quickly: one real save, then copies of its row in SQL
/// (the setup is not measured; each copy is a valid transaction with its own token).
func fillHistory(_ container: Container, path: String, count: Int) throws {
    let context = container.newContext(name: "fill", author: "Filler")
    try context.insert("Item", item(0))
    try context.save()
    var db: OpaquePointer?
    guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK, let db else {
        throw BenchError("cannot open \(path)")
    }
    defer { sqlite3_close_v2(db) }
    sqlite3_busy_timeout(db, 10_000)
    let sql = """
        WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < \(count - 1))
        INSERT INTO ss_history(timestamp, author, context, process, executable, entities, changes)
        SELECT h.timestamp, h.author, h.context, h.process, h.executable, h.entities, h.changes
        FROM c, (SELECT * FROM ss_history ORDER BY token DESC LIMIT 1) AS h
        """
    guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
        throw BenchError(String(cString: sqlite3_errmsg(db)))
    }
}

/// The version of the SQLite library linked in.
func sqliteVersion() -> String { String(cString: sqlite3_libversion()) }
