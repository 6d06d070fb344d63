import Dispatch
import Foundation
import SharedStoreSQLite
import SharedStoreSupport
import Synchronization

/// Token leases: no token number is given twice across a power loss (invariant 2).
///
/// Under `synchronous=NORMAL` a commit is visible to every process before it is on disk: a
/// consumer may merge transaction 110, print it, or push it to the mirror, and a power loss then
/// takes the store back to 105. Without more, the next save would take 106 again, and 106–110 would
/// name two different transactions. The token registry does not close the gap: its last advance may
/// be lost with the same power loss.
///
/// So a store leases token numbers ahead of its saves, durably. `ss_meta` holds `token_lease`,
/// `THROUGH BOOT`: no save takes a token above THROUGH; BOOT is the boot in which the lease was
/// taken. The first write after a reboot (BOOT differs) records the numbers after the store's
/// newest transaction through THROUGH (or through the lease taken ahead, below, when larger) as
/// lost (see ``Container/recordLost(_:_:)``) and goes on after them: a token that a process saw
/// before the power loss and the store then lost reads as lost (its holder reloads in full), and
/// is never given again. A reboot without a loss costs at most two ``leaseSpan``s of numbers and
/// one empty transaction.
///
/// A lease is moved on before it runs out, and no process holds the write lock while the disk
/// syncs it. Once half of the lease is used, a write transaction also records the next lease,
/// `token_lease_ahead` = THROUGH + ``leaseSpan``, and commits without a sync; after the commit the
/// process syncs the store's WAL file, opened with the store, on a queue of its own (every
/// commit before the sync is then on disk, or a checkpoint that copied it had synced the database
/// file) and from then on may give tokens through the lease ahead. Its next write transaction
/// makes it the lease for every process. A power loss before the sync finished leaves a store
/// whose larger lease covers every token given; each commit keeps the larger of the two from
/// going down. Only when a lease runs out before the sync ends (a disk slower than
/// ``leaseSpan`` / 2 saves, or a sync failed once) does a save take the lease in a commit synced
/// under the write lock, as every lease was taken before.
///
/// The price is one sync of the WAL off the write lock per ``leaseSpan`` saves, and one read of
/// `ss_meta` in a write transaction that follows another process's commit or comes in the second
/// half of a lease until the next one is in force.
extension Container {
    /// How many token numbers a synced commit leases ahead.
    public static let leaseSpan: Int64 = 4096

    /// The boot this process runs in: `$SHAREDSTORE_BOOT_ID` when set and not empty (tests that
    /// simulate a power loss and a reboot set it; a value that is not a plain id is used by its
    /// hash), else the kernel's `/proc/sys/kernel/random/boot_id`, else the boot time in
    /// `/proc/stat` (`btime-N`), else `unknown` (then a power loss is not told from a restart:
    /// README, "Power loss").
    public static let bootID: String = {
        if let id = ProcessInfo.processInfo.environment["SHAREDSTORE_BOOT_ID"], !id.isEmpty {
            return isBootID(id) ? id : "env-" + String(fnv1a(id), radix: 16)
        }
        let text = (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)) ?? ""
        let id = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if isBootID(id) { return id }
        let stat = (try? String(contentsOfFile: "/proc/stat", encoding: .utf8)) ?? ""
        if let line = stat.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }),
            let time = Int64(line.dropFirst(6).trimmingCharacters(in: .whitespaces))
        {
            return "btime-\(time)"
        }
        return "unknown"
    }()

    private static func fnv1a(_ text: String) -> UInt64 {
        text.utf8.reduce(0xcbf2_9ce4_8422_2325 as UInt64) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
    }

    private static func isBootID(_ id: String) -> Bool {
        !id.isEmpty && id.count <= 64
            && id.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || $0 == "-" }
    }

    /// A lease as stored: nil when there is none or it is unreadable (a new lease replaces it).
    static func parseLease(_ text: String?) -> (through: Int64, boot: String)? {
        guard let parts = text?.split(separator: " "), parts.count == 2, let through = Int64(parts[0]),
            through >= 0
        else { return nil }
        return (through, String(parts[1]))
    }

    /// The number through which a store's numbers count as leased after a reboot: the larger of
    /// its lease and the lease taken ahead, whatever boot each was taken in.
    static func leased(_ lease: (through: Int64, boot: String)?, _ ahead: (through: Int64, boot: String)?) -> Int64 {
        max(lease?.through ?? 0, ahead?.through ?? 0)
    }

    /// What the write transaction of `s` must do about the lease before it gives a token: go on,
    /// stop and take a lease in a synced commit (the lease runs out, or the store has not been
    /// checked since a reboot), or go on and sync the lease ahead after its commit.
    /// `othersCommitted` says whether another connection committed since this one's last write
    /// (then the newest token is read).
    func leaseCheck(_ s: TransactionSQL, othersCommitted: Bool) throws -> LeaseCheck {
        guard options.historyTracking, !options.inMemory else { return .go }
        let durable = options.synchronous == .full
        if leaseChecked.load(ordering: .relaxed) {
            if durable { return .go }
            let through = leaseThrough.load(ordering: .relaxed)
            if !othersCommitted, newestSeen.load(ordering: .relaxed) < through - Self.leaseSpan / 2,
                leaseAhead.synced.load(ordering: .relaxed) <= through
            {
                return .go
            }
        }
        let current = try s.currentToken()
        noteToken(current)
        let stored = Self.parseLease(try s.meta(.tokenLease))
        let ahead = Self.parseLease(try s.meta(.tokenLeaseAhead))
        // A lease ahead of an earlier boot beyond the newest token: a reboot was met by a
        // version of the library that does not read it. Its numbers are recorded as lost too.
        let staleAhead = ahead.map { $0.boot != Self.bootID && $0.through > current } ?? false
        guard let lease = stored, lease.boot == Self.bootID, !staleAhead else {
            // No lease taken in this boot. Numbers leased in an earlier one may have been seen
            // and lost: recorded as lost before any is given again.
            if Self.leased(stored, ahead) > current { return .extend }
            if durable {
                leaseChecked.store(true, ordering: .relaxed)
                return .go
            }
            return .extend
        }
        leaseChecked.store(true, ordering: .relaxed)
        var through = lease.through
        // The lease ahead in the store, once this process synced a commit of it (or of a larger
        // one): in force here, and from this transaction on for every process (each commit keeps
        // the larger lease from going down). Never a number only this process remembers: a store
        // put back to an older copy holds no such lease.
        if !durable, let ahead, ahead.boot == Self.bootID, ahead.through > through,
            leaseAhead.synced.load(ordering: .relaxed) >= ahead.through
        {
            try s.setMeta(.tokenLease, "\(ahead.through) \(Self.bootID)")
            through = ahead.through
        }
        leaseThrough.store(through, ordering: .relaxed)
        // A lease at the largest token cannot move on: the save fails by itself (token space).
        guard !durable, through < Int64.max else { return .go }
        if current >= through { return .extend }
        guard current >= through - Self.leaseSpan / 2, !leaseAhead.running.load(ordering: .acquiring),
            !leaseAhead.failed.load(ordering: .relaxed)
        else { return .go }
        return try recordLeaseAhead(s, through: through, stored: ahead)
    }

    /// Records the lease after `through` in the write transaction of `s` (`stored`, when the
    /// store holds one of this boot, else THROUGH + ``leaseSpan``), to be synced after its commit.
    private func recordLeaseAhead(_ s: TransactionSQL, through: Int64, stored ahead: (through: Int64, boot: String)?)
        throws -> LeaseCheck
    {
        let target: Int64
        // A lease ahead another process recorded (one span at most past the lease: a larger one
        // is damaged or planted, and replaced) is written again in this commit, whose pages the
        // sync then covers (the other's pages may have failed to reach the disk).
        if let ahead, ahead.boot == Self.bootID, ahead.through > through, ahead.through - through <= Self.leaseSpan {
            target = ahead.through
        } else {
            let (next, overflow) = through.addingReportingOverflow(Self.leaseSpan)
            target = overflow ? Int64.max : next
        }
        // Until this commit is synced, nothing past the lease is known to be on disk (a larger
        // lease this process synced before is no longer the store's, if it was put back).
        leaseAhead.synced.store(through, ordering: .relaxed)
        try s.setMeta(.tokenLeaseAhead, "\(target) \(Self.bootID)")
        return .ahead(target)
    }

    /// Makes the lease ahead `through`, recorded by the commit that just ended, durable: syncs the
    /// WAL through the descriptor the container opened with the store (Linux reports an error
    /// writing pages back to every descriptor open when it happens, and to one opened later only
    /// if nobody saw it first; a checkpoint that copied the commit to the database file and
    /// restarted the WAL synced the database first). Runs on a queue of its own, never under the
    /// write lock and never in the way of the async calls; one at a time per container. A sync
    /// that fails ends leases ahead for the container: each lease then runs out and is taken in a
    /// commit synced through SQLite's own descriptor.
    func syncLeaseAhead(_ through: Int64) {
        let ahead = leaseAhead
        guard ahead.running.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        leaseSyncQueue.async {
            let fd = ahead.wal.load(ordering: .relaxed)
            if fd >= 0, fdatasync(fd) == 0 {
                _ = ahead.synced.max(through, ordering: .relaxed)
            } else {
                ahead.failed.store(true, ordering: .relaxed)
            }
            ahead.syncs.add(1, ordering: .relaxed)
            ahead.running.store(false, ordering: .releasing)
        }
    }

    /// Waits, `seconds` at most, until every sync of a lease ahead queued so far has ended; whether
    /// they did. The wait is on the queue itself (a mark queued behind them), not a poll (tests).
    func leaseSyncsEnded(within seconds: Double) -> Bool {
        let done = DispatchSemaphore(value: 0)
        leaseSyncQueue.async { done.signal() }
        return done.wait(timeout: .now() + seconds) == .success
    }

    /// Opens the regular file at `path` to sync it (never a symlink, a FIFO or a directory in
    /// its place, never waiting): the descriptor, or minus the error number.
    static func openForSync(_ path: String) -> Int32 {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return -errno }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let error = errno
            close(fd)
            return -error
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            return -EINVAL
        }
        return fd
    }

    /// Takes a new lease in a commit of its own, synced whatever the store's `synchronous` level;
    /// after a reboot, first records the numbers the old leases covered beyond the newest token as
    /// lost. Runs on the writer connection outside any transaction.
    func extendLease(_ c: SQLiteConnection, covering token: Int64 = 0) throws {
        let normal = options.synchronous == .normal
        if normal { try SchemaSQL.setSynchronous(c, .full) }
        defer { if normal { try? SchemaSQL.setSynchronous(c, .normal) } }
        let (marked, lease): (Int64?, Int64) = try c.writeTransaction {
            let s = TransactionSQL(c: c, container: self)
            let current = try s.currentToken()
            var next = current
            var marked: Int64?
            let stored = Self.parseLease(try s.meta(.tokenLease))
            let ahead = Self.parseLease(try s.meta(.tokenLeaseAhead))
            let leased = Self.leased(stored, ahead)
            let stale = stored?.boot != Self.bootID || (ahead.map { $0.boot != Self.bootID } ?? false)
            if stale, leased > current {
                guard leased < Int64.max - 1 else {
                    throw StoreError(.tokenSpaceExhausted, "token space exhausted: the store leased token \(leased)")
                }
                next = try recordLost(s, (current + 1)...leased)
                marked = next
            }
            let (through, overflow) = max(next, token).addingReportingOverflow(Self.leaseSpan)
            // Never below a lease of this boot (another process may have taken a larger one since
            // this one found the lease used up, or covered a number it is about to give).
            let lease = max(overflow ? Int64.max : through, stored.map { $0.boot == Self.bootID ? $0.through : 0 } ?? 0)
            try s.setMeta(.tokenLease, "\(lease) \(Self.bootID)")
            if let ahead, ahead.through <= lease { try SchemaSQL.deleteMeta(c, .tokenLeaseAhead) }
            return (marked, lease)
        }
        // Only once committed: a commit that failed leaves the lease as it was.
        leaseThrough.store(lease, ordering: .relaxed)
        leaseAhead.syncedCommits.add(1, ordering: .relaxed)
        leaseChecked.store(true, ordering: .relaxed)
        if let marked {
            noteToken(marked)
            didCommit(HistoryToken(storeID: storeID, value: marked))
        }
    }

    /// Makes sure the lease covers `token`, a number a write is about to give past the newest
    /// (``adoptHighWater(_:)``), with a synced commit when it does not.
    func leaseCovering(_ token: Int64) throws {
        // The lease is the store's: a container that records no history gives this number too.
        guard !options.inMemory, options.synchronous == .normal else { return }
        let stored = try read { s in Self.parseLease(try s.meta(.tokenLease)) }
        if let stored, stored.boot == Self.bootID, stored.through >= token { return }
        let path = storePath
        try writer.withConnection { c in try StoreError.wrap(path: path) { try extendLease(c, covering: token) } }
    }

    /// The lease in a migration's transaction (a migration runs when a store opens, before its
    /// container exists, and records a transaction): after a reboot, the numbers the old lease
    /// covered beyond the newest token are recorded as lost first, and the lease then covers the
    /// migration's own token. The caller commits the transaction synced.
    static func leaseForMigration(_ c: SQLiteConnection, meta: [String: String]) throws {
        var current = try SchemaSQL.newestToken(c)
        let lease = parseLease(meta[MetaKey.tokenLease.rawValue])
        let ahead = parseLease(meta[MetaKey.tokenLeaseAhead.rawValue])
        let leased = Self.leased(lease, ahead)
        if lease?.boot != bootID || (ahead.map { $0.boot != bootID } ?? false), leased > current {
            guard leased < Int64.max - 1 else {
                throw StoreError(.tokenSpaceExhausted, "token space exhausted: the store leased token \(leased)")
            }
            current = try recordLost(c, (current + 1)...leased, after: meta[MetaKey.lostTokens.rawValue])
        }
        let (through, overflow) = current.addingReportingOverflow(1 + leaseSpan)
        let next = max(overflow ? Int64.max : through, lease.map { $0.boot == bootID ? $0.through : 0 } ?? 0)
        try SchemaSQL.setMeta(c, .tokenLease, "\(next) \(bootID)")
        if let ahead, ahead.through <= next { try SchemaSQL.deleteMeta(c, .tokenLeaseAhead) }
    }
}

/// What a write transaction does about the token lease (``Container/leaseCheck(_:othersCommitted:)``).
enum LeaseCheck: Equatable {
    /// Gives its token: the lease covers it.
    case go
    /// Stops before it gives a token, takes a lease in a synced commit and starts again.
    case extend
    /// Gives its token, records the lease ahead through the number given, and after its commit
    /// syncs the WAL.
    case ahead(Int64)
}

/// The queue that syncs leases taken ahead, apart from the async calls' queue (a slow disk
/// holds up the syncs, never the calls).
private let leaseSyncQueue = DispatchQueue(label: "sharedstore.lease-sync", qos: .utility)

/// A container's lease taken ahead of need (Container+Lease.swift), shared with the queue that
/// syncs it.
final class LeaseAhead: Sendable {
    /// Whether a sync of a lease ahead runs.
    let running = Atomic<Bool>(false)
    /// The largest lease ahead this process synced after its commit: in force in this boot.
    let synced = Atomic<Int64>(0)
    /// Whether a sync of a lease ahead failed: no other is tried (a write-back error may have
    /// dropped pages of commits before it).
    let failed = Atomic<Bool>(false)
    /// How many syncs of a lease ahead ran, and how many leases were taken in a synced commit
    /// under the write lock (tests and the benchmark read them).
    let syncs = Atomic<Int>(0)
    let syncedCommits = Atomic<Int>(0)
    /// The store's WAL, opened with the container and kept (-1 when it could not be opened:
    /// then no lease is taken ahead).
    let wal = Atomic<Int32>(-1)

    /// Opens the WAL at `path`, once: a container whose WAL cannot be opened as a regular file
    /// takes every lease in a synced commit.
    func open(_ path: String) {
        let fd = Container.openForSync(path)
        guard fd >= 0, wal.compareExchange(expected: -1, desired: fd, ordering: .relaxed).exchanged else {
            if fd >= 0 { close(fd) } else { failed.store(true, ordering: .relaxed) }
            return
        }
    }

    deinit {
        let fd = wal.load(ordering: .relaxed)
        if fd >= 0 { close(fd) }
    }
}
