import Foundation
import SharedStoreSQLite
import SharedStoreSupport

extension Container {
    /// The token of the newest transaction ever committed (also when history has since been
    /// deleted): fetching after it returns only what comes next.
    ///
    /// - Throws: ``StoreError`` when the store cannot be read: `.modelOutdated` after another
    ///   process migrated it, `.busy`, `.storage`.
    public func currentToken() throws -> HistoryToken {
        try read { s in HistoryToken(storeID: storeID, value: try s.currentToken()) }
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
    ///
    /// - Throws: `.historyExpired` when history after the start was deleted (before or during
    ///   the stream), `.foreignToken` for a token of another store, ``StoreError`` when the store
    ///   cannot be read, or what `body` throws (the stream stops there).
    public func history(_ request: HistoryRequest, _ body: ([HistoryTransaction]) throws -> Void) throws {
        var reader = try HistoryReader(container: self, request: request)
        while let batch = try read({ s in try reader.next(s) }) {
            if !batch.isEmpty { try body(batch) }
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
    /// - Throws: `.foreignToken` for a token of another store; ``StoreError`` from SQLite when a
    ///   chunk cannot be deleted (`.busy`, `.storage`): the chunks before it stay deleted.
    @discardableResult
    public func deleteHistory(through token: HistoryToken, chunkSize: Int = 1000) throws -> Int {
        try check(token)
        guard chunkSize > 0 else { throw StoreError(.invalidArgument, "chunk size must be positive") }
        var total = 0
        var chunksDone = 0
        var heldSince = Monotonic.seconds()
        while true {
            let (scanned, deleted) = try write { s in try deleteChunk(s, through: token, size: chunkSize) }
            total += deleted
            // Every 10 chunks, checkpoint without blocking anyone, so that a writer's commit
            // more often finds nothing to copy. Measured on a 1M clean when writers used SQLite's
            // auto-checkpoint: after every chunk, a thousand fsyncs slowed deletion by a fifth;
            // never, writers took the checkpoints and stalled up to 30 ms; every 10, under 20 ms.
            // (Writers now checkpoint by CheckpointPolicy: after 1000 frames written since their
            // own last checkpoint.)
            chunksDone += 1
            if chunksDone % 10 == 0 { try checkpoint() }
            if scanned < chunkSize { return total }
            // Chunks follow each other within microseconds, and a writer waiting for the lock
            // polls it every 2 ms at most (BusyWait): without a pause it could wait through many.
            if Monotonic.seconds() - heldSince >= Self.cleanerHold {
                usleep(Self.cleanerPause)
                heldSince = Monotonic.seconds()
            }
        }
    }

    /// How long the cleaner runs chunks one after another before it pauses for
    /// ``cleanerPause`` µs, longer than a waiting writer's longest sleep between two tries for the
    /// write lock: a writer waits for at most this much of chunks, and the chunk or checkpoint
    /// it arrived in.
    static let cleanerHold = 0.006
    static let cleanerPause = UInt32(BusyWait.most + 300)

    /// One chunk of ``deleteHistory(through:chunkSize:)``: returns the rows scanned and the
    /// transactions deleted (the marker row of the last chunk counts as deleted).
    private func deleteChunk(_ s: TransactionSQL, through token: HistoryToken, size: Int) throws -> (Int, Int) {
        let newest = try s.currentToken()
        guard token.value <= newest else {
            throw StoreError(.invalidArgument, "token \(token) is ahead of this store's newest transaction \(newest)")
        }
        let meta = try s.historyMeta()
        let chunk = try s.historyChunk(through: token.value, floor: meta.floor, size: size)
        if chunk.count > 0 { try s.deleteHistoryRows(through: chunk.maxToken) }
        var through = max(meta.floor, chunk.maxToken)
        var time = max(meta.floorTime, chunk.maxTime)
        var marker = 0
        if chunk.count < size {
            // The last chunk: the whole range is gone, the newest row included when it is in it.
            if let newestRow = try s.newestHistoryRow(above: max(meta.floor, chunk.maxToken), through: token.value) {
                marker = 1
                time = max(time, newestRow.time)
            }
            through = max(meta.floor, token.value)
        }
        try s.setMeta(.historyDeletedThrough, String(through))
        try s.setMeta(.historyDeletedTime, String(time))
        if chunk.count < size {
            // The run is over: it is logged, for the rate history is cleaned at.
            let run = CleanerRun(time: Date().timeIntervalSince1970, through: through, newest: newest)
            let runs = CleanerRun.appending(run, to: CleanerRun.parse(try s.meta(.cleanerRuns)))
            try s.setMeta(.cleanerRuns, runs.map(\.text).joined(separator: ";"))
        }
        return (chunk.count, chunk.live + marker)
    }

    /// The cleaner's last runs, oldest first (at most ``CleanerRun/kept``): how far each deleted
    /// history, and the newest token then. A value another program wrote that does not parse is
    /// left out.
    ///
    /// - Throws: ``StoreError`` when the store cannot be read.
    public func cleanerRuns() throws -> [CleanerRun] {
        try read { s in CleanerRun.parse(try s.meta(.cleanerRuns)) }
    }

    /// How many transactions are retained (through `token`, or all), the floor excluded.
    ///
    /// - Throws: ``StoreError`` when the store cannot be read: `.modelOutdated` after another
    ///   process migrated it, `.busy`, `.storage`.
    public func historyCount(through token: Int64? = nil) throws -> Int {
        try read { s in try s.historyCount(through: token ?? Int64.max) }
    }

    /// A passive WAL checkpoint: copies what it can back into the database, never waiting.
    func checkpoint() throws {
        try writeOutsideTransaction { s in try s.checkpoint() }
    }

    /// Transactions and changes retained in history.
    ///
    /// - Throws: ``StoreError`` when the store cannot be read: `.modelOutdated` after another
    ///   process migrated it, `.busy`, `.storage`.
    public func historyStatistics() throws -> HistoryStatistics {
        try read { s in
            var statistics = HistoryStatistics(transactions: 0, changes: 0)
            // The change count is the varint right after the format byte: read only that prefix,
            // with the plain varint (`count()` bounds a count by the bytes that follow).
            try s.historyPrefixes(after: try s.historyMeta().floor, length: 10) { prefix in
                statistics.transactions += 1
                var r = HistoryCodec.Reader(bytes: prefix)
                if (try? r.byte()) == HistoryCodec.version, let n = try? r.varint(), n <= UInt64(Int.max) {
                    statistics.changes += Int(n)
                }
            }
            return statistics
        }
    }
}

/// How much history a store retains (``Container/historyStatistics()``).
public struct HistoryStatistics: Sendable, Hashable {
    /// How many transactions history retains.
    public var transactions: Int
    /// How many object changes those transactions hold.
    public var changes: Int
}

/// The state of one ``Container/history(_:_:)`` stream: where it is, how many it may still
/// deliver, and the checks of its first batch.
struct HistoryReader {
    let container: Container
    let request: HistoryRequest
    let filter: HistoryFilter
    let query: HistoryQuery
    let entityFilter: Set<Int>?
    var cursor: Int64 = 0
    var remaining: Int
    var started = false

    init(container: Container, request: HistoryRequest) throws {
        guard request.batchSize > 0, (request.limit ?? 0) >= 0 else {
            throw StoreError(.invalidArgument, "history batch size must be positive and limit not negative")
        }
        self.container = container
        self.request = request
        remaining = request.limit ?? Int.max
        var filter = HistoryFilter(authors: request.authors, excludedAuthors: request.excludedAuthors)
        if let names = request.entities {
            var set = Set<Int>()
            var mask: Int64 = 0
            for n in names {
                guard let i = container.model.entityIndex[n] else {
                    throw StoreError(.unknownEntity, "unknown entity '\(n)' in history request")
                }
                set.insert(i)
                mask |= HistoryCodec.bit(container.numbering.entityNumber[i])
            }
            entityFilter = set
            filter.entityMask = mask
        } else {
            entityFilter = nil
        }
        if case .afterDate(let d) = request.start { filter.after = d.timeIntervalSince1970 }
        self.filter = filter
        query = TransactionSQL.historyQuery(filter)
    }

    /// The next batch (empty when every row of it was filtered out), or nil at the end.
    mutating func next(_ s: TransactionSQL) throws -> [HistoryTransaction]? {
        guard remaining > 0 else { return nil }
        let meta = try s.historyMeta()
        if !started {
            cursor = try start(s, meta)
            started = true
        } else if cursor < meta.floor {
            throw StoreError(
                .historyExpired,
                "history expired while reading: deleted through \(meta.floor) after \(cursor) was delivered; "
                    + "reload in full"
            )
        }
        let n = min(request.batchSize, remaining)
        let batch = try s.historyTransactions(query, after: cursor, limit: n, entities: entityFilter)
        cursor = batch.last
        remaining = batch.scanned < n ? 0 : remaining - batch.transactions.count
        return batch.transactions
    }

    /// Where the stream starts, checked against the retained history and the store's timeline.
    private func start(_ s: TransactionSQL, _ meta: HistoryMeta) throws -> Int64 {
        switch request.start {
        case .beginning:
            return meta.floor
        case .after(let token):
            try container.check(token)
            let lost = try meta.lost.map(Container.parseLostRanges) ?? []
            // A token lost in a restore, or ahead of the store, names no transaction of this
            // timeline: its holder must reload (invariants 2 and 3).
            if let problem = container.timelineProblem(token.value, newest: try s.currentToken(), lost: lost) {
                throw StoreError(.historyExpired, "history expired: " + problem)
            }
            guard token.value >= meta.floor else {
                throw StoreError(
                    .historyExpired,
                    "history expired: token \(token) is older than the retained history (deleted through "
                        + "\(meta.floor)); reload in full"
                )
            }
            return token.value
        case .afterDate(let d):
            if let after = filter.after, after < meta.floorTime {
                throw StoreError(
                    .historyExpired,
                    "history expired: transactions after \(ISO8601.string(d)) have been deleted; reload in full")
            }
            return meta.floor
        }
    }
}
