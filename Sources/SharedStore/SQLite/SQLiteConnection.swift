import CSQLite
import Foundation

/// One SQLite connection: the only owner of its `sqlite3*` handle, which it closes in `deinit`
/// and on every failed open.
///
/// Not thread-safe: ``Container`` guards each connection with a lock.
final class SQLiteConnection {
    let handle: OpaquePointer
    let path: String
    private var cache: [String: SQLiteStatement] = [:]
    private var busy: BusyWait

    /// Opens (or creates) the database at `path`.
    ///
    /// - Throws: ``SQLiteError`` when SQLite cannot open the file.
    init(path: String, readOnly: Bool = false, create: Bool = true, busyTimeoutMilliseconds: Int32) throws {
        var db: OpaquePointer?
        // NOFOLLOW: a symbolic link planted in place of the store must not be followed.
        var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI | SQLITE_OPEN_NOFOLLOW
        flags |= readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE
        if create && !readOnly { flags |= SQLITE_OPEN_CREATE }
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            // sqlite3_open_v2 hands back a handle even on failure: it must be closed.
            sqlite3_close_v2(db)
            throw SQLiteError(code: rc, message: message)
        }
        self.handle = db
        self.path = path
        sqlite3_extended_result_codes(db, 1)
        busy = BusyWait(timeout: Double(busyTimeoutMilliseconds) / 1000)
        installBusyHandler()
        try registerFunctions()
    }

    /// Waits for a lock held by another connection in short, growing steps (100 µs doubling to
    /// 2 ms) up to the busy timeout. SQLite's own handler sleeps 1, 2, 5, 10… ms, so a writer
    /// that arrives just after another took the lock could wait far longer than the lock is held.
    private func installBusyHandler() {
        sqlite3_busy_handler(handle, { context, count in
            guard let context else { return 0 }
            let wait = Unmanaged<BusyWait>.fromOpaque(context).takeUnretainedValue()
            return wait.shouldRetry(attempt: Int(count)) ? 1 : 0
        }, Unmanaged.passUnretained(busy).toOpaque())
    }

    deinit {
        sqlite3_busy_handler(handle, nil, nil)
        cache.removeAll()
        slots.removeAll()
        sqlite3_close_v2(handle)
    }

    func error(_ rc: Int32, sql: String? = nil) -> SQLiteError {
        let extended = sqlite3_extended_errcode(handle)
        let message = String(cString: sqlite3_errmsg(handle))
        // The handle's last error is the one that matters when it is a refinement of `rc`.
        let code = (extended & 0xff) == (rc & 0xff) ? extended : rc
        var error = SQLiteError(code: code, message: message, sql: sql)
        error.systemErrno = sqlite3_system_errno(handle)
        return error
    }

    // MARK: - Statements

    /// A cached prepared statement for `sql`, prepared once per connection.
    func cached(_ sql: String) throws -> SQLiteStatement {
        if let stmt = cache[sql] { return stmt }
        let stmt = try SQLiteStatement(connection: self, sql: sql)
        cache[sql] = stmt
        return stmt
    }

    private var slots: [SQLiteStatement?] = []

    /// A prepared statement kept in a numbered slot: the hot paths (a save, a history fetch)
    /// reach their statements without hashing SQL text. `sql` must be the same for a slot.
    func statement(_ slot: Int, _ sql: @autoclosure () -> String) throws -> SQLiteStatement {
        if slot < slots.count, let stmt = slots[slot] { return stmt }
        let stmt = try SQLiteStatement(connection: self, sql: sql())
        if slot >= slots.count { slots += Array(repeating: nil, count: slot - slots.count + 1) }
        slots[slot] = stmt
        return stmt
    }

    /// Runs one or more statements with no parameters (schema, pragmas).
    func execute(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &message)
        guard rc == SQLITE_OK else {
            let err = error(rc, sql: sql)
            sqlite3_free(message)
            throw err
        }
    }

    /// Runs a cached statement with parameters.
    func execute(_ sql: String, _ values: [SQLValue]) throws {
        try cached(sql).execute(values)
    }

    var changes: Int { Int(sqlite3_changes(handle)) }
    var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }
    var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    // MARK: - Transactions

    /// Runs `body` in a write transaction started with `BEGIN IMMEDIATE`, so that a writer waits
    /// for the write lock (up to the busy timeout) instead of failing later with SQLITE_BUSY.
    /// Commits when `body` returns, rolls back when it throws and rethrows the first error.
    func writeTransaction<T>(_ body: () throws -> T) throws -> T {
        try statement(Slot.beginImmediate, "BEGIN IMMEDIATE").execute()
        do {
            let result = try body()
            try statement(Slot.commit, "COMMIT").execute()
            return result
        } catch {
            if isInTransaction { try? cached("ROLLBACK").execute() }
            throw error
        }
    }

    /// Runs `body` in a read transaction: one consistent snapshot of the store.
    func readTransaction<T>(_ body: () throws -> T) throws -> T {
        try statement(Slot.beginDeferred, "BEGIN DEFERRED").execute()
        defer { if isInTransaction { try? statement(Slot.commit, "COMMIT").execute() } }
        // A deferred transaction takes its snapshot at the first read: take it now.
        _ = try statement(Slot.snapshot, "SELECT 1 FROM sqlite_schema LIMIT 1").firstRow { $0.int64(0) }
        return try body()
    }

    // MARK: - Functions

    /// Registers `ss_strop(value, pattern, op)`, the string matcher behind CONTAINS, BEGINSWITH,
    /// ENDSWITH and LIKE with case- and diacritic-insensitive variants.
    private func registerFunctions() throws {
        let rc = sqlite3_create_function_v2(
            handle, "ss_strop", 3, SQLITE_UTF8 | SQLITE_DETERMINISTIC, nil,
            { context, argc, argv in
                guard let context, let argv, argc == 3 else { return }
                guard let value = argv[0], let pattern = argv[1], let op = argv[2],
                      sqlite3_value_type(value) != SQLITE_NULL, sqlite3_value_type(pattern) != SQLITE_NULL else {
                    sqlite3_result_int(context, 0)
                    return
                }
                let text = String(cString: sqlite3_value_text(value))
                let needle = String(cString: sqlite3_value_text(pattern))
                let code = Int(sqlite3_value_int(op))
                sqlite3_result_int(context, StringMatch.matches(text, needle, code: code) ? 1 : 0)
            }, nil, nil, nil)
        guard rc == SQLITE_OK else { throw error(rc) }
    }
}

/// Statement slots of ``SQLiteConnection/statement(_:_:)``: fixed ones first, then
/// `perEntity` slots for each entity (``EntitySQL``).
enum Slot {
    static let beginImmediate = 0, beginDeferred = 1, commit = 2, snapshot = 3, historyInsert = 4, currentToken = 5
    static let firstEntity = 8, perEntity = 4
    static func entity(_ index: Int, _ kind: Int) -> Int { firstEntity + index * perEntity + kind }
}

/// The state of one connection's busy handler (see `installBusyHandler`).
final class BusyWait {
    let timeout: Double
    private var start = 0.0

    init(timeout: Double) { self.timeout = timeout }
    /// First and longest sleep, in µs. Measured with storebench on 2 cores: shorter steps cost
    /// aggregate throughput of many writers (more lock hand-offs), longer ones let a writer stall
    /// behind the cleaner; 100 µs doubling to 2 ms kept 8 writers at 0.78 of one writer and the
    /// longest stall behind a 1M-transaction clean under 10 ms.
    static let first = 100, most = 2000

    func shouldRetry(attempt: Int) -> Bool {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let now = Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
        if attempt == 0 { start = now }
        guard now - start < timeout else { return false }
        usleep(UInt32(min(BusyWait.first << min(attempt, 6), BusyWait.most)))
        return true
    }
}
