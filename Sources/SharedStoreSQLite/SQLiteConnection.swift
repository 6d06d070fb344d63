import CSQLite
import Foundation
import SharedStoreSupport

/// One SQLite connection: the only owner of its `sqlite3*` handle, which it closes in `deinit`
/// and on every failed open.
///
/// Not thread-safe: ``Container`` guards each connection with a lock.
package final class SQLiteConnection {
    let handle: OpaquePointer
    package let path: String
    private var cache: [String: SQLiteStatement] = [:]
    let busy: BusyWait
    /// The state of the WAL hook ``checkpoint(by:)`` installs (it holds it unretained).
    var checkpointState: CheckpointState?

    /// Opens (or creates) the database at `path`.
    ///
    /// - Throws: ``SQLiteError`` when SQLite cannot open the file.
    package init(path: String, readOnly: Bool = false, create: Bool = true, busyTimeoutMilliseconds: Int32) throws {
        _ = Self.libraryConfigured
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
        _ = sharedstore_sqlite_strict_quotes(db)
        busy = BusyWait(timeout: Double(busyTimeoutMilliseconds) / 1000)
        installBusyHandler()
        if SQLDebug.isOn { SQLDebug.install(on: db) }
    }

    /// SQLite configured for this process, once, before its first connection opens: no memory
    /// statistics (a global mutex taken around each of SQLite's allocations, about 35 per
    /// inserted row, that no connection here needs). A process that used SQLite before keeps its
    /// configuration. Every program of the package opens its first connection here or calls it
    /// first (storebench's C baselines: both sides run with the same configuration).
    package static let libraryConfigured: Bool = sharedstore_sqlite_no_memory_statistics() == SQLITE_OK

    /// Waits for a lock held by another connection in short, growing steps (100 µs doubling to
    /// 2 ms) up to the busy timeout. SQLite's own handler sleeps 1, 2, 5, 10… ms, so a writer
    /// that arrives just after another took the lock could wait far longer than the lock is held.
    private func installBusyHandler() {
        sqlite3_busy_handler(
            handle,
            { context, count in
                guard let context else { return 0 }
                let wait = Unmanaged<BusyWait>.fromOpaque(context).takeUnretainedValue()
                return wait.shouldRetry(attempt: Int(count)) ? 1 : 0
            }, Unmanaged.passUnretained(busy).toOpaque())
    }

    deinit {
        sqlite3_busy_handler(handle, nil, nil)
        if checkpointState != nil { sqlite3_wal_hook(handle, nil, nil) }
        if SQLDebug.isOn { SQLDebug.forget(handle) }
        cache.removeAll()
        slots.removeAll()
        keyed.removeAll()
        sqlite3_close_v2(handle)
    }

    @usableFromInline
    package func error(_ rc: Int32, sql: String? = nil) -> SQLiteError {
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
    package func cached(_ sql: String) throws -> SQLiteStatement {
        // The statement asked for last (a query run again and again) is compared, not hashed: the
        // same string compares in one step.
        if let last = lastCached, last.sql == sql { return last.statement }
        if let stmt = cache[sql] {
            lastCached = (sql, stmt)
            return stmt
        }
        let stmt = try SQLiteStatement(connection: self, sql: sql)
        cache[sql] = stmt
        lastCached = (sql, stmt)
        return stmt
    }

    private var lastCached: (sql: String, statement: SQLiteStatement)?

    /// A connection has one user at a time (the container's lock) and calls out to no one while
    /// it reaches a slot: Swift's run-time exclusivity check is skipped, here and on the state a
    /// write transaction reads (``knownTables``, ``checkedDataVersion``).
    @exclusivity(unchecked) private var slots: [SQLiteStatement?] = []

    /// A prepared statement kept in a numbered slot: the hot paths (a save, a history fetch)
    /// reach their statements without hashing SQL text. The caller owns the numbering (a typed
    /// key that maps to a slot) and gives the same `sql` for a slot every time.
    package func statement(slot: Int, _ sql: @autoclosure () -> String) throws -> SQLiteStatement {
        precondition(slot >= 0, "statement slots are not negative")
        if slot < slots.count, let stmt = slots[slot] { return stmt }
        let stmt = try SQLiteStatement(connection: self, sql: sql())
        if slot >= slots.count { slots += Array(repeating: nil, count: slot - slots.count + 1) }
        slots[slot] = stmt
        return stmt
    }

    private var keyed: [StatementKey: SQLiteStatement] = [:]

    /// A prepared statement kept under `key`: statements of many shapes (an update of some of an
    /// entity's columns) reached by a few integers, without building or hashing their SQL. The
    /// caller gives the same `sql` for a key every time.
    package func statement(key: StatementKey, _ sql: () -> String) throws -> SQLiteStatement {
        if let stmt = keyed[key] { return stmt }
        let stmt = try SQLiteStatement(connection: self, sql: sql())
        keyed[key] = stmt
        return stmt
    }

    // The statements of transaction control, prepared once.
    private lazy var begin = Result { try SQLiteStatement(connection: self, sql: "BEGIN IMMEDIATE") }
    private lazy var beginRead = Result { try SQLiteStatement(connection: self, sql: "BEGIN DEFERRED") }
    private lazy var commit = Result { try SQLiteStatement(connection: self, sql: "COMMIT") }
    private lazy var snapshot = Result {
        try SQLiteStatement(connection: self, sql: "SELECT 1 FROM sqlite_schema LIMIT 1")
    }

    /// Runs one or more statements with no parameters (schema, pragmas).
    package func execute(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &message)
        guard rc == SQLITE_OK else {
            let err = error(rc, sql: sql)
            sqlite3_free(message)
            throw err
        }
    }

    /// Runs a cached statement with parameters.
    package func execute(_ sql: String, _ values: [SQLValue]) throws {
        try cached(sql).execute(values)
    }

    /// Whether the main database has a table `name`, from the schema this connection holds: no
    /// statement runs (a query of `sqlite_schema` scans it). That schema is the file's as of the
    /// latest statement this connection ran; inside a write transaction, after any statement of
    /// it, no other connection can have changed it since.
    package func hasTable(_ name: String) -> Bool {
        sqlite3_table_column_metadata(handle, "main", name, nil, nil, nil, nil, nil, nil) == SQLITE_OK
    }

    /// ``hasTable(_:)``, remembered in ``knownTables`` until the owner clears them.
    package func hasTableRemembered(_ name: String) -> Bool {
        // The name asked last (a save asks the same one each time) is compared, not hashed.
        if let last = lastKnownTable, last.name == name { return last.found }
        let found = knownTables[name] ?? hasTable(name)
        knownTables[name] = found
        lastKnownTable = (name, found)
        return found
    }

    /// The last answer of ``hasTableRemembered(_:)``, forgotten with ``knownTables``.
    @exclusivity(unchecked) private var lastKnownTable: (name: String, found: Bool)?

    /// Whether tables exist, as ``hasTableRemembered(_:)`` found: true of the schema as long as
    /// no other connection committed and this one changed no table. The owner clears it when
    /// either may have happened (the store: at a write that finds another's commit, after its
    /// own schema changes, after a rollback).
    @exclusivity(unchecked) package var knownTables: [String: Bool] = [:] {
        didSet { lastKnownTable = nil }
    }

    package var changes: Int { Int(sqlite3_changes(handle)) }
    package var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }
    package var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    /// The main database's data version as of this connection's latest transaction: it moves
    /// with every commit to the file, this connection's or another process's. Read without a
    /// statement (SQLITE_FCNTL_DATA_VERSION).
    package var dataVersion: UInt32 {
        var v: UInt32 = 0
        _ = sqlite3_file_control(handle, "main", SQLITE_FCNTL_DATA_VERSION, &v)
        return v
    }

    /// The data version at which the owner last checked what it needs to know about the file
    /// (the store checks its model version): nil until it did.
    ///
    /// Computed over a stored value of this module: `@exclusivity(unchecked)` holds only for
    /// accesses compiled here, and every write transaction reads and sets this twice.
    package var checkedDataVersion: UInt32? {
        get { checkedDataVersionValue }
        set { checkedDataVersionValue = newValue }
    }
    @exclusivity(unchecked) private var checkedDataVersionValue: UInt32?

    // MARK: - Transactions

    /// Runs `body` in a write transaction started with `BEGIN IMMEDIATE`, so that a writer waits
    /// for the write lock (up to the busy timeout) instead of failing later with SQLITE_BUSY.
    /// Commits when `body` returns, rolls back when it throws and rethrows the first error.
    package func writeTransaction<T>(_ body: () throws -> T) throws -> T {
        try begin.get().execute()
        do {
            let result = try body()
            try commit.get().execute()
            return result
        } catch {
            if isInTransaction { try? cached("ROLLBACK").execute() }
            throw error
        }
    }

    /// Runs `body` in a read transaction: one consistent snapshot of the store.
    /// Opens a read transaction and takes its snapshot, left open until ``endRead()``: what
    /// this connection reads meanwhile is the store as it was now (a pinned read).
    package func beginPinnedRead() throws {
        try beginRead.get().execute()
        _ = try snapshot.get().firstRow { $0.int64(0) }
    }

    /// Ends a read transaction ``beginPinnedRead()`` opened.
    package func endRead() {
        if isInTransaction { try? commit.get().execute() }
    }

    package func readTransaction<T>(_ body: () throws -> T) throws -> T {
        try beginRead.get().execute()
        defer { if isInTransaction { try? commit.get().execute() } }
        // A deferred transaction takes its snapshot at the first read: take it now.
        _ = try snapshot.get().firstRow { $0.int64(0) }
        return try body()
    }

    // MARK: - Functions

    /// Defines an SQL function of `argumentCount` arguments answering an integer: `body` reads
    /// the arguments (NULL, text or integer) of one call. Deterministic, UTF-8.
    package func defineFunction(_ name: String, argumentCount: Int32, _ body: @escaping (SQLiteArguments) -> Int64)
        throws
    {
        let box = Unmanaged.passRetained(FunctionBox(body)).toOpaque()
        // On failure SQLite calls the destructor itself, which releases the box.
        let rc = sqlite3_create_function_v2(
            handle, name, argumentCount, SQLITE_UTF8 | SQLITE_DETERMINISTIC, box,
            { context, argc, argv in
                guard let context, let data = sqlite3_user_data(context) else { return }
                let box = Unmanaged<FunctionBox>.fromOpaque(data).takeUnretainedValue()
                sqlite3_result_int64(context, box.body(SQLiteArguments(values: argv, count: argc)))
            }, nil, nil,
            { data in if let data { Unmanaged<FunctionBox>.fromOpaque(data).release() } })
        guard rc == SQLITE_OK else { throw error(rc) }
    }
}

extension SQLiteConnection {
    /// Defines an SQL function of `argumentCount` arguments answering text (nil: NULL).
    /// Deterministic, UTF-8.
    package func defineTextFunction(
        _ name: String, argumentCount: Int32, _ body: @escaping (SQLiteArguments) -> String?
    ) throws {
        let box = Unmanaged.passRetained(TextFunctionBox(body)).toOpaque()
        let rc = sqlite3_create_function_v2(
            handle, name, argumentCount, SQLITE_UTF8 | SQLITE_DETERMINISTIC, box,
            { context, argc, argv in
                guard let context, let data = sqlite3_user_data(context) else { return }
                let box = Unmanaged<TextFunctionBox>.fromOpaque(data).takeUnretainedValue()
                guard let text = box.body(SQLiteArguments(values: argv, count: argc)) else {
                    sqlite3_result_null(context)
                    return
                }
                sqlite3_result_text(context, text, -1, sharedstore_sqlite_transient())
            }, nil, nil,
            { data in if let data { Unmanaged<TextFunctionBox>.fromOpaque(data).release() } })
        guard rc == SQLITE_OK else { throw error(rc) }
    }
}

extension SQLiteConnection {
    /// Defines an SQL function of `argumentCount` arguments answering a BLOB. Not deterministic:
    /// SQLite calls it for every row (a new id each time).
    package func defineBlobFunction(
        _ name: String, argumentCount: Int32, _ body: @escaping (SQLiteArguments) -> [UInt8]
    ) throws {
        let box = Unmanaged.passRetained(BlobFunctionBox(body)).toOpaque()
        let rc = sqlite3_create_function_v2(
            handle, name, argumentCount, SQLITE_UTF8, box,
            { context, argc, argv in
                guard let context, let data = sqlite3_user_data(context) else { return }
                let box = Unmanaged<BlobFunctionBox>.fromOpaque(data).takeUnretainedValue()
                let bytes = box.body(SQLiteArguments(values: argv, count: argc))
                bytes.withUnsafeBytes {
                    sqlite3_result_blob(context, $0.baseAddress, Int32($0.count), sharedstore_sqlite_transient())
                }
            }, nil, nil,
            { data in if let data { Unmanaged<BlobFunctionBox>.fromOpaque(data).release() } })
        guard rc == SQLITE_OK else { throw error(rc) }
    }
}

private final class BlobFunctionBox {
    let body: (SQLiteArguments) -> [UInt8]
    init(_ body: @escaping (SQLiteArguments) -> [UInt8]) { self.body = body }
}

private final class TextFunctionBox {
    let body: (SQLiteArguments) -> String?
    init(_ body: @escaping (SQLiteArguments) -> String?) { self.body = body }
}

private final class FunctionBox {
    let body: (SQLiteArguments) -> Int64
    init(_ body: @escaping (SQLiteArguments) -> Int64) { self.body = body }
}

/// The arguments of one call of a function defined with
/// ``SQLiteConnection/defineFunction(_:argumentCount:_:)``; valid only during the call.
package struct SQLiteArguments {
    let values: UnsafeMutablePointer<OpaquePointer?>?
    package let count: Int32

    private func value(_ i: Int32) -> OpaquePointer? {
        guard i >= 0, i < count else { return nil }
        return values?[Int(i)]
    }

    package func isNull(_ i: Int32) -> Bool { value(i).map { sqlite3_value_type($0) == SQLITE_NULL } ?? true }
    package func int64(_ i: Int32) -> Int64 { value(i).map { sqlite3_value_int64($0) } ?? 0 }
    package func text(_ i: Int32) -> String {
        guard let v = value(i), let p = sqlite3_value_text(v) else { return "" }
        return String(decoding: UnsafeBufferPointer(start: p, count: Int(sqlite3_value_bytes(v))), as: UTF8.self)
    }
}

/// The state of one connection's busy handler (see `installBusyHandler`).
package final class BusyWait {
    let timeout: Double
    /// A shorter limit for the waits of one call (a checkpoint in a commit), when set.
    var cap: Double?
    private var start = 0.0

    init(timeout: Double) { self.timeout = timeout }
    /// First and longest sleep, in µs. Measured with storebench on 2 cores: shorter steps cost
    /// aggregate throughput of many writers (more lock hand-offs), longer ones let a writer stall
    /// behind the cleaner; 100 µs doubling to 2 ms kept 8 writers at 0.78 of one writer and the
    /// longest stall behind a 1M-transaction clean under 10 ms.
    package static let first = 100, most = 2000

    /// The sleep before retry number `attempt` (0-based), in µs.
    package static func step(_ attempt: Int) -> UInt32 { UInt32(min(first << min(attempt, 6), most)) }

    func shouldRetry(attempt: Int) -> Bool {
        let now = Monotonic.seconds()
        if attempt == 0 { start = now }
        guard now - start < min(timeout, cap ?? timeout) else { return false }
        usleep(Self.step(attempt))
        return true
    }
}

/// The key of a statement of ``SQLiteConnection/statement(key:_:)``: a kind the caller numbers,
/// and the numbers that tell its shape (an entity, the columns it writes).
package struct StatementKey: Hashable {
    package var kind: Int
    package var numbers: [Int]

    package init(kind: Int, numbers: [Int]) {
        self.kind = kind
        self.numbers = numbers
    }
}
