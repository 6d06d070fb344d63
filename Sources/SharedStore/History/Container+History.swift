import Foundation

extension Container {
    /// The token of the newest transaction ever committed (also when history has since been
    /// deleted): fetching after it returns only what comes next.
    public func currentToken() throws -> HistoryToken {
        try read { c in HistoryToken(storeID: storeID, value: try currentTokenValue(c)) }
    }

    func currentTokenValue(_ c: SQLiteConnection) throws -> Int64 {
        try c.statement(Slot.currentToken, """
            SELECT max(coalesce((SELECT max(token) FROM ss_history), 0),
                       (SELECT CAST(value AS INTEGER) FROM ss_meta WHERE key = 'history_deleted_through'))
            """).firstRow { $0.int64(0) } ?? 0
    }

    /// Through which token history has been deleted, and the newest timestamp deleted.
    func deletedThrough(_ c: SQLiteConnection) throws -> (token: Int64, time: Double) {
        let meta = try historyMeta(c)
        return (meta.floor, meta.floorTime)
    }

    /// Through which token history was deleted (and the newest time deleted), and which token
    /// numbers a restore lost (``lostTokenRanges()``), in one read of `ss_meta`.
    func historyMeta(_ c: SQLiteConnection) throws -> (floor: Int64, floorTime: Double, lost: [ClosedRange<Int64>]) {
        var token: Int64 = 0, time = 0.0
        var lost: String?
        try c.cached("SELECT key, value FROM ss_meta WHERE key IN ('history_deleted_through', 'history_deleted_time', 'lost_tokens')")
            .forEachRow { row in
                switch row.text(0) {
                case "history_deleted_through": token = Int64(row.text(1)) ?? 0
                case "history_deleted_time": time = Double(row.text(1)) ?? 0
                default: lost = row.text(1)
                }
            }
        return (token, time, try lost.map(Self.parseLostRanges) ?? [])
    }

    /// All transactions matching `request`, in token order.
    ///
    /// - Throws: `.historyExpired` when history after the start has been deleted, `.foreignToken`
    ///   for a token of another store. Never a partial answer.
    public func fetchHistory(_ request: HistoryRequest) throws -> [HistoryTransaction] {
        var all: [HistoryTransaction] = []
        try history(request) { all += $0 }
        return all
    }

    /// Streams the transactions matching `request` in batches of `request.batchSize`, so that
    /// catching up on a million transactions holds one batch in memory at a time.
    ///
    /// Each batch is read in its own read transaction, which checks that no history after the
    /// last delivered token has been deleted meanwhile: a concurrent clean ends the stream with
    /// `.historyExpired` rather than a silent gap (invariant 3).
    public func history(_ request: HistoryRequest, _ body: ([HistoryTransaction]) throws -> Void) throws {
        guard request.batchSize > 0, (request.limit ?? 0) >= 0 else {
            throw StoreError(.invalidArgument, "history batch size must be positive and limit not negative")
        }
        var entityFilter: Set<Int>?
        var mask: Int64 = 0
        if let names = request.entities {
            var set = Set<Int>()
            for n in names {
                guard let i = model.entityIndex[n] else { throw StoreError(.unknownEntity, "unknown entity '\(n)' in history request") }
                set.insert(i)
                mask |= HistoryCodec.bit(i)
            }
            entityFilter = set
        }
        var sql = "SELECT token, timestamp, author, context, process, executable, changes FROM ss_history WHERE token > ?"
        var filters: [SQLValue] = []
        if let authors = request.authors {
            sql += " AND author IN (\(Array(repeating: "?", count: authors.count).joined(separator: ",")))"
            filters += authors.map(SQLValue.text)
        }
        if !request.excludedAuthors.isEmpty {
            sql += " AND (author IS NULL OR author NOT IN (\(Array(repeating: "?", count: request.excludedAuthors.count).joined(separator: ","))))"
            filters += request.excludedAuthors.map(SQLValue.text)
        }
        if entityFilter != nil {
            sql += " AND (entities & ?) != 0"
            filters.append(.integer(mask))
        }
        var afterDate: Double?
        if case .afterDate(let d) = request.start {
            sql += " AND timestamp > ?"
            afterDate = d.timeIntervalSince1970
            filters.append(.double(d.timeIntervalSince1970))
        }
        sql += " ORDER BY token LIMIT ?"

        var cursor: Int64 = 0
        var first = true
        var remaining = request.limit ?? Int.max
        while remaining > 0 {
            let batch = try read { c -> [HistoryTransaction] in
                let (floor, floorTime, lost) = try historyMeta(c)
                if first {
                    switch request.start {
                    case .beginning:
                        cursor = floor
                    case .after(let token):
                        try check(token)
                        let newest = try currentTokenValue(c)
                        // A token lost in a restore, or ahead of the store, names no transaction
                        // of this timeline: its holder must reload (invariants 2 and 3).
                        if let problem = timelineProblem(token.value, newest: newest, lost: lost) {
                            throw StoreError(.historyExpired, "history expired: " + problem)
                        }
                        guard token.value >= floor else {
                            throw StoreError(.historyExpired, "history expired: token \(token) is older than the retained history (deleted through \(floor)); reload in full")
                        }
                        cursor = token.value
                    case .afterDate(let d):
                        if let afterDate, afterDate < floorTime {
                            throw StoreError(.historyExpired, "history expired: transactions after \(ISO8601.string(d)) have been deleted; reload in full")
                        }
                        cursor = floor
                    }
                } else if cursor < floor {
                    throw StoreError(.historyExpired, "history expired while reading: deleted through \(floor) after \(cursor) was delivered; reload in full")
                }
                let n = min(request.batchSize, remaining)
                var out: [HistoryTransaction] = []
                var scanned = 0
                try c.cached(sql).forEachRow([.integer(cursor)] + filters + [.integer(Int64(n))]) { row in
                    scanned += 1
                    let token = row.int64(0)
                    cursor = token
                    let changes = try HistoryCodec.decode(row.blob(6), model: model, storeID: storeID, entityFilter: entityFilter)
                    if entityFilter != nil && changes.isEmpty { return }
                    out.append(HistoryTransaction(
                        token: HistoryToken(storeID: storeID, value: token),
                        author: row.isNull(2) ? nil : row.text(2),
                        contextName: row.isNull(3) ? nil : row.text(3),
                        processID: row.int64(4), executable: row.text(5),
                        timestamp: Date(timeIntervalSince1970: row.double(1)), changes: changes))
                }
                if scanned < n { remaining = 0 }
                return out
            }
            first = false
            if !batch.isEmpty {
                remaining = remaining == 0 ? 0 : remaining - batch.count
                try body(batch)
            }
        }
    }

    /// Deletes history through `token` in chunks of `chunkSize` transactions, each its own short
    /// write transaction so that concurrent writers are held up by one chunk at most. Records
    /// through which token history is gone, so that older tokens get `.historyExpired`.
    ///
    /// Tokens are never reused (invariant 2): a token is the row id of the history table, which
    /// SQLite gives as one more than the largest, so the newest row is never removed here. When
    /// it falls within the range it stays as a marker, deleted in all but storage: every read
    /// skips rows at or below the recorded floor. (A plain row id instead of AUTOINCREMENT
    /// spares every save an update of `sqlite_sequence`: about 6% of a save, measured.)
    ///
    /// - Returns: how many transactions were deleted.
    @discardableResult
    public func deleteHistory(through token: HistoryToken, chunkSize: Int = 1000) throws -> Int {
        try check(token)
        guard chunkSize > 0 else { throw StoreError(.invalidArgument, "chunk size must be positive") }
        var total = 0
        var chunksDone = 0
        while true {
            let (scanned, deleted) = try write { c -> (Int, Int) in
                let newest = try currentTokenValue(c)
                guard token.value <= newest else {
                    throw StoreError(.foreignToken, "token \(token) is ahead of this store's newest transaction \(newest)")
                }
                let (floor, floorTime) = try deletedThrough(c)
                let chunk = try c.cached("""
                    SELECT max(token), max(timestamp), count(*), coalesce(sum(token > ?), 0) FROM (
                      SELECT token, timestamp FROM ss_history
                      WHERE token <= ? AND token < (SELECT max(token) FROM ss_history) ORDER BY token LIMIT ?)
                    """).firstRow([.integer(floor), .integer(token.value), .integer(Int64(chunkSize))]) {
                        ($0.int64(0), $0.double(1), Int($0.int64(2)), Int($0.int64(3)))
                    }
                let (maxToken, maxTime, count, live) = chunk ?? (0, 0, 0, 0)
                var marker = 0
                if count > 0 {
                    try c.cached("DELETE FROM ss_history WHERE token <= ? AND token < (SELECT max(token) FROM ss_history)").execute([.integer(maxToken)])
                }
                var through = max(floor, maxToken), time = max(floorTime, maxTime)
                if count < chunkSize {
                    // The last chunk: the whole range is gone, the newest row included when it is in it.
                    if let newestRow = try c.cached("SELECT token, timestamp FROM ss_history WHERE token <= ? AND token > ? ORDER BY token DESC LIMIT 1")
                        .firstRow([.integer(token.value), .integer(max(floor, maxToken))], { ($0.int64(0), $0.double(1)) }) {
                        marker = 1
                        time = max(time, newestRow.1)
                    }
                    through = max(floor, token.value)
                }
                let update = try c.cached("UPDATE ss_meta SET value = ? WHERE key = ?")
                try update.execute([.text(String(through)), .text("history_deleted_through")])
                try update.execute([.text(String(time)), .text("history_deleted_time")])
                return (count, live + marker)
            }
            total += deleted
            // Every 10 chunks, checkpoint without blocking anyone, so that a writer's commit does
            // not have to (SQLite checkpoints on the commit that crosses 1000 pages). Measured on
            // a 1M clean: after every chunk, a thousand fsyncs slowed deletion by a fifth; never,
            // writers took the checkpoints and stalled up to 30 ms; every 10, under 20 ms.
            chunksDone += 1
            if chunksDone % 10 == 0 { try checkpoint() }
            if scanned < chunkSize { return total }
        }
    }

    /// How many transactions are retained (through `token`, or all), the floor excluded.
    public func historyCount(through token: Int64? = nil) throws -> Int {
        try read { c in
            try c.cached("""
                SELECT count(*) FROM ss_history WHERE token <= ?
                AND token > (SELECT CAST(value AS INTEGER) FROM ss_meta WHERE key = 'history_deleted_through')
                """).firstRow([.integer(token ?? Int64.max)]) { Int($0.int64(0)) } ?? 0
        }
    }

    /// A passive WAL checkpoint: copies what it can back into the database, never waiting.
    func checkpoint() throws {
        let path = storePath
        try writer.withLock { c in try StoreError.wrap(path: path) { _ = try c.cached("PRAGMA wal_checkpoint(PASSIVE)").firstRow { $0.int64(0) } } }
    }
}
