import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// One row of `ss_history`, as stored.
struct HistoryRow {
    let token: Int64
    let timestamp: Double
    let author: String?
    let context: String?
    let process: Int64
    let executable: String
    /// A bit per entity the changes touch (written, not read back).
    var entities: Int64 = 0
    let changes: [UInt8]
}

/// Which rows of `ss_history` a history request reads (besides the start token).
struct HistoryFilter {
    var authors: [String]?
    var excludedAuthors: [String] = []
    /// Only transactions touching one of these entities (a bit per entity index).
    var entityMask: Int64?
    /// Only transactions after this time (seconds since 1970).
    var after: Double?
}

/// The statement of a history stream and the values of its filter.
struct HistoryQuery {
    let sql: String
    let filterValues: [SQLValue]
}

/// What `ss_meta` says about history: the floor it was deleted through, the newest time deleted,
/// and the token numbers a restore lost (as stored: see ``Container/parseLostRanges(_:)``).
struct HistoryMeta {
    var floor: Int64 = 0
    var floorTime: Double = 0
    var lost: String?
}

/// `ss_history`: one compact row per transaction; its row id is the token.
extension TransactionSQL {
    /// Appends a transaction; returns its token (the new row id). (`row.token` is not used.)
    func insertHistory(_ row: HistoryRow) throws -> Int64 {
        try statement(
            .historyInsert,
            """
            INSERT INTO ss_history(timestamp, author, context, process, executable, entities, changes)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """
        ).execute(historyValues(row), borrowing: row.changes)
        return c.lastInsertRowID
    }

    /// The row's columns before its changes (``insertHistory(_:)`` binds the changes in place).
    private func historyValues(_ row: HistoryRow) -> [SQLValue] {
        [
            .double(row.timestamp), row.author.map(SQLValue.text) ?? .null, row.context.map(SQLValue.text) ?? .null,
            .integer(row.process), .text(row.executable), .integer(row.entities),
        ]
    }

    /// The newest token ever given: the largest row, or the floor when history was deleted.
    func currentToken() throws -> Int64 {
        try statement(.currentToken, Self.currentTokenSQL).firstRow { $0.int64(0) } ?? 0
    }

    /// The newest token ever given: the largest row, or the floor when history was deleted.
    static let currentTokenSQL = """
        SELECT max(coalesce((SELECT max(token) FROM ss_history), 0),
                   (SELECT CAST(value AS INTEGER) FROM ss_meta WHERE key = 'history_deleted_through'))
        """

    func historyMeta() throws -> HistoryMeta {
        var meta = HistoryMeta()
        try c.cached(
            """
            SELECT key, value FROM ss_meta
            WHERE key IN ('history_deleted_through', 'history_deleted_time', 'lost_tokens')
            """
        ).forEachRow { row in
            switch MetaKey(rawValue: row.text(0)) {
            case .historyDeletedThrough: meta.floor = Int64(row.text(1)) ?? 0
            case .historyDeletedTime: meta.floorTime = Double(row.text(1)) ?? 0
            case .lostTokens: meta.lost = row.text(1)
            case .format, .storeID, .model, .modelVersion, .schema, .catalog, .createdAt, .registryInUse, .tokenLease,
                .tokenLeaseAhead,
                .cleanerRuns, nil:
                break
            }
        }
        return meta
    }

    /// The statement that reads the rows of `filter` after a token, built once per stream.
    static func historyQuery(_ filter: HistoryFilter) -> HistoryQuery {
        var sql =
            "SELECT token, timestamp, author, context, process, executable, changes FROM ss_history WHERE token > ?"
        var values: [SQLValue] = []
        func placeholders(_ n: Int) -> String { Array(repeating: "?", count: n).joined(separator: ",") }
        if let authors = filter.authors {
            sql += " AND author IN (\(placeholders(authors.count)))"
            values += authors.map(SQLValue.text)
        }
        if !filter.excludedAuthors.isEmpty {
            sql += " AND (author IS NULL OR author NOT IN (\(placeholders(filter.excludedAuthors.count))))"
            values += filter.excludedAuthors.map(SQLValue.text)
        }
        if let mask = filter.entityMask {
            sql += " AND (entities & ?) != 0"
            values.append(.integer(mask))
        }
        if let time = filter.after {
            sql += " AND timestamp > ?"
            values.append(.double(time))
        }
        return HistoryQuery(sql: sql + " ORDER BY token LIMIT ?", filterValues: values)
    }

    /// Up to `limit` rows of `query` after token `after`, in token order, decoded into
    /// transactions (those without a change of `entities`, when given, are left out). Returns
    /// them with how many rows were read and the last token read.
    func historyTransactions(_ query: HistoryQuery, after: Int64, limit: Int, entities: Set<Int>?)
        throws -> (transactions: [HistoryTransaction], scanned: Int, last: Int64)
    {
        var out: [HistoryTransaction] = []
        var scanned = 0
        var last = after
        let model = container.model
        let storeID = container.storeID
        let values = [.integer(after)] + query.filterValues + [.integer(Int64(limit))]
        try c.cached(query.sql).forEachRow(values) { row in
            scanned += 1
            last = row.int64(0)
            let changes = try HistoryCodec.decode(
                row.blob(6), model: model, numbering: container.numbering, storeID: storeID, entityFilter: entities)
            // A migration's transaction concerns every entity, with no change to list.
            if entities != nil && changes.isEmpty && (row.isNull(2) || row.text(2) != MigrationHistory.author) {
                return
            }
            out.append(
                HistoryTransaction(
                    token: HistoryToken(storeID: storeID, value: last), author: row.isNull(2) ? nil : row.text(2),
                    contextName: row.isNull(3) ? nil : row.text(3), processID: row.int64(4), executable: row.text(5),
                    timestamp: Date(timeIntervalSince1970: row.double(1)), changes: changes))
        }
        return (out, scanned, last)
    }

    /// How many transactions after the floor are at or below `through`.
    /// The mean size in bytes of the newest `sample` transactions' change blobs (0 when none).
    func historyMeanBytes(sample: Int) throws -> Double {
        try c.cached(
            "SELECT coalesce(avg(length(changes)), 0) FROM (SELECT changes FROM ss_history ORDER BY token DESC LIMIT ?)"
        ).firstRow([.integer(Int64(sample))]) { $0.double(0) } ?? 0
    }

    func historyCount(through: Int64) throws -> Int {
        try c.cached(
            """
            SELECT count(*) FROM ss_history WHERE token <= ?
            AND token > (SELECT CAST(value AS INTEGER) FROM ss_meta WHERE key = 'history_deleted_through')
            """
        ).firstRow([.integer(through)]) { Int($0.int64(0)) } ?? 0
    }

    // MARK: - Deleting

    /// The next chunk to delete: the oldest `size` rows at or below `through`, never the newest
    /// row (it keeps tokens from being reused). Returns the largest token and time in it, how
    /// many rows, and how many of them are above the floor (still counted as retained).
    func historyChunk(through: Int64, floor: Int64, size: Int) throws -> (
        maxToken: Int64, maxTime: Double, count: Int, live: Int
    ) {
        try c.cached(
            """
            SELECT max(token), max(timestamp), count(*), coalesce(sum(token > ?), 0) FROM (
              SELECT token, timestamp FROM ss_history
              WHERE token <= ? AND token < (SELECT max(token) FROM ss_history) ORDER BY token LIMIT ?)
            """
        ).firstRow([.integer(floor), .integer(through), .integer(Int64(size))]) {
            ($0.int64(0), $0.double(1), Int($0.int64(2)), Int($0.int64(3)))
        } ?? (0, 0, 0, 0)
    }

    /// Deletes the rows at or below `through`, the newest row excepted.
    func deleteHistoryRows(through: Int64) throws {
        try c.cached("DELETE FROM ss_history WHERE token <= ? AND token < (SELECT max(token) FROM ss_history)")
            .execute([.integer(through)])
    }

    /// The newest row in `(above, through]` (the newest row of all, left as a marker), if any.
    func newestHistoryRow(above: Int64, through: Int64) throws -> (token: Int64, time: Double)? {
        try c.cached(
            "SELECT token, timestamp FROM ss_history WHERE token <= ? AND token > ? ORDER BY token DESC LIMIT 1"
        )
        .firstRow([.integer(through), .integer(above)]) { ($0.int64(0), $0.double(1)) }
    }

    /// A passive WAL checkpoint: copies what it can back into the database, never waiting.
    func checkpoint() throws {
        _ = try c.cached("PRAGMA wal_checkpoint(PASSIVE)").firstRow { $0.int64(0) }
    }

    /// The first `length` bytes of every change blob after `floor` (the change count leads it).
    func historyPrefixes(after floor: Int64, length: Int, _ body: ([UInt8]) throws -> Void) throws {
        try c.cached("SELECT substr(changes, 1, ?) FROM ss_history WHERE token > ?")
            .forEachRow([.integer(Int64(length)), .integer(floor)]) { try body($0.blob(0)) }
    }
}
