import CSQLite
import Foundation
import SharedStore

// MARK: - share-batch through the C API

extension Baseline {
    /// `share-extension share-batch` done straight through SQLite's C API, in this process: the
    /// file read in blocks and split at newline and tab bytes, each field checked as UTF-8, the
    /// plain rules checked (a title of 1 to 500 characters on one line, an http(s) URL with no
    /// white space or control character, a category name of 1 to 200 characters), a category
    /// looked up or made once per distinct name, each article inserted with its canonical title
    /// and a global id into the store's own tables and indexes (`store`, made by SharedStore),
    /// the categories' article counts and the kept counts written once at the end, in one
    /// transaction. No history. Returns how many articles it inserted.
    static func shareBatch(file: String, store: String) throws -> Int {
        let batch = try ShareBatchBaseline(store: store)
        try batch.begin()
        try forEachLine(file) { fields in
            guard fields.count == 2 || fields.count == 3 else {
                throw BenchError("baseline: a line of \(fields.count) fields")
            }
            try checkLink(fields[0], fields[1])
            let category = fields.count == 3 && !fields[2].isEmpty ? try batch.category(named: fields[2]) : nil
            try batch.insertArticle(url: fields[0], title: fields[1], category: category)
        }
        return try batch.commit()
    }

    /// The plain rules of an article: a title of 1 to 500 characters on one line, an http(s) URL
    /// with no white space or control character.
    private static func checkLink(_ url: String, _ title: String) throws {
        let n = title.count
        guard n >= 1, n <= 500, !title.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" }),
            url.hasPrefix("http"), !url.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F })
        else { throw BenchError("baseline: invalid link \(url)") }
    }

    /// Each non-blank line of `file`, split at tabs into UTF-8 checked fields, read in blocks of 1 MiB.
    private static func forEachLine(_ file: String, _ body: ([String]) throws -> Void) throws {
        guard let input = FileHandle(forReadingAtPath: file) else { throw BenchError("cannot read \(file)") }
        defer { try? input.close() }
        var pending: [UInt8] = []
        func emit(_ line: ArraySlice<UInt8>) throws {
            guard !line.isEmpty else { return }
            var fields: [String] = []
            for field in line.split(separator: 9, omittingEmptySubsequences: false) {
                guard let text = String(validating: field, as: UTF8.self) else { throw BenchError("not UTF-8") }
                fields.append(text)
            }
            try body(fields)
        }
        while let block = try input.read(upToCount: 1 << 20), !block.isEmpty {
            pending += block
            var start = pending.startIndex
            while let end = pending[start...].firstIndex(of: 10) {
                try emit(pending[start..<end])
                start = end + 1
            }
            pending.removeSubrange(..<start)
        }
        try emit(pending[...])
    }
}

/// The connection, statements and tallies of one C-API share-batch (``Baseline/shareBatch(file:store:)``).
private final class ShareBatchBaseline {
    private let db: OpaquePointer
    private var statements: [OpaquePointer] = []
    private var findCategory: OpaquePointer?
    private var insertCategory: OpaquePointer?
    private var insertArticle: OpaquePointer?
    /// Category ids by name, articles per category, articles inserted.
    private var categories: [String: Int64] = [:]
    private var tally: [Int64: Int64] = [:]
    private var articles = 0
    private let now = Date().timeIntervalSince1970
    /// Global ids: 8 random bytes made once, then a counter.
    private let prefix = UInt64.random(in: 0...UInt64.max)
    private var ids: UInt64 = 0

    init(store: String) throws {
        var handle: OpaquePointer?
        guard sqlite3_open_v2(store, &handle, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK, let db = handle else {
            sqlite3_close_v2(handle)
            throw BenchError("cannot open baseline store \(store)")
        }
        self.db = db
    }

    deinit {
        statements.forEach { sqlite3_finalize($0) }
        sqlite3_close_v2(db)
    }

    private func prepare(_ sql: String) throws -> OpaquePointer {
        var stmt: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &stmt, nil) == SQLITE_OK, let stmt else {
            throw BenchError("baseline share-batch: \(String(cString: sqlite3_errmsg(db)))")
        }
        statements.append(stmt)
        return stmt
    }

    private func step(_ stmt: OpaquePointer) throws {
        defer { sqlite3_reset(stmt) }
        let rc = sqlite3_step(stmt)
        guard rc == SQLITE_DONE || rc == SQLITE_ROW else {
            throw BenchError("baseline share-batch: \(String(cString: sqlite3_errmsg(db)))")
        }
    }

    /// The statements made, and the transaction begun.
    func begin() throws {
        try step(try prepare("PRAGMA synchronous = NORMAL"))
        findCategory = try prepare(#"SELECT Z_PK FROM "Category" WHERE "label" = ?"#)
        insertCategory = try prepare(#"INSERT INTO "Category"("label", "articleCount", Z_GID) VALUES (?, 0, ?)"#)
        insertArticle = try prepare(
            #"INSERT INTO "Article"("title", "url", "createdAt", "isRead", "searchTitle", "category", Z_GID) "#
                + "VALUES (?, ?, ?, 0, ?, ?, ?)")
        try step(try prepare("BEGIN IMMEDIATE"))
    }

    /// The category named `name`: known, stored, or inserted now.
    func category(named name: String) throws -> Int64 {
        if let known = categories[name] { return known }
        guard let findCategory, let insertCategory else { throw BenchError("baseline share-batch not begun") }
        let n = name.count
        guard n >= 1, n <= 200, !name.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" }) else {
            throw BenchError("baseline: invalid category \(name)")
        }
        var category: Int64?
        sqlite3_bind_text(findCategory, 1, name, -1, sharedstore_sqlite_transient())
        if sqlite3_step(findCategory) == SQLITE_ROW { category = sqlite3_column_int64(findCategory, 0) }
        sqlite3_reset(findCategory)
        if category == nil {
            sqlite3_bind_text(insertCategory, 1, name, -1, sharedstore_sqlite_transient())
            bindGlobalID(insertCategory, 2)
            try step(insertCategory)
            category = sqlite3_last_insert_rowid(db)
        }
        let id = category ?? 0
        categories[name] = id
        return id
    }

    /// One article, with its canonical title and a global id.
    func insertArticle(url: String, title: String, category: Int64?) throws {
        guard let insertArticle else { throw BenchError("baseline share-batch not begun") }
        sqlite3_bind_text(insertArticle, 1, title, -1, sharedstore_sqlite_transient())
        sqlite3_bind_text(insertArticle, 2, url, -1, sharedstore_sqlite_transient())
        sqlite3_bind_double(insertArticle, 3, now)
        sqlite3_bind_text(insertArticle, 4, title.lowercased(), -1, sharedstore_sqlite_transient())
        if let category {
            sqlite3_bind_int64(insertArticle, 5, category)
            tally[category, default: 0] += 1
        } else {
            sqlite3_bind_null(insertArticle, 5)
        }
        bindGlobalID(insertArticle, 6)
        try step(insertArticle)
        articles += 1
    }

    /// The categories' counts and the kept counts written, the transaction committed; returns how
    /// many articles were inserted.
    func commit() throws -> Int {
        let count = try prepare(#"UPDATE "Category" SET "articleCount" = "articleCount" + ? WHERE Z_PK = ?"#)
        let kept = try prepare("UPDATE ss_counts SET value = value + ? WHERE name IN ('Article.all', 'Article.unread')")
        for (category, n) in tally {
            sqlite3_bind_int64(count, 1, n)
            sqlite3_bind_int64(count, 2, category)
            try step(count)
        }
        sqlite3_bind_int64(kept, 1, Int64(articles))
        try step(kept)
        try step(try prepare("COMMIT"))
        return articles
    }

    /// A 16-byte global id bound at `index` (as SharedStore's own ids are made: a random UUID per
    /// row costs a system call).
    private func bindGlobalID(_ stmt: OpaquePointer, _ index: Int32) {
        ids &+= 1
        var id = (prefix, ids.bigEndian)
        _ = withUnsafeBytes(of: &id) { raw in
            sqlite3_bind_blob(stmt, index, raw.baseAddress, 16, sharedstore_sqlite_transient())
        }
    }
}
