import CLMDB
import Foundation
import SharedStoreSupport
import Synchronization

/// One LMDB environment: the only owner of its `MDB_env*`, closed in `deinit` and on every
/// failed open.
///
/// LMDB must not be opened twice in one process (closing one handle would drop the other's
/// locks), so environments are shared per path through ``shared(path:flags:busyTimeout:databases:mapSize:)``.
/// Its named databases are opened once, when it opens (`mdb_dbi_open` must not run in two
/// transactions of a process at once), so transactions share their handles without a lock.
/// Read transactions run side by side (MDB_NOTLS); write transactions are serialized in the
/// process by a mutex and across processes by a lock with a deadline; only growing the map,
/// which LMDB allows with no transaction active, waits for all of them. Transactions are
/// closure-scoped and every value is copied into Swift memory before its transaction ends.
///
/// ## Lock order
///
/// A thread takes these locks only in this order, outermost first, and never one above a lock
/// it holds; so no two threads (or processes) can each wait for the other:
/// 1. `registry` (the process's environments by path): while an environment is opened or shared
///    (``shared(path:flags:busyTimeout:databases:mapSize:)``), around `init` and `syncAtLeast`.
/// 2. `writer` (this process's writers): for a whole ``write(_:)``, and to change the sync flags.
/// 3. `writerLock` (a byte of the data file, between processes, with a deadline): inside
///    `writer`, for a whole ``write(_:)``.
/// 4. `opening` (`mdb_dbi_open`): to open named databases, in a read (``read(_:)``, holding
///    nothing else) or in a write (inside `writerLock`).
/// 5. `transactions` (shared by every transaction, exclusive to set the map size): inside all
///    of the above. A holder of the shared side never waits for the exclusive side: it gives up
///    its hold first (`releasingShared`), so that a map resize waits only for the others.
/// 6. LMDB's own mutexes (its writer mutex and reader table, in the lock file): inside
///    `mdb_txn_begin`, under the shared side of `transactions`.
/// 7. `databases` and `syncFlags`: leaves, held for a read or an assignment; no lock is taken
///    while one of them is held.
///
/// The body of a transaction starts no other transaction of the environment (and opens none):
/// it would take `transactions` or `writer` again.
package final class LMDBEnvironment: @unchecked Sendable {
    private let env: OpaquePointer
    package let path: String
    package let flags: LMDBEnvironmentFlags
    /// The named databases, opened at open; a missing one is created by the first write.
    private let databases: Protected<[String: MDB_dbi]>
    private let names: [String]
    /// Reader slots of dead processes cleared when this environment was opened.
    package let clearedStaleReaders: Int
    /// Serializes write transactions across processes with a deadline (LMDB's own writer mutex
    /// has none: a stopped process inside a write transaction would hang every other writer).
    private let writerLock: FileRangeLock
    /// Serializes this process's writers (the lock above belongs to the process, not a thread).
    /// A plain lock, not a Mutex: it guards a section whose result need not be Sendable.
    private let writer = NSLock()
    /// Shared by every transaction, exclusive to grow the map.
    private let transactions = ReadWriteLock()
    /// Held while named databases are opened outside a write (see ``refreshDatabases()``).
    private let opening = NSLock()
    /// How long a writer waits for another process's write transaction.
    package let busyTimeout: Double

    private static let registry = Protected<[String: WeakEnvironment]>([:])
    private final class WeakEnvironment: @unchecked Sendable { weak var environment: LMDBEnvironment? }

    /// The process's environment for `path`, opened on first use with the named `databases`.
    /// The file is checked page by page before LMDB maps it (``LMDBFileCheck``).
    ///
    /// - Throws: ``LMDBFileCheck/Damage`` for a damaged file, ``LMDBError`` when LMDB fails or
    ///   the environment is already open here with other flags, ``LockBusy`` when creating a
    ///   missing database waits for a frozen writer.
    package static func shared(
        path: String, flags: LMDBEnvironmentFlags, busyTimeout: Double, databases: [String],
        mapSize: Int = 1 << 20
    ) throws -> LMDBEnvironment {
        try registry.withLock { envs in
            if let env = envs[path]?.environment {
                // Opened durable by one part of a process and not by another: the environment
                // keeps the stronger of the two sync settings for both.
                let sync: LMDBEnvironmentFlags = [.noSync, .noMetaSync]
                guard env.flags.subtracting(sync) == flags.subtracting(sync) else {
                    throw LMDBError(
                        code: EINVAL, call: "mdb_env_open (open in this process with other flags)", path: path)
                }
                try env.syncAtLeast(flags.intersection(sync))
                return env
            }
            try LMDBFileCheck.check(path: path)
            let env = try LMDBEnvironment(
                path: path, flags: flags, busyTimeout: busyTimeout, names: databases, mapSize: mapSize)
            let box = WeakEnvironment()
            box.environment = env
            envs[path] = box
            return env
        }
    }

    private init(path: String, flags: LMDBEnvironmentFlags, busyTimeout: Double, names: [String], mapSize: Int) throws {
        writerLock = try FileRangeLock(path: path, readOnly: flags.contains(.readOnly))
        self.flags = flags
        syncFlags = Protected(flags.intersection([.noSync, .noMetaSync]))
        self.busyTimeout = busyTimeout
        self.names = names
        var handle: OpaquePointer?
        try LMDBError.check(mdb_env_create(&handle), "mdb_env_create", path: path)
        guard let handle else { throw LMDBError(code: ENOMEM, call: "mdb_env_create", path: path) }
        do {
            try LMDBError.check(mdb_env_set_maxdbs(handle, 8), "mdb_env_set_maxdbs", path: path)
            try LMDBError.check(mdb_env_set_mapsize(handle, mapSize), "mdb_env_set_mapsize", path: path)
            try LMDBError.check(
                mdb_env_open(handle, path, flags.union(.noThreadLocalStorage).rawValue, 0o600), "mdb_env_open",
                path: path)
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
        self.databases = Protected([:])
        try openDatabases(create: false)
    }

    deinit { mdb_env_close(env) }

    /// The sync flags in force (MDB_NOSYNC, MDB_NOMETASYNC), changed by ``syncAtLeast(_:)``.
    private let syncFlags: Protected<LMDBEnvironmentFlags>

    /// Makes commits sync at least as much as `wanted` says (no flag: data and meta page;
    /// MDB_NOMETASYNC: data; MDB_NOSYNC: nothing), under the writer lock (mdb_env_set_flags must
    /// not race a commit of this process).
    private func syncAtLeast(_ wanted: LMDBEnvironmentFlags) throws {
        func strength(_ f: LMDBEnvironmentFlags) -> Int { f.contains(.noSync) ? 0 : f.contains(.noMetaSync) ? 1 : 2 }
        let current = syncFlags.withLock { $0 }
        guard strength(wanted) > strength(current) else { return }
        writer.lock()
        defer { writer.unlock() }
        if !current.isEmpty {
            try LMDBError.check(mdb_env_set_flags(env, current.rawValue, 0), "mdb_env_set_flags", path: path)
        }
        if !wanted.isEmpty {
            try LMDBError.check(mdb_env_set_flags(env, wanted.rawValue, 1), "mdb_env_set_flags", path: path)
        }
        syncFlags.withLock { $0 = wanted }
    }

    /// Opens the named databases in one transaction of their own: a read transaction finds
    /// those that exist, a write transaction (`create`) makes the others.
    private func openDatabases(create: Bool) throws {
        try transactions.withShared {
            var txn: OpaquePointer?
            try LMDBError.check(
                mdb_txn_begin(env, nil, create ? 0 : UInt32(MDB_RDONLY), &txn), "mdb_txn_begin", path: path)
            guard let txn else { throw LMDBError(code: EINVAL, call: "mdb_txn_begin", path: path) }
            var opened: [String: MDB_dbi] = [:]
            for name in names {
                var dbi: MDB_dbi = 0
                let rc = mdb_dbi_open(txn, name, create ? LMDBDatabaseFlags.create.rawValue : 0, &dbi)
                if rc == MDB_NOTFOUND, !create { continue }
                guard rc == MDB_SUCCESS else {
                    mdb_txn_abort(txn)
                    throw LMDBError(code: rc, call: "mdb_dbi_open(\(name))", path: path)
                }
                opened[name] = dbi
            }
            // Committing (also a read) keeps the handles; a failed commit has freed the transaction.
            try LMDBError.check(mdb_txn_commit(txn), "mdb_txn_commit", path: path)
            databases.withLock { $0 = opened }
        }
    }

    /// Flushes every committed transaction to disk, meta page included (`mdb_env_sync` forced),
    /// whatever the environment's sync flags.
    package func sync() throws {
        try LMDBError.check(mdb_env_sync(env, 1), "mdb_env_sync", path: path)
    }

    /// Clears reader slots left by dead processes; returns how many.
    package func clearStaleReaders() throws -> Int {
        var dead: Int32 = 0
        try LMDBError.check(mdb_reader_check(env, &dead), "mdb_reader_check", path: path)
        return Int(dead)
    }

    /// How many reader slots are in use (by live or dead processes).
    package func readerSlotsInUse() -> Int {
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        return Int(info.me_numreaders)
    }

    package var mapSize: Int {
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        return info.me_mapsize
    }

    /// The handle of `name`, nil when it does not exist yet (no write has made it).
    fileprivate func database(_ name: String) -> MDB_dbi? {
        precondition(names.contains(name), "database '\(name)' was not named when the environment was opened")
        return databases.withLock { $0[name] }
    }

    // MARK: - Transactions

    /// Runs `body` in a read transaction. Readers never wait for a writer.
    package func read<T>(_ body: (LMDBTransaction) throws -> T) throws -> T {
        try refreshDatabases()
        return try transactions.withShared { try transaction(readOnly: true, body) }
    }

    /// Opens again, in a read transaction of its own, the named databases this process has not
    /// found yet: another process may have made them since.
    private func refreshDatabases() throws {
        guard databases.withLock({ $0.count }) < names.count else { return }
        // mdb_dbi_open must not run in two transactions of the process at once.
        try opening.withLock { try openDatabases(create: false) }
    }

    /// Runs `body` in a write transaction: committed when `body` returns, aborted when it throws.
    /// When the map is full it grows and `body` runs again.
    ///
    /// Before LMDB's writer mutex, the writer takes a lock on a byte of the data file, waiting up
    /// to ``busyTimeout``: a process stopped inside a write transaction makes the others fail with
    /// ``LockBusy`` naming it, never wait forever.
    package func write<T>(_ body: (LMDBTransaction) throws -> T) throws -> T {
        try writer.withLock {
            try writerLock.acquire(timeout: busyTimeout)
            defer { writerLock.release() }
            if databases.withLock({ $0.count }) < names.count {
                try opening.withLock { try openDatabases(create: true) }
            }
            while true {
                do {
                    return try transactions.withShared { try transaction(readOnly: false, body) }
                } catch let e as LMDBError where e.isMapFull {
                    let size = mapSize * 2
                    try transactions.withExclusive {
                        try LMDBError.check(mdb_env_set_mapsize(env, size), "mdb_env_set_mapsize", path: path)
                    }
                }
            }
        }
    }

    private func transaction<T>(readOnly: Bool, _ body: (LMDBTransaction) throws -> T) throws -> T {
        var txn: OpaquePointer?
        var rc = mdb_txn_begin(env, nil, readOnly ? UInt32(MDB_RDONLY) : 0, &txn)
        if rc == MDB_MAP_RESIZED {
            // Another process grew the map: adopt its size (no transaction of this process may
            // be active meanwhile) and begin again.
            try transactions.releasingShared {
                try transactions.withExclusive {
                    try LMDBError.check(mdb_env_set_mapsize(env, 0), "mdb_env_set_mapsize", path: path)
                }
            }
            rc = mdb_txn_begin(env, nil, readOnly ? UInt32(MDB_RDONLY) : 0, &txn)
        }
        try LMDBError.check(rc, "mdb_txn_begin", path: path)
        guard let txn else { throw LMDBError(code: EINVAL, call: "mdb_txn_begin", path: path) }
        let result: T
        do {
            result = try body(LMDBTransaction(txn: txn, environment: self, readOnly: readOnly))
        } catch {
            mdb_txn_abort(txn)
            throw error
        }
        // A failed commit has already freed the transaction: it must not be aborted as well.
        try LMDBError.check(mdb_txn_commit(txn), "mdb_txn_commit", path: path)
        return result
    }
}

/// A readers-writer lock (pthread_rwlock): many holders of the shared side, or one of the
/// exclusive side.
final class ReadWriteLock: @unchecked Sendable {
    private let lock: UnsafeMutablePointer<pthread_rwlock_t>

    init() {
        lock = .allocate(capacity: 1)
        lock.initialize(to: pthread_rwlock_t())
        pthread_rwlock_init(lock, nil)
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    func withShared<T>(_ body: () throws -> T) rethrows -> T {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }

    func withExclusive<T>(_ body: () throws -> T) rethrows -> T {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }

    /// Gives up a shared hold for the time of `body`, then takes it again.
    func releasingShared<T>(_ body: () throws -> T) rethrows -> T {
        pthread_rwlock_unlock(lock)
        defer { pthread_rwlock_rdlock(lock) }
        return try body()
    }
}

/// A transaction handle, valid only inside the closure that receives it.
package struct LMDBTransaction {
    fileprivate let txn: OpaquePointer
    fileprivate let environment: LMDBEnvironment
    fileprivate let readOnly: Bool

    private func dbi(_ db: String) throws -> MDB_dbi? { environment.database(db) }

    /// The handle of `db` for a write (a write transaction always has one).
    private func writable(_ db: String) throws -> MDB_dbi {
        guard let dbi = try dbi(db) else {
            throw LMDBError(code: EACCES, call: "mdb_dbi_open(\(db))", path: environment.path)
        }
        return dbi
    }

    package func get(_ key: String, in db: String) throws -> [UInt8]? {
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

    package func put(_ value: [UInt8], for key: String, in db: String) throws {
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
    package func delete(_ key: String, in db: String) throws -> Bool {
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
    package func all(in db: String) throws -> [(String, [UInt8])] {
        guard let dbi = try dbi(db) else { return [] }
        var cursor: OpaquePointer?
        try LMDBError.check(mdb_cursor_open(txn, dbi, &cursor), "mdb_cursor_open", path: environment.path)
        defer { mdb_cursor_close(cursor) }
        var out: [(String, [UInt8])] = []
        var k = MDB_val()
        var v = MDB_val()
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
