import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// Token leases: no token number is given twice across a power loss (invariant 2).
///
/// Under `synchronous=NORMAL` a commit is visible to every process before it is on disk: a
/// consumer may merge transaction 110, print it, or push it to the mirror, and a power loss then
/// takes the store back to 105. Without more, the next save would take 106 again, and 106–110 would
/// name two different transactions. The token registry does not close the gap: its last advance may
/// be lost with the same power loss.
///
/// So a store leases token numbers ahead of its saves, durably. `ss_meta` holds `token_lease`,
/// `THROUGH BOOT`: no save takes a token above THROUGH until a synced commit (the WAL is fsynced,
/// and with it every commit before it) has moved THROUGH on by ``leaseSpan``; BOOT is the boot in
/// which that commit was made. The first write after a reboot (BOOT differs) records the numbers
/// after the store's newest transaction through THROUGH as lost (see ``Container/recordLost(_:_:)``)
/// and goes on after them: a token that a process saw before the power loss and the store then lost
/// reads as lost (its holder reloads in full), and is never given again. A reboot without a loss
/// costs at most ``leaseSpan`` numbers and one empty transaction.
///
/// The price is one synced commit per ``leaseSpan`` saves, and one read of `ss_meta` in a write
/// transaction that follows another process's commit.
extension Container {
    /// How many token numbers a synced commit leases ahead.
    public static let leaseSpan: Int64 = 1024

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

    /// Whether the write transaction of `s` must stop before it gives a token: the lease runs
    /// out, or the store has not been checked since a reboot. `othersCommitted` says whether
    /// another connection committed since this one's last write (then the newest token is read).
    func leaseNeeded(_ s: TransactionSQL, othersCommitted: Bool) throws -> Bool {
        guard options.historyTracking, !options.inMemory else { return false }
        if leaseChecked.load(ordering: .relaxed) {
            if options.synchronous == .full { return false }
            if !othersCommitted, newestSeen.load(ordering: .relaxed) < leaseThrough.load(ordering: .relaxed) {
                return false
            }
        }
        let current = try s.currentToken()
        noteToken(current)
        let stored = Self.parseLease(try s.meta(.tokenLease))
        guard let lease = stored, lease.boot == Self.bootID else {
            // No lease taken in this boot. Numbers leased in an earlier one may have been seen
            // and lost: recorded as lost before any is given again.
            if let stored, stored.through > current { return true }
            if options.synchronous == .full {
                leaseChecked.store(true, ordering: .relaxed)
                return false
            }
            return true
        }
        leaseThrough.store(lease.through, ordering: .relaxed)
        leaseChecked.store(true, ordering: .relaxed)
        // A lease at the largest token cannot move on: the save fails by itself (token space).
        return options.synchronous == .normal && current >= lease.through && lease.through < Int64.max
    }

    /// Takes a new lease in a commit of its own, synced whatever the store's `synchronous` level;
    /// after a reboot, first records the numbers the old lease covered beyond the newest token as
    /// lost. Runs on the writer connection outside any transaction.
    func extendLease(_ c: SQLiteConnection) throws {
        let normal = options.synchronous == .normal
        if normal { try SchemaSQL.setSynchronous(c, .full) }
        defer { if normal { try? SchemaSQL.setSynchronous(c, .normal) } }
        let marked: Int64? = try c.writeTransaction {
            let s = TransactionSQL(c: c, container: self)
            let current = try s.currentToken()
            var next = current
            var marked: Int64?
            if let lease = Self.parseLease(try s.meta(.tokenLease)), lease.boot != Self.bootID,
                lease.through > current
            {
                guard lease.through < Int64.max - 1 else {
                    throw StoreError(
                        .tokenSpaceExhausted, "token space exhausted: the store leased token \(lease.through)")
                }
                next = try recordLost(s, (current + 1)...lease.through)
                marked = next
            }
            let (through, overflow) = next.addingReportingOverflow(Self.leaseSpan)
            let lease = overflow ? Int64.max : through
            try s.setMeta(.tokenLease, "\(lease) \(Self.bootID)")
            leaseThrough.store(lease, ordering: .relaxed)
            return marked
        }
        leaseChecked.store(true, ordering: .relaxed)
        if let marked {
            noteToken(marked)
            didCommit(HistoryToken(storeID: storeID, value: marked))
        }
    }

    /// The lease in a migration's transaction (a migration runs when a store opens, before its
    /// container exists, and records a transaction): after a reboot, the numbers the old lease
    /// covered beyond the newest token are recorded as lost first, and the lease then covers the
    /// migration's own token. The caller commits the transaction synced.
    static func leaseForMigration(_ c: SQLiteConnection, meta: [String: String]) throws {
        var current = try SchemaSQL.newestToken(c)
        if let lease = parseLease(meta[MetaKey.tokenLease.rawValue]), lease.boot != bootID, lease.through > current {
            guard lease.through < Int64.max - 1 else {
                throw StoreError(.tokenSpaceExhausted, "token space exhausted: the store leased token \(lease.through)")
            }
            current = try recordLost(c, (current + 1)...lease.through, after: meta[MetaKey.lostTokens.rawValue])
        }
        let (through, overflow) = current.addingReportingOverflow(1 + leaseSpan)
        try SchemaSQL.setMeta(c, .tokenLease, "\(overflow ? Int64.max : through) \(bootID)")
    }
}
