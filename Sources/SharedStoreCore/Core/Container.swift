import Foundation
import SharedStoreSQLite
import SharedStoreSupport
import Synchronization

/// A store opened on an app-group directory: Core Data's `NSPersistentContainer`.
///
/// The directory holds `Store.sqlite` (with its `-wal` and `-shm`), created private (0700 for the
/// directory, 0600 for the files). Many processes may open the same directory at once; SQLite's
/// write lock serializes their saves.
///
/// For example:
/// ```swift
/// let container = try Container(group: "/tmp/group", model: model)
/// let context = container.newContext(name: "share", author: "ShareExtension")
/// ```
public final class Container: Sendable {
    /// How a container opens its store (Core Data's store description options).
    ///
    /// For example:
    /// ```swift
    /// var options = Container.Options()
    /// options.synchronous = .full          // a save survives a power loss, not only a crash
    /// options.busyTimeout = 2
    /// let container = try Container(group: dir, model: model, options: options)
    /// ```
    public struct Options: Sendable, Hashable {
        /// SQLite's `synchronous` setting, which decides what an acknowledged save survives; the raw
        /// value is the pragma's value.
        public enum Synchronous: String, Sendable, Hashable {
            /// A save survives the crash or `kill -9` of any process; a power loss may lose the last
            /// acknowledged saves (never half of one). The fastest.
            case normal = "NORMAL"
            /// A save survives a power loss too: every commit waits for the disk.
            case full = "FULL"
        }
        /// Record every save as a history transaction (Core Data's NSPersistentHistoryTrackingKey).
        public var historyTracking = true
        /// Keep the store in memory (tests): nothing is written to the group directory.
        public var inMemory = false
        /// SQLite's `synchronous` level: NORMAL survives a process crash, FULL a power loss too.
        public var synchronous = Synchronous.normal
        /// How long a writer waits for the write lock before failing with `.busy`.
        public var busyTimeout: TimeInterval = 5
        /// What a migration does with stored objects that break a uniqueness constraint the new
        /// model adds: refuse (default), or keep one of each group and delete the others.
        public var duplicatesWhenMigrating = DuplicateResolution.refuse
        /// Open the store to look at it and nothing else (`storectl audit`, `storectl top`): both
        /// connections read-only, no store, directory or registry made (SQLite makes the `-wal`
        /// and `-shm` of a store that has none, as for any reader in WAL mode), no migration or
        /// format upgrade (a store that needs one is an error naming it), and no checkpoint when
        /// the container goes (the WAL stays as the writers left it). Every save fails.
        public var readOnly = false
        /// The defaults: history tracking on, on disk, `.normal`, a 5-second busy timeout, and migrations
        /// that refuse duplicates.
        public init() {}
    }

    /// The store's file name in the group directory.
    public static let storeFileName = "Store.sqlite"

    /// The group directory the container opened (the `group` of ``init(group:model:options:migrations:)``).
    public let directory: String
    /// The model the container opened the store with: the store is at its version.
    public let model: Model
    /// The options the container opened the store with.
    public let options: Options
    /// The store's identity, made once when the store is created; tokens and ids carry it.
    public let storeID: UUID
    package let storePath: String
    let writer: ConnectionGuard
    let reader: ConnectionGuard
    let process: (pid: Int64, executable: String)
    /// Each entity's hot SQL, by entity index.
    let entitySQL: [EntitySQL]
    /// The model's derived attributes, arranged for the save path.
    let derivations: DerivationMap
    /// Validation rules and lifecycle events registered per entity (``register(_:_:)``).
    let hookRegistry = HookRegistry()
    /// Checks values against their attributes' rules, for every save of this container.
    let validator: Validator
    /// The SQL of recent fetch requests.
    let fetchCache = FetchCache()
    /// By entity index, whether the store declares each attribute column with the type the model
    /// gives it (a custom migration step may leave a column of the old type), found at the first
    /// update of the entity (``TransactionSQL/columnsAsModelled(_:)``).
    let modelledColumns = Protected<[Int: Bool]>([:])
    /// Run after every commit of this container (``addCommitHook(_:)``).
    private let commitHooks = Protected<[@Sendable (HistoryToken?) -> Void]>([])
    /// The newest token this process has seen: a save must get a higher one. SQLite gives a row
    /// id one above the largest, but at the largest possible one it picks a random unused id:
    /// a token at Int64.max (only a damaged store has one) must fail the save, never hand out an
    /// older number. Checked against a number in memory, so it costs a save nothing measurable.
    let newestSeen = Atomic<Int64>(0)
    /// The token lease as this process last read or took it (``leaseCheck(_:othersCommitted:)``).
    let leaseThrough = Atomic<Int64>(0)
    /// Whether this process has compared the lease's boot with its own.
    let leaseChecked = Atomic<Bool>(false)
    /// The next lease, taken ahead of need and synced off the write lock.
    let leaseAhead = LeaseAhead()
    /// How the model's entities and properties map to the store's history numbers.
    let numbering: HistoryNumbering
    /// SQLite's schema cookie when this container last found the store at its model's version:
    /// a read or write that finds it moved checks the version again (`.modelOutdated`).
    let schemaCookie = Atomic<Int64>(0)

    /// Opens the store in `group`, creating the directory and the store on first use, and
    /// migrating a store of an older model version to `model`'s (``MigrationPlan``), with the
    /// app's custom `migrations` for what lightweight migration cannot do.
    ///
    /// - Throws: ``StoreError``: `.fileAccess` when the directory or file cannot be made or opened,
    ///   `.notAStore` for a file that is not a SharedStore store, `.modelMismatch` when the store
    ///   was made with another model of the same version, `.modelNewer` when a newer version of
    ///   the app migrated it, `.migrationRefused` for a migration that cannot run. The files are
    ///   left as they were.
    public init(group: String, model: Model, options: Options = Options(), migrations: [MigrationStep] = []) throws {
        self.directory = group
        self.model = model
        self.options = options
        self.process = (Int64(getpid()), ProcessInfo.processInfo.processName)
        self.entitySQL = model.entities.enumerated().map { EntitySQL($1, index: $0, model: model) }
        self.derivations = DerivationMap(model)
        validator = Validator(model: model)
        guard options.busyTimeout.isFinite, options.busyTimeout >= 0 else {
            throw StoreError(
                .invalidArgument, "busy timeout must be a finite number of seconds, not \(options.busyTimeout)")
        }
        let timeout = Int32(min(options.busyTimeout, 3600) * 1000)
        if options.inMemory {
            let memoryPath = "file:sharedstore-\(UUID().uuidString)?mode=memory"
            storePath = memoryPath
            let connection = try StoreError.wrap(path: "memory") {
                try SQLiteConnection(path: memoryPath, busyTimeoutMilliseconds: timeout)
            }
            try StoreError.wrap(path: "memory") { try SchemaSQL.defineFunctions(connection) }
            let state = try Self.openSchema(
                connection, model: model, migrations: migrations, options: options, path: "memory")
            storeID = state.storeID
            numbering = try HistoryNumbering(model: model, catalog: state.catalog, path: "memory")
            schemaCookie.store(
                try StoreError.wrap(path: "memory") { try SchemaSQL.schemaCookie(connection) }, ordering: .relaxed)
            writer = ConnectionGuard(connection)
            reader = writer
            applyModelHooks()
            return
        }
        let path = (group as NSString).appendingPathComponent(Self.storeFileName)
        storePath = path
        if options.readOnly {
            try GroupDirectory.check(group)
            try GroupDirectory.checkFile(path)
        } else {
            try GroupDirectory.prepare(group)
            try GroupDirectory.prepareFile(path)
        }
        // SQLite opens the database with SQLITE_OPEN_NOFOLLOW, but its -wal, -shm and -journal
        // files through plain open(2): each must be a regular file or absent.
        for suffix in ["-wal", "-shm", "-journal"] { try GroupDirectory.checkFile(path + suffix) }
        let (w, r, state) = try Self.openStore(
            path: path, model: model, options: options, migrations: migrations, timeout: timeout)
        storeID = state.storeID
        numbering = try HistoryNumbering(model: model, catalog: state.catalog, path: path)
        schemaCookie.store(try StoreError.wrap(path: path) { try SchemaSQL.schemaCookie(w) }, ordering: .relaxed)
        writer = ConnectionGuard(w)
        reader = ConnectionGuard(r)
        noteToken(try currentToken().value)
        if !options.readOnly { leaseAhead.open(path + "-wal") }
        applyModelHooks()
    }

    /// The hooks and rules the model declares: every process that opens the store with the model
    /// runs them, with no `register` of its own.
    private func applyModelHooks() {
        for (entity, hooks) in model.hooks.byEntity {
            if let i = model.entityIndex[entity] { hookRegistry.set(i, hooks) }
        }
    }

    /// Opens the writer and reader connections, creating the schema on first use.
    ///
    /// Opening a brand-new file can meet SQLITE_BUSY where SQLite calls no busy handler
    /// (switching to WAL, or the schema being made by another process at the same moment): the
    /// whole open is retried in the busy wait's steps up to the busy timeout, like any write.
    private static func openStore(
        path: String, model: Model, options: Options, migrations: [MigrationStep], timeout: Int32
    ) throws -> (SQLiteConnection, SQLiteConnection, StoreFormat.State) {
        if options.readOnly { return try openReadOnlyStore(path: path, model: model, timeout: timeout) }
        let start = Monotonic.seconds()
        var attempt = 0
        while true {
            do {
                let w = try StoreError.wrap(path: path) {
                    try SQLiteConnection(path: path, busyTimeoutMilliseconds: timeout)
                }
                // Check before configuring: WAL mode would rewrite the header of a foreign database.
                let existing = try StoreFormat.inspect(w, model: model, path: path)
                try StoreError.wrap(path: path) {
                    try SchemaSQL.configure(w, synchronous: options.synchronous)
                    try SchemaSQL.defineFunctions(w)
                }
                let state = try openSchema(
                    w, model: model, migrations: migrations, options: options, path: path, found: existing)
                let r = try StoreError.wrap(path: path) { () throws -> SQLiteConnection in
                    let r = try SQLiteConnection(path: path, busyTimeoutMilliseconds: timeout)
                    try SchemaSQL.makeQueryOnly(r)
                    try SchemaSQL.defineFunctions(r)
                    return r
                }
                return (w, r, state)
            } catch let error as StoreError
                where error.code == .busy && Monotonic.seconds() - start < options.busyTimeout
            {
                usleep(BusyWait.step(attempt))
                attempt += 1
            }
        }
    }

    /// Runs `body` (an open of a store, say) with `handler` told each phase of a migration an
    /// open in it runs, as it starts (renames, new columns, indexes, derived values, kept
    /// counts…: ``MigrationProgress/phase`` of ``MigrationProgress/phases``, by name), and, in a
    /// phase that goes over a table's rows (derived values, global ids), how many of them are
    /// done, a few times a second, so that a long migration can show where it is and how much is
    /// left. `handler` is called on the opening thread, inside the migration's transaction. For
    /// example:
    /// ```swift
    /// let container = try Container.withMigrationProgress({ p in
    ///     print("migrating: \(p.name) (\(p.phase) of \(p.phases)), \(p.done) of \(p.total ?? 0) rows")
    /// }) { try Container(group: dir, model: model) }
    /// ```
    ///
    /// (The handler is held in a task-local value as an object: a task-local of a function
    /// type crashes release builds of Swift 6.3 on Linux once the optimizer specializes its
    /// binding into another module.)
    public static func withMigrationProgress<T>(
        _ handler: @escaping @Sendable (MigrationProgress) -> Void, _ body: () throws -> T
    ) rethrows -> T {
        try $migrationProgress.withValue(MigrationListener(handler), operation: body)
    }

    /// The handler of ``withMigrationProgress(_:_:)`` while it runs.
    @TaskLocal static var migrationProgress: MigrationListener?

    /// The store's state once it is at `model`'s version: made, adopted from format 2, or
    /// migrated (``MigrationRunner``) — each in its own write transaction.
    private static func openSchema(
        _ c: SQLiteConnection, model: Model, migrations: [MigrationStep], options: Options, path: String,
        found: StoreFormat.Found?? = nil
    ) throws -> StoreFormat.State {
        let found = try found ?? StoreFormat.inspect(c, model: model, path: path)
        let runner = MigrationRunner(
            c: c, model: model, steps: migrations, duplicates: options.duplicatesWhenMigrating, path: path,
            progress: Container.migrationProgress?.tell)
        switch found {
        case nil:
            switch try StoreFormat.create(c, model: model, path: path) {
            case .ready(let state): return state
            case .legacy: return try StoreFormat.adoptLegacy(c, model: model, path: path)
            case .older(let state): return try runner.run(state)
            }
        case .ready(let state)?: return state
        case .legacy?: return try StoreFormat.adoptLegacy(c, model: model, path: path)
        case .older(let state)?: return try runner.run(state)
        }
    }

    /// Records that token `value` exists (the newest this process has seen).
    func noteToken(_ value: Int64) {
        _ = newestSeen.max(value, ordering: .relaxed)
    }

    /// Runs `hook` after every commit of this container, with the commit's token (nil for a
    /// save that recorded no history). The sync layer installs the change signal this way
    /// (`ChangeSignal.attach(to:)`). A hook runs on the committing thread and must be quick.
    public func addCommitHook(_ hook: @escaping @Sendable (HistoryToken?) -> Void) {
        commitHooks.withLock { $0.append(hook) }
    }

    /// Tells every hook that a commit happened.
    func didCommit(_ token: HistoryToken?) {
        for hook in commitHooks.withLock({ $0 }) { hook(token) }
    }

    /// A new context that records its saves under `author` (Core Data's transactionAuthor).
    public func newContext(name: String? = nil, author: String? = nil) -> ObjectContext {
        ObjectContext(container: self, name: name, author: author)
    }

    /// A context its user keeps to one thread at a time by a lock of its own (a live query's):
    /// ``ConcurrencyDebug`` does not check it.
    package func newLockConfinedContext(name: String) -> ObjectContext {
        ObjectContext(container: self, name: name, author: nil, confined: true)
    }

    /// Parses `Entity/N` as an id of this store, checking that the entity exists.
    ///
    /// For example: `try container.objectID(parsing: "Article/42")`.
    ///
    /// - Throws: ``StoreError`` `.malformedID` for text that is not `Entity/N` (or its URI form) or
    ///   names an entity the model lacks, `.foreignID` for a URI of another store. Whether the object
    ///   exists is not checked.
    public func objectID(parsing text: String) throws -> ObjectID {
        let id = try ObjectID(parsing: text, storeID: storeID)
        guard model.entity(named: id.entity) != nil else {
            throw StoreError(.malformedID, "object id '\(text)' names unknown entity '\(id.entity)'")
        }
        return id
    }

    /// Parses a printed token and checks that it belongs to this store.
    ///
    /// - Throws: ``StoreError`` `.malformedToken` for text SharedStore did not print,
    ///   `.foreignToken` for a token of another store.
    public func token(parsing text: String) throws -> HistoryToken {
        let token = try HistoryToken(parsing: text)
        try check(token)
        return token
    }

    func check(_ token: HistoryToken) throws {
        guard token.storeID == storeID else {
            throw StoreError(
                .foreignToken,
                "token \(token) belongs to another store (this store is \(storeID.uuidString.lowercased()))")
        }
    }

    // MARK: - Connections

    /// Runs `body` in a write transaction (`BEGIN IMMEDIATE`: waits for the write lock up to the
    /// busy timeout), committed when it returns, rolled back when it throws.
    ///
    /// A transaction that would give a token beyond the token lease stops before `body` runs,
    /// takes a new lease in a synced commit, and starts again (see Container+Lease.swift).
    /// `lease: false` is for a transaction that gives no token (a check of the write lock): it
    /// neither takes a lease nor records a reboot's lost numbers.
    func write<T>(lease: Bool = true, _ body: (TransactionSQL) throws -> T) throws -> T {
        let path = storePath
        return try writer.withConnection { c in
            try StoreError.wrap(path: path) {
                for _ in 0..<100 {
                    var ahead: Int64?
                    do {
                        let result = try c.writeTransaction {
                            let data = c.dataVersion
                            let othersCommitted = data != c.checkedDataVersion
                            // What this connection knew of the schema holds while only it wrote.
                            if othersCommitted && !c.knownTables.isEmpty { c.knownTables.removeAll() }
                            try checkModel(c, data: data)
                            let s = TransactionSQL(c: c, container: self)
                            if lease {
                                switch try leaseCheck(s, othersCommitted: othersCommitted) {
                                case .go: break
                                case .extend: throw LeaseNeeded()
                                case .ahead(let through): ahead = through
                                }
                            }
                            return try body(s)
                        }
                        // The only commit since the check is this one (the write lock was held).
                        c.checkedDataVersion = c.dataVersion
                        // A transaction that did not commit leaves its lease ahead unsynced.
                        if let ahead { syncLeaseAhead(ahead) }
                        return result
                    } catch is LeaseNeeded {
                        try extendLease(c)
                    } catch {
                        // Rolled back: a table it made or dropped is as it was.
                        c.knownTables.removeAll()
                        throw error
                    }
                }
                throw StoreError(.busy, "other processes used up every token lease this one took; nothing was saved")
            }
        }
    }

    /// Runs `body` with the writer connection outside any transaction (a checkpoint).
    func writeOutsideTransaction<T>(_ body: (TransactionSQL) throws -> T) throws -> T {
        let path = storePath
        return try writer.withConnection { c in
            try StoreError.wrap(path: path) { try body(TransactionSQL(c: c, container: self)) }
        }
    }

    /// Runs `body` with the reader outside a transaction: for a read of one statement, which is
    /// its own consistent snapshot (SQLite's implicit read transaction lasts until it is reset).
    func readOneStatement<T>(_ body: (TransactionSQL) throws -> T) throws -> T {
        let path = storePath
        return try reader.withConnection { c in
            try StoreError.wrap(path: path) {
                // Checked after the statement: the data version then tells what it read.
                let result: T
                do {
                    result = try body(TransactionSQL(c: c, container: self))
                } catch let error as SQLiteError {
                    // A migration under the statement: say so, not what SQLite said.
                    try checkModel(c)
                    throw error
                }
                try checkModel(c)
                return result
            }
        }
    }

    /// Fails with `.modelOutdated` when another process migrated the store to a newer model
    /// since this container last looked: SQLite's schema cookie moved and the stored version is
    /// not the model's. Costs nothing while nothing was committed since the last check (the data
    /// version, read without a statement, is unchanged); one PRAGMA otherwise.
    private func checkModel(_ c: SQLiteConnection, data known: UInt32? = nil) throws {
        let data = known ?? c.dataVersion
        if data == c.checkedDataVersion { return }
        let cookie = try SchemaSQL.schemaCookie(c)
        if cookie == schemaCookie.load(ordering: .relaxed) {
            c.checkedDataVersion = data
            return
        }
        let version = try SchemaSQL.storedModelVersion(c)
        guard version == model.version else {
            throw StoreError(
                .modelOutdated,
                "another process migrated the store to model \(version.map(String.init) ?? "?") while this one runs "
                    + "model \(model.version): restart it with the newer version (nothing was read or written)")
        }
        schemaCookie.store(cookie, ordering: .relaxed)
        c.checkedDataVersion = data
    }

    /// Runs `body` in a read transaction: one consistent snapshot of the store.
    func read<T>(_ body: (TransactionSQL) throws -> T) throws -> T {
        let path = storePath
        return try reader.withConnection { c in
            try StoreError.wrap(path: path) {
                try c.readTransaction {
                    try checkModel(c)
                    return try body(TransactionSQL(c: c, container: self))
                }
            }
        }
    }

    // MARK: - Validation

    /// Checks `values` for a new object of `entity` against the model's rules (required,
    /// type, length, pattern, range), as a save would, without saving anything.
    ///
    /// - Throws: `.validation` naming `object`, the attribute and the rule; `.unknownProperty`.
    public func validate(_ entity: String, _ values: [String: Value], object: String) throws {
        let e = try model.entity(entity)
        try e.checkAttributes(values, object: object)
        for a in e.attributes { _ = try validator.validate(values[a.name] ?? a.defaultValue, a, object: object) }
    }
}

/// One SQLite connection and the lock that gives it to one thread at a time. A lock, not a
/// `Mutex`: what runs under it (statements, rows) is not Sendable and never leaves it.
///
/// The thread holding it is known: one that asks again while it holds it (a read of the
/// container inside the body of a stream, a write from inside a save's hook) would wait for
/// itself forever, and fails at once instead (`.invalidArgument`).
final class ConnectionGuard: @unchecked Sendable {
    private let lock = NSLock()
    private let connection: SQLiteConnection
    /// The thread inside ``withConnection(_:)`` (0: none). Each thread stores only its own id,
    /// and clears it before it lets go, so a thread reads its own id here only while it holds
    /// the connection.
    private let holder = Atomic<UInt>(0)

    init(_ connection: SQLiteConnection) { self.connection = connection }

    /// The connection's path (fixed when it was opened: read without the lock).
    var path: String { connection.path }

    func withConnection<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        let me = UInt(pthread_self())
        guard holder.load(ordering: .relaxed) != me else {
            throw StoreError(
                .invalidArgument,
                "this thread already holds the store's connection: a read of the container inside the body of "
                    + "forEach or forEachRow (collect what the body needs first), or a write from inside a save "
                    + "of the same container (a hook); nothing was read or written by this call")
        }
        return try lock.withLock {
            holder.store(me, ordering: .relaxed)
            defer { holder.store(0, ordering: .relaxed) }
            return try body(connection)
        }
    }
}

/// Stops a write transaction before its body: the token lease must be extended first.
private struct LeaseNeeded: Error {}
