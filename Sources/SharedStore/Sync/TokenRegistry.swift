import Foundation

/// Where each consumer got to in the history of one store: Core Data's per-target
/// `UserDefaults(suiteName:)` last token, as an LMDB environment in the group directory
/// (`tokens.lmdb`, mode 0600, with LMDB's `tokens.lmdb-lock`).
///
/// Every process of the group shares it. Advances are monotonic inside the LMDB write
/// transaction (invariant 6); only ``reset(_:to:)`` and ``remove(_:)`` move a consumer back.
public final class TokenRegistry: Sendable {
    public static let fileName = "tokens.lmdb"

    /// One consumer's entry.
    public struct Consumer: Sendable, Hashable {
        public let name: String
        /// Nil while the consumer has registered but never synced: it needs all history.
        public let token: HistoryToken?
        public let registeredAt: Date
        public let updatedAt: Date
        /// Evicted by the cleaner: its next sync reports expired and reloads in full.
        public let isEvicted: Bool
    }

    /// How durable an advance is.
    public enum Durability: Sendable {
        /// Survives the crash of any process (the default, like SQLite's synchronous=NORMAL).
        case processCrash
        /// Survives a power loss too: every commit is fsynced (about 100 times slower).
        case powerLoss
    }

    let environment: LMDBEnvironment
    private static let db = "consumers"

    /// Opens (or creates) the registry in `group`.
    ///
    /// - Throws: `.fileAccess` when the directory cannot be written, `.notAStore` for a file
    ///   that is not an LMDB environment.
    public init(group: String, durability: Durability = .processCrash) throws {
        try Container.makePrivateDirectory(group)
        // One environment per file in a process: spell the path one way (LMDB must not be
        // opened twice, and `dir`, `./dir` and a symlink to it name the same file).
        let canonical = realpath(group, nil).map { p in
            defer { free(p) }
            return String(cString: p)
        } ?? group
        let path = (canonical as NSString).appendingPathComponent(Self.fileName)
        var flags: LMDBEnvironmentFlags = [.noSubdirectory]
        if durability == .processCrash { flags.insert(.noSync) }
        environment = try StoreError.wrapLMDB { try LMDBEnvironment.shared(path: path, flags: flags) }
        // Create the named database in a write transaction: a read-only one cannot.
        try StoreError.wrapLMDB { try environment.write { t in try t.open(Self.db) } }
    }

    /// Reader slots of dead processes this process cleared when it opened the registry.
    public var clearedStaleReaders: Int { environment.clearedStaleReaders }

    static func checkName(_ name: String) throws {
        guard !name.isEmpty, name.utf8.count <= 200, !name.contains("\0") else {
            throw StoreError(.invalidArgument, "consumer name must be 1 to 200 bytes, not '\(name)'")
        }
    }

    // MARK: - Reading

    public func consumer(_ name: String) throws -> Consumer? {
        try Self.checkName(name)
        return try StoreError.wrapLMDB {
            try environment.read { t in try t.get(name, in: Self.db).map { try Self.decode(name, $0) } }
        }
    }

    public func consumers() throws -> [Consumer] {
        try StoreError.wrapLMDB {
            try environment.read { t in try t.all(in: Self.db).map { try Self.decode($0.0, $0.1) } }
        }
    }

    /// The lowest position over live (non-evicted) consumers of store `storeID`: the history
    /// through it has been merged by all of them. A consumer that never synced, or whose token
    /// belongs to another store, needs everything (value 0). Nil when there is no live consumer.
    public func minimum(storeID: UUID, excluding: Set<String> = []) throws -> (value: Int64, consumer: String)? {
        var lowest: (Int64, String)?
        for c in try consumers() where !c.isEvicted && !excluding.contains(c.name) {
            let value = c.token.flatMap { $0.storeID == storeID ? $0.value : nil } ?? 0
            if lowest == nil || value < lowest!.0 { lowest = (value, c.name) }
        }
        return lowest
    }

    // MARK: - Writing

    /// Adds `name` if it is not registered yet (with no token: it needs all history).
    public func register(_ name: String) throws {
        try Self.checkName(name)
        try StoreError.wrapLMDB {
            try environment.write { t in
                guard try t.get(name, in: Self.db) == nil else { return }
                let now = Date()
                try t.put(Self.encode(Consumer(name: name, token: nil, registeredAt: now, updatedAt: now, isEvicted: false)), for: name, in: Self.db)
            }
        }
    }

    /// Moves `name` forward to `token`. Inside one LMDB write transaction a lower token never
    /// overwrites a higher one of the same store. Returns the stored token afterwards; an evicted
    /// consumer is left as it is (its next sync must reload in full).
    @discardableResult
    public func advance(_ name: String, to token: HistoryToken) throws -> Consumer {
        try Self.checkName(name)
        return try StoreError.wrapLMDB {
            try environment.write { t in
                let now = Date()
                let old = try t.get(name, in: Self.db).map { try Self.decode(name, $0) }
                if let old, old.isEvicted { return old }
                if let old, let current = old.token, current.storeID == token.storeID, current.value >= token.value {
                    // Still record that the consumer is alive.
                    let touched = Consumer(name: name, token: current, registeredAt: old.registeredAt, updatedAt: now, isEvicted: false)
                    try t.put(Self.encode(touched), for: name, in: Self.db)
                    return touched
                }
                let new = Consumer(name: name, token: token, registeredAt: old?.registeredAt ?? now, updatedAt: now, isEvicted: false)
                try t.put(Self.encode(new), for: name, in: Self.db)
                return new
            }
        }
    }

    /// Sets `name` to exactly `token` (nil: never synced) and clears an eviction: the explicit
    /// move backwards, for a consumer that reloaded in full.
    public func reset(_ name: String, to token: HistoryToken?) throws {
        try Self.checkName(name)
        try StoreError.wrapLMDB {
            try environment.write { t in
                let now = Date()
                let old = try t.get(name, in: Self.db).map { try Self.decode(name, $0) }
                try t.put(Self.encode(Consumer(name: name, token: token, registeredAt: old?.registeredAt ?? now, updatedAt: now, isEvicted: false)),
                          for: name, in: Self.db)
            }
        }
    }

    /// Removes `name`; false when it was not registered.
    @discardableResult
    public func remove(_ name: String) throws -> Bool {
        try Self.checkName(name)
        return try StoreError.wrapLMDB { try environment.write { t in try t.delete(name, in: Self.db) } }
    }

    /// Marks the live consumers not updated for `interval` seconds as evicted; returns their names.
    public func evict(notSeenFor interval: TimeInterval, dryRun: Bool = false) throws -> [String] {
        let cutoff = Date().addingTimeInterval(-interval)
        // A dry run only looks: a read transaction, no writer lock taken from other processes.
        return try StoreError.wrapLMDB {
            try (dryRun ? environment.read : environment.write) { t in
                var evicted: [String] = []
                for (name, bytes) in try t.all(in: Self.db) {
                    let c = try Self.decode(name, bytes)
                    guard !c.isEvicted, c.updatedAt < cutoff else { continue }
                    evicted.append(name)
                    if !dryRun {
                        try t.put(Self.encode(Consumer(name: name, token: c.token, registeredAt: c.registeredAt, updatedAt: c.updatedAt, isEvicted: true)),
                                  for: name, in: Self.db)
                    }
                }
                return evicted
            }
        }
    }

    // MARK: - Encoding

    /// version 1 | flags (1 evicted, 2 has token) | store uuid (16) | token (8) | registered (8) | updated (8)
    static func encode(_ c: Consumer) -> [UInt8] {
        var out: [UInt8] = [1, (c.isEvicted ? 1 : 0) | (c.token != nil ? 2 : 0)]
        let uuid = c.token?.storeID.uuid ?? UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)).uuid
        withUnsafeBytes(of: uuid) { out += $0 }
        withUnsafeBytes(of: (c.token?.value ?? 0).littleEndian) { out += $0 }
        withUnsafeBytes(of: c.registeredAt.timeIntervalSince1970.bitPattern.littleEndian) { out += $0 }
        withUnsafeBytes(of: c.updatedAt.timeIntervalSince1970.bitPattern.littleEndian) { out += $0 }
        return out
    }

    static func decode(_ name: String, _ b: [UInt8]) throws -> Consumer {
        guard b.count == 42, b[0] == 1 else {
            throw StoreError(.notAStore, "token registry entry for '\(name)' is corrupt (\(b.count) bytes)")
        }
        func u64(_ at: Int) -> UInt64 { b[at..<(at + 8)].reversed().reduce(0) { $0 << 8 | UInt64($1) } }
        let uuid = UUID(uuid: (b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15], b[16], b[17]))
        let token = b[1] & 2 != 0 ? HistoryToken(storeID: uuid, value: Int64(bitPattern: u64(18))) : nil
        return Consumer(name: name, token: token,
                        registeredAt: Date(timeIntervalSince1970: Double(bitPattern: u64(26))),
                        updatedAt: Date(timeIntervalSince1970: Double(bitPattern: u64(34))),
                        isEvicted: b[1] & 1 != 0)
    }
}

extension TokenRegistry {
    /// Runs `body` inside a registry read transaction (tests: a process killed in here must not
    /// leave a stuck reader slot).
    public func holdReadTransactionForTesting(_ body: () throws -> Void) throws {
        try StoreError.wrapLMDB { try environment.read { t in _ = try t.all(in: "consumers"); try body() } }
    }

    /// Reader slots in use, live or stale.
    public var readerSlotsInUse: Int { environment.readerSlotsInUse() }

    /// Clears the reader slots of dead processes; returns how many.
    public func clearStaleReaders() throws -> Int { try StoreError.wrapLMDB { try environment.clearStaleReaders() } }
}
