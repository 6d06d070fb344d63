import Foundation
import SharedStoreCore
import SharedStoreLMDB
import SharedStoreSupport

/// The live consumer that holds history back the most, and its position.
public struct RegistryMinimum: Sendable, Hashable {
    /// The lowest token value of the live consumers (0: one of them needs all history).
    public let value: Int64
    /// The consumer at that position.
    public let consumer: String
}

/// Where each consumer got to in the history of one store: Core Data's per-target
/// `UserDefaults(suiteName:)` last token, as an LMDB environment in the group directory
/// (`tokens.lmdb`, mode 0600, with LMDB's `tokens.lmdb-lock`).
///
/// Every process of the group shares it. Advances are monotonic inside the LMDB write
/// transaction (invariant 6); only ``reset(_:to:)`` and ``remove(_:)`` move a consumer back.
///
/// For example:
/// ```swift
/// let registry = try TokenRegistry(group: dir)
/// try registry.register("Widget")                      // holds history back from now on
/// let widget = try registry.consumer("Widget")          // its token: nil until its first sync
/// ```
///
/// ``ViewContext``, ``LiveQuery`` and ``Container/sync(consumer:registry:_:)`` advance it after
/// each merge; ``HistoryCleaner`` deletes only what every live consumer has passed.
public final class TokenRegistry: Sendable {
    /// The registry's file name in the group directory.
    public static let fileName = "tokens.lmdb"

    /// One consumer's entry.
    public struct Consumer: Sendable, Hashable {
        /// The consumer's name (1 to 200 bytes).
        public let name: String
        /// Nil while the consumer has registered but never synced: it needs all history.
        public let token: HistoryToken?
        /// When the consumer registered.
        public let registeredAt: Date
        /// When the consumer was last seen: its last advance (also one that found it further
        /// already), reset or registration. Eviction goes by it.
        public let updatedAt: Date
        /// Evicted by the cleaner: its next sync reports expired and reloads in full.
        public let isEvicted: Bool
    }

    /// How durable an advance is.
    public enum Durability: Sendable {
        /// Survives the crash of any process, and a power loss with the registry intact: a commit
        /// syncs its data pages but not the meta page that points to them (MDB_NOMETASYNC), so a
        /// power loss may take the registry back by one commit, never leave it damaged. The
        /// default (the pair of SQLite's synchronous=NORMAL). Without any sync (MDB_NOSYNC, what
        /// this was before issue 20), a power loss that wrote the meta page but not the pages it
        /// names left the registry damaged: the power-loss scenario found it.
        case processCrash
        /// Survives a power loss with every advance: data and meta page are fsynced at each commit.
        case powerLoss
    }

    let environment: LMDBEnvironment
    /// The path of `tokens.lmdb`.
    public let path: String
    static let db = "consumers"
    /// Per store: the highest token the registry has seen (``highWater(storeID:)``).
    private static let storesDB = "stores"
    /// Facts about the registry itself (when it was repaired).
    private static let metaDB = "meta"

    /// Opens (or creates) the registry in `group`. Opening takes no write lock unless the registry
    /// is new: read-only commands never wait for a writer.
    ///
    /// - Parameter busyTimeout: how long a write waits for another process's write transaction
    ///   before failing with `.busy` (the same deadline as the store's).
    /// - Throws: `.fileAccess` when the directory or a file cannot be used (a symlink, a FIFO,
    ///   a directory others can write), `.registryDamaged` for a damaged `tokens.lmdb`
    ///   (``TokenRegistry/repair(group:force:)`` moves it aside).
    ///
    /// - Parameter readOnly: opens an existing registry to read it only (LMDB's `MDB_RDONLY`): no
    ///   file or database is made, and a registry file the user may only read is read; every
    ///   write fails with `.fileAccess`.
    public init(
        group: String, durability: Durability = .processCrash, busyTimeout: TimeInterval = 5, readOnly: Bool = false
    ) throws {
        guard busyTimeout.isFinite, busyTimeout >= 0 else {
            throw StoreError(.invalidArgument, "busy timeout must be a finite number of seconds, not \(busyTimeout)")
        }
        let path = Self.path(group: group)
        self.path = path
        // LMDB opens both files with plain open(2): each must be a regular file, made 0600 here.
        if readOnly {
            try GroupDirectory.check(group)
            guard FileManager.default.fileExists(atPath: path) else {
                throw StoreError(.fileAccess, "no token registry at \(TextSafety.visible(path))")
            }
            try GroupDirectory.checkFile(path)
            try GroupDirectory.checkFile(path + "-lock")
        } else {
            try GroupDirectory.prepare(group)
            try GroupDirectory.prepareFile(path)
            try GroupDirectory.prepareFile(path + "-lock")
        }
        var flags: LMDBEnvironmentFlags = [.noSubdirectory]
        if durability == .processCrash { flags.insert(.noMetaSync) }
        if readOnly { flags.insert(.readOnly) }
        let openEnvironment = { (flags: LMDBEnvironmentFlags) in
            try Self.wrap(path) {
                try LMDBEnvironment.shared(
                    path: path, flags: flags, busyTimeout: min(busyTimeout, 3600),
                    databases: [Self.db, Self.storesDB, Self.metaDB])
            }
        }
        do {
            environment = try openEnvironment(flags)
        } catch let error as StoreError where readOnly && error.code == .fileAccess && !Self.lockWritable(path) {
            // LMDB writes its lock file even to read: a reader who may not (another user's group,
            // a read-only mount) reads the file as it is, without the reader table (MDB_NOLOCK;
            // the file was checked page by page first). A writer working now is not seen.
            environment = try openEnvironment(flags.union(.noLock))
        }
    }

    /// Whether this process may open `path`'s lock file for writing (or make it).
    private static func lockWritable(_ path: String) -> Bool {
        let lock = path + "-lock"
        return FileManager.default.fileExists(atPath: lock)
            ? access(lock, W_OK) == 0 : access(PathName.parent(of: path), W_OK) == 0
    }

    /// Whether this registry is read without LMDB's lock file (``init(group:durability:busyTimeout:readOnly:)``
    /// on a lock file this user may not write): as the file is, a writer working now unseen.
    public var readsFileAsItIs: Bool { environment.flags.contains(.noLock) }

    /// `tokens.lmdb` of `group`, spelled one way: LMDB must not be opened twice in a process, and
    /// `dir`, `./dir` and a symlink to it name the same file.
    static func path(group: String) -> String {
        let canonical =
            realpath(group, nil).map { p in
                defer { free(p) }
                return String(cString: p)
            } ?? group
        return (canonical as NSString).appendingPathComponent(Self.fileName)
    }

    /// Runs `body`, turning LMDB's errors, a damaged file and a busy writer lock into
    /// ``StoreError``s that name the registry.
    static func wrap<T>(_ path: String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as LMDBError {
            throw storeError(error)
        } catch let damage as LMDBFileCheck.Damage {
            throw damaged(path, damage.description)
        } catch let busy as LockBusy {
            throw StoreError(.busy, "token registry \(TextSafety.visible(path)) busy: \(busy)")
        } catch let error as StoreError where error.code == .notAStore {
            throw damaged(path, error.message)
        }
    }

    static func storeError(_ error: LMDBError) -> StoreError {
        let path = TextSafety.visible(error.path)
        if error.isDamage { return damaged(error.path, error.message) }
        if error.isDiskFull {
            return StoreError(.diskFull, "token registry \(path) is full: \(error.message)", context: error.call)
        }
        if error.isAccessDenied {
            return StoreError(.fileAccess, "cannot write token registry \(path): \(error.message)", context: error.call)
        }
        return StoreError(
            .storage, "token registry error: \(TextSafety.visible(error.description))", context: error.call)
    }

    static func damaged(_ path: String, _ what: String) -> StoreError {
        StoreError(
            .registryDamaged,
            "token registry \(TextSafety.visible(path)) is damaged (\(what)); "
                + "run 'storectl repair-registry' to move it aside and start an empty one (every consumer then "
                + "reloads in full)"
        )
    }

    /// Reader slots of dead processes this process cleared when it opened the registry.
    public var clearedStaleReaders: Int { environment.clearedStaleReaders }

    static func checkName(_ name: String) throws {
        guard !name.isEmpty, name.utf8.count <= 200, !name.contains("\0") else {
            throw StoreError(.invalidArgument, "consumer name must be 1 to 200 bytes, not '\(name)'")
        }
    }

    // MARK: - Reading

    /// The entry of consumer `name`, or nil when it is not registered.
    ///
    /// - Throws: `.invalidArgument` for an empty name or one over 200 bytes, `.registryDamaged` for
    ///   a damaged registry.
    public func consumer(_ name: String) throws -> Consumer? {
        try Self.checkName(name)
        return try Self.wrap(path) {
            try environment.read { t in try t.get(name, in: Self.db).map { try Self.decode(name, $0) } }
        }
    }

    /// Every registered consumer, evicted ones included, in the bytewise order of their names.
    ///
    /// - Throws: `.registryDamaged` for a damaged registry.
    public func consumers() throws -> [Consumer] {
        try Self.wrap(path) {
            try environment.read { t in try t.all(in: Self.db).map { try Self.decode($0.0, $0.1) } }
        }
    }

    /// The lowest position over live (non-evicted) consumers of store `storeID`: the history
    /// through it has been merged by all of them. A consumer that never synced, whose token
    /// belongs to another store, or whose token `isValid` rejects (lost in a restore) needs
    /// everything (value 0). Nil when there is no live consumer.
    ///
    /// - Throws: `.registryDamaged` for a damaged registry.
    public func minimum(
        storeID: UUID, excluding: Set<String> = [],
        isValid: (Int64) -> Bool = { _ in true }
    ) throws -> RegistryMinimum? {
        var lowest: RegistryMinimum?
        for c in try consumers() where !c.isEvicted && !excluding.contains(c.name) {
            let value = c.token.flatMap { $0.storeID == storeID && isValid($0.value) ? $0.value : nil } ?? 0
            if lowest == nil || value < lowest!.value { lowest = RegistryMinimum(value: value, consumer: c.name) }
        }
        return lowest
    }

    /// The highest token of store `storeID` the registry has seen: any consumer's, or one a
    /// target recorded (``noteHighWater(_:)``), or one a consumer held before it was
    /// reset. The store must never hand out a number at or below it again.
    ///
    /// - Throws: `.registryDamaged` for a damaged registry.
    public func highWater(storeID: UUID) throws -> Int64 {
        try Self.wrap(path) {
            try environment.read { t in
                var high = try t.get(storeID.uuidString, in: Self.storesDB).map(Self.decodeHighWater) ?? 0
                for (name, bytes) in try t.all(in: Self.db) {
                    if let token = try Self.decode(name, bytes).token, token.storeID == storeID {
                        high = max(high, token.value)
                    }
                }
                return high
            }
        }
    }

    /// When the registry was moved aside and started empty by ``repair(group:force:)`` (nil:
    /// never).
    ///
    /// - Throws: `.registryDamaged` for a damaged registry.
    public func repairedAt() throws -> Date? {
        try Self.wrap(path) {
            try environment.read { t in
                try t.get("repaired_at", in: Self.metaDB).flatMap {
                    $0.count == 8 ? Date(timeIntervalSince1970: Double(bitPattern: Self.u64($0, 0))) : nil
                }
            }
        }
    }

    // MARK: - Writing

    /// Records that the registry was started anew by a repair (see ``repairedAt()``).
    func markRepaired(at date: Date) throws {
        var bytes: [UInt8] = []
        withUnsafeBytes(of: date.timeIntervalSince1970.bitPattern.littleEndian) { bytes += $0 }
        try Self.wrap(path) { try environment.write { t in try t.put(bytes, for: "repaired_at", in: Self.metaDB) } }
    }

    /// Adds `name` if it is not registered yet (with no token: it needs all history).
    ///
    /// - Throws: ``StoreError``: `.invalidArgument` for an empty name or one over 200 bytes,
    ///   `.registryDamaged` for a damaged registry, `.busy` when another process holds its write lock
    ///   past the busy timeout, `.diskFull`, `.fileAccess`.
    public func register(_ name: String) throws {
        // Names that start with ~ are ephemeral consumers' (``registerEphemeral(_:)``): the
        // cleaner drops them once their process is gone, so a durable one may not take one.
        guard !name.hasPrefix("~") else {
            throw StoreError(
                .invalidArgument,
                "consumer name '\(TextSafety.visible(name))' starts with ~, which names the ephemeral consumers of "
                    + "live queries: choose another")
        }
        try registerAny(name)
    }

    func registerAny(_ name: String) throws {
        try Self.checkName(name)
        // Most runs find themselves registered: look first, so that they take no write lock.
        if try consumer(name) != nil { return }
        try Self.wrap(path) {
            try environment.write { t in
                guard try t.get(name, in: Self.db) == nil else { return }
                let now = Date()
                try t.put(
                    Self.encode(Consumer(name: name, token: nil, registeredAt: now, updatedAt: now, isEvicted: false)),
                    for: name, in: Self.db)
            }
        }
    }

    /// Moves `name` forward to `token`. Inside one LMDB write transaction a lower token never
    /// overwrites a higher one of the same store. Returns the stored token afterwards; an evicted
    /// consumer is left as it is (its next sync must reload in full).
    ///
    /// - Throws: ``StoreError``: `.invalidArgument` for an empty name or one over 200 bytes,
    ///   `.registryDamaged` for a damaged registry, `.busy` when another process holds its write lock
    ///   past the busy timeout, `.diskFull`, `.fileAccess`.
    @discardableResult
    public func advance(_ name: String, to token: HistoryToken) throws -> Consumer {
        try Self.checkName(name)
        return try Self.wrap(path) {
            try environment.write { t in
                let now = Date()
                let old = try t.get(name, in: Self.db).map { try Self.decode(name, $0) }
                if let old, old.isEvicted { return old }
                if let old, let current = old.token, current.storeID == token.storeID, current.value >= token.value {
                    // Still record that the consumer is alive.
                    let touched = Consumer(
                        name: name, token: current, registeredAt: old.registeredAt, updatedAt: now, isEvicted: false)
                    try t.put(Self.encode(touched), for: name, in: Self.db)
                    return touched
                }
                let new = Consumer(
                    name: name, token: token, registeredAt: old?.registeredAt ?? now, updatedAt: now, isEvicted: false)
                try t.put(Self.encode(new), for: name, in: Self.db)
                return new
            }
        }
    }

    /// Sets `name` to exactly `token` (nil: never synced) and clears an eviction: the explicit
    /// move backwards, for a consumer that reloaded in full. The token it held stays known as
    /// the store's high-water mark.
    ///
    /// - Throws: ``StoreError``: `.invalidArgument` for an empty name or one over 200 bytes,
    ///   `.registryDamaged` for a damaged registry, `.busy` when another process holds its write lock
    ///   past the busy timeout, `.diskFull`, `.fileAccess`.
    public func reset(_ name: String, to token: HistoryToken?) throws {
        try Self.checkName(name)
        try Self.wrap(path) {
            try environment.write { t in
                let now = Date()
                let old = try t.get(name, in: Self.db).map { try Self.decode(name, $0) }
                if let held = old?.token { try Self.raiseHighWater(t, held) }
                try t.put(
                    Self.encode(
                        Consumer(
                            name: name, token: token, registeredAt: old?.registeredAt ?? now, updatedAt: now,
                            isEvicted: false)),
                    for: name, in: Self.db)
            }
        }
    }

    /// Removes `name`; false when it was not registered. The token it held stays known as the
    /// store's high-water mark.
    ///
    /// - Throws: ``StoreError``: `.invalidArgument` for an empty name or one over 200 bytes,
    ///   `.registryDamaged` for a damaged registry, `.busy` when another process holds its write lock
    ///   past the busy timeout, `.diskFull`, `.fileAccess`.
    @discardableResult
    public func remove(_ name: String) throws -> Bool {
        try Self.checkName(name)
        return try Self.wrap(path) {
            try environment.write { t in
                if let held = try t.get(name, in: Self.db).map({ try Self.decode(name, $0) })?.token {
                    try Self.raiseHighWater(t, held)
                }
                return try t.delete(name, in: Self.db)
            }
        }
    }

    /// Makes every committed position durable (the default mode syncs a commit's pages but not
    /// its meta page): what the cleaner deletes by must survive a power loss with the deletion.
    ///
    /// - Throws: ``StoreError``: `.registryDamaged` for a damaged registry, `.busy` when another
    ///   process holds its write lock past the busy timeout, `.diskFull`, `.fileAccess`.
    public func makeDurable() throws {
        try Self.wrap(path) { try environment.sync() }
    }

    /// Records that the store of `token` has handed out `token` (a target that saved, or saw the
    /// store at it). Takes the write lock only when the registry does not know it yet.
    ///
    /// - Throws: ``StoreError``: `.registryDamaged` for a damaged registry, `.busy` when another
    ///   process holds its write lock past the busy timeout, `.diskFull`, `.fileAccess`.
    public func noteHighWater(_ token: HistoryToken) throws {
        let known = try Self.wrap(path) {
            try environment.read { t in
                try t.get(token.storeID.uuidString, in: Self.storesDB).map(Self.decodeHighWater) ?? 0
            }
        }
        guard token.value > known else { return }
        try Self.wrap(path) { try environment.write { t in try Self.raiseHighWater(t, token) } }
    }

    private static func raiseHighWater(_ t: LMDBTransaction, _ token: HistoryToken) throws {
        let key = token.storeID.uuidString
        let known = try t.get(key, in: storesDB).map(decodeHighWater) ?? 0
        guard token.value > known else { return }
        var bytes: [UInt8] = []
        withUnsafeBytes(of: token.value.littleEndian) { bytes += $0 }
        try t.put(bytes, for: key, in: storesDB)
    }

    private static func decodeHighWater(_ b: [UInt8]) throws -> Int64 {
        guard b.count == 8 else {
            throw StoreError(
                .registryDamaged, "a high-water entry is corrupt (\(b.count) bytes); run 'storectl repair-registry'")
        }
        return Int64(bitPattern: u64(b, 0))
    }

    /// Marks as evicted the live consumers that are behind `current` (the store's newest token)
    /// and have not synced for `interval` seconds; returns their names. A consumer that is up to
    /// date is never evicted, however long ago it synced: it needs no history.
    ///
    /// - Throws: ``StoreError``: `.registryDamaged` for a damaged registry, `.busy` when another
    ///   process holds its write lock past the busy timeout, `.diskFull`, `.fileAccess`.
    public func evict(notSeenFor interval: TimeInterval, behind current: HistoryToken, dryRun: Bool = false) throws
        -> [String]
    {
        let cutoff = Date().addingTimeInterval(-interval)
        // A dry run only looks: a read transaction, no writer lock taken from other processes.
        return try Self.wrap(path) {
            try (dryRun ? environment.read : environment.write) { t in
                var evicted: [String] = []
                for (name, bytes) in try t.all(in: Self.db) {
                    let c = try Self.decode(name, bytes)
                    let upToDate = c.token.map { $0.storeID == current.storeID && $0.value >= current.value } ?? false
                    guard !c.isEvicted, !upToDate, c.updatedAt < cutoff else { continue }
                    evicted.append(name)
                    if !dryRun {
                        try t.put(
                            Self.encode(
                                Consumer(
                                    name: name, token: c.token, registeredAt: c.registeredAt, updatedAt: c.updatedAt,
                                    isEvicted: true)),
                            for: name, in: Self.db)
                    }
                }
                return evicted
            }
        }
    }
}
