import CLMDB
import Foundation

/// One LMDB environment: the only owner of its `MDB_env*`, closed in `deinit` and on every
/// failed open.
///
/// LMDB must not be opened twice in one process (closing one handle would drop the other's
/// locks), so environments are shared per path through ``shared(path:flags:)``. All use is
/// serialized by an internal lock; transactions are closure-scoped and every value is copied into
/// Swift memory before its transaction ends.
final class LMDBEnvironment: @unchecked Sendable {
    private let env: OpaquePointer
    let path: String
    private let lock = NSLock()
    private var databases: [String: MDB_dbi] = [:]
    private var openedInTransaction: [String] = []
    /// Reader slots of dead processes cleared when this environment was opened.
    let clearedStaleReaders: Int

    let flags: LMDBEnvironmentFlags
    /// Serializes write transactions across processes with a deadline (LMDB's own writer mutex
    /// has none: a stopped process inside a write transaction would hang every other writer).
    private let writerLock: FileRangeLock
    /// How long a writer waits for another process's write transaction.
    let busyTimeout: Double

    private static let registry = Locked<[String: WeakEnvironment]>([:])
    private final class WeakEnvironment { weak var environment: LMDBEnvironment? }

    /// The process's environment for `path`, opened on first use. The file is checked page by
    /// page before LMDB maps it (``LMDBFileCheck``).
    ///
    /// - Throws: ``LMDBFileCheck/Damage`` for a damaged file, ``LMDBError`` when LMDB fails, a
    ///   `StoreError` when the environment is already open here with other flags.
    static func shared(path: String, flags: LMDBEnvironmentFlags, busyTimeout: Double, mapSize: Int = 1 << 20) throws -> LMDBEnvironment {
        try registry.withLock { envs in
            if let env = envs[path]?.environment {
                guard env.flags == flags else {
                    throw StoreError(.invalidArgument, "token registry \(path) is already open in this process with other durability flags")
                }
                return env
            }
            try LMDBFileCheck.check(path: path)
            let env = try LMDBEnvironment(path: path, flags: flags, busyTimeout: busyTimeout, mapSize: mapSize)
            let box = WeakEnvironment()
            box.environment = env
            envs[path] = box
            return env
        }
    }

    private init(path: String, flags: LMDBEnvironmentFlags, busyTimeout: Double, mapSize: Int) throws {
        writerLock = try FileRangeLock(path: path)
        self.flags = flags
        self.busyTimeout = busyTimeout
        var handle: OpaquePointer?
        try LMDBError.check(mdb_env_create(&handle), "mdb_env_create", path: path)
        guard let handle else { throw LMDBError(code: ENOMEM, call: "mdb_env_create", path: path) }
        do {
            try LMDBError.check(mdb_env_set_maxdbs(handle, 8), "mdb_env_set_maxdbs", path: path)
            try LMDBError.check(mdb_env_set_mapsize(handle, mapSize), "mdb_env_set_mapsize", path: path)
            try LMDBError.check(mdb_env_open(handle, path, flags.union(.noThreadLocalStorage).rawValue, 0o600), "mdb_env_open", path: path)
            var dead: Int32 = 0
            try LMDBError.check(mdb_reader_check(handle, &dead), "mdb_reader_check", path: path)
            clearedStaleReaders = Int(dead)
        } catch {
            // Never leak the environment when opening fails after mdb_env_create.
            mdb_env_close(handle)
            throw error
        }
        self.env = handle
        self.path = path
    }

    deinit { mdb_env_close(env) }

    /// Clears reader slots left by dead processes; returns how many.
    func clearStaleReaders() throws -> Int {
        var dead: Int32 = 0
        try LMDBError.check(mdb_reader_check(env, &dead), "mdb_reader_check", path: path)
        return Int(dead)
    }

    /// How many reader slots are in use (by live or dead processes).
    func readerSlotsInUse() -> Int {
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        return Int(info.me_numreaders)
    }

    var mapSize: Int {
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        return info.me_mapsize
    }

    /// Checks the file again, page by page (the damage may have come after this process opened it).
    func checkFile() throws {
        try lock.withLock { try LMDBFileCheck.check(path: path) }
    }

    // MARK: - Transactions

    /// Runs `body` in a read transaction.
    func read<T>(_ body: (LMDBTransaction) throws -> T) throws -> T {
        try transaction(readOnly: true, body)
    }

    /// Runs `body` in a write transaction: committed when `body` returns, aborted when it throws.
    /// LMDB serializes writers across processes. When the map is full it grows and `body` runs
    /// again.
    ///
    /// Before LMDB's writer mutex, the writer takes a lock on a byte of the data file, waiting up
    /// to ``busyTimeout``: a process stopped inside a write transaction makes the others fail with
    /// `.busy` naming it, never wait forever.
    func write<T>(_ body: (LMDBTransaction) throws -> T) throws -> T {
        while true {
            do {
                return try transaction(readOnly: false, body)
            } catch let e as LMDBError where e.isMapFull {
                try lock.withLock {
                    try LMDBError.check(mdb_env_set_mapsize(env, mapSize * 2), "mdb_env_set_mapsize", path: path)
                }
            }
        }
    }

    private func transaction<T>(readOnly: Bool, _ body: (LMDBTransaction) throws -> T) throws -> T {
        try lock.withLock {
            if !readOnly { try writerLock.acquire(timeout: busyTimeout, what: "token registry \(path)") }
            defer { if !readOnly { writerLock.release() } }
            var txn: OpaquePointer?
            var rc = mdb_txn_begin(env, nil, readOnly ? UInt32(MDB_RDONLY) : 0, &txn)
            if rc == MDB_MAP_RESIZED {
                // Another process grew the map: adopt its size and begin again.
                try LMDBError.check(mdb_env_set_mapsize(env, 0), "mdb_env_set_mapsize", path: path)
                rc = mdb_txn_begin(env, nil, readOnly ? UInt32(MDB_RDONLY) : 0, &txn)
            }
            try LMDBError.check(rc, "mdb_txn_begin", path: path)
            guard let txn else { throw LMDBError(code: EINVAL, call: "mdb_txn_begin", path: path) }
            let t = LMDBTransaction(txn: txn, environment: self, readOnly: readOnly)
            openedInTransaction = []
            let result: T
            do {
                result = try body(t)
            } catch {
                mdb_txn_abort(txn)
                // An aborted transaction closes the handles it opened.
                for name in openedInTransaction { databases.removeValue(forKey: name) }
                throw error
            }
            // Committing (also a read) keeps the database handles opened in it. A failed commit
            // has already freed the transaction: it must not be aborted as well.
            let committed = mdb_txn_commit(txn)
            if committed != MDB_SUCCESS {
                for name in openedInTransaction { databases.removeValue(forKey: name) }
                throw LMDBError(code: committed, call: "mdb_txn_commit", path: path)
            }
            return result
        }
    }

    /// The handle of a named database, opened once: created in a write transaction, nil in a
    /// read transaction when it does not exist yet. Called inside a transaction.
    fileprivate func database(_ name: String, txn: OpaquePointer, create: Bool) throws -> MDB_dbi? {
        if let dbi = databases[name] { return dbi }
        var dbi: MDB_dbi = 0
        let rc = mdb_dbi_open(txn, name, create ? LMDBDatabaseFlags.create.rawValue : 0, &dbi)
        if rc == MDB_NOTFOUND, !create { return nil }
        try LMDBError.check(rc, "mdb_dbi_open(\(name))", path: path)
        databases[name] = dbi
        openedInTransaction.append(name)
        return dbi
    }
}

/// A transaction handle, valid only inside the closure that receives it.
struct LMDBTransaction {
    fileprivate let txn: OpaquePointer
    fileprivate let environment: LMDBEnvironment
    fileprivate let readOnly: Bool

    /// Opens a named database (creating it in a write transaction); false when a read
    /// transaction finds none.
    @discardableResult
    func open(_ db: String) throws -> Bool { try dbi(db) != nil }

    private func dbi(_ db: String) throws -> MDB_dbi? { try environment.database(db, txn: txn, create: !readOnly) }

    /// The handle of `db` for a write (a write transaction always has one).
    private func writable(_ db: String) throws -> MDB_dbi {
        guard let dbi = try dbi(db) else { throw LMDBError(code: EACCES, call: "mdb_dbi_open(\(db))", path: environment.path) }
        return dbi
    }

    func get(_ key: String, in db: String) throws -> [UInt8]? {
        guard let dbi = try dbi(db) else { return nil }
        return try key.utf8CString.withUnsafeBufferPointer { k in
            var mk = MDB_val(mv_size: k.count - 1, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
            var mv = MDB_val()
            let rc = mdb_get(txn, dbi, &mk, &mv)
            if rc == MDB_NOTFOUND { return nil }
            try LMDBError.check(rc, "mdb_get", path: environment.path)
            // Copy out: the pointer is only valid until the transaction ends.
            return Array(UnsafeRawBufferPointer(start: mv.mv_data, count: mv.mv_size))
        }
    }

    func put(_ value: [UInt8], for key: String, in db: String) throws {
        let dbi = try writable(db)
        try key.utf8CString.withUnsafeBufferPointer { k in
            try value.withUnsafeBytes { v in
                var mk = MDB_val(mv_size: k.count - 1, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
                var mv = MDB_val(mv_size: v.count, mv_data: UnsafeMutableRawPointer(mutating: v.baseAddress))
                try LMDBError.check(mdb_put(txn, dbi, &mk, &mv, 0), "mdb_put", path: environment.path)
            }
        }
    }

    /// Removes `key`; false when it was not there.
    @discardableResult
    func delete(_ key: String, in db: String) throws -> Bool {
        let dbi = try writable(db)
        return try key.utf8CString.withUnsafeBufferPointer { k in
            var mk = MDB_val(mv_size: k.count - 1, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
            let rc = mdb_del(txn, dbi, &mk, nil)
            if rc == MDB_NOTFOUND { return false }
            try LMDBError.check(rc, "mdb_del", path: environment.path)
            return true
        }
    }

    /// Every key and value of `db`, in key order, copied out.
    func all(in db: String) throws -> [(String, [UInt8])] {
        guard let dbi = try dbi(db) else { return [] }
        var cursor: OpaquePointer?
        try LMDBError.check(mdb_cursor_open(txn, dbi, &cursor), "mdb_cursor_open", path: environment.path)
        defer { mdb_cursor_close(cursor) }
        var out: [(String, [UInt8])] = []
        var k = MDB_val(), v = MDB_val()
        var rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST)
        while rc == MDB_SUCCESS {
            let key = String(decoding: UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size), as: UTF8.self)
            out.append((key, Array(UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size))))
            rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)
        }
        guard rc == MDB_NOTFOUND else { throw LMDBError(code: rc, call: "mdb_cursor_get", path: environment.path) }
        return out
    }
}
