import Foundation
import SharedStoreCore
import SharedStoreLMDB
import SharedStoreSupport

/// What a clean did (or, in a dry run, would do).
public struct CleanReport: Sendable, Hashable {
    /// How many transactions were deleted (would be, in a dry run).
    public let deleted: Int
    /// History is deleted through this token (nil when nothing could be).
    public let through: HistoryToken?
    /// The live consumer that holds history back the most.
    public let oldestConsumer: String?
    /// Transactions left.
    public let remaining: Int
    /// Consumers evicted by this clean.
    public let evicted: [String]
    /// Ephemeral consumers (a live query's) dropped by this clean: their process is gone.
    public var gone: [String] = []
    /// Whether this was a dry run: nothing was deleted or evicted.
    public let dryRun: Bool
}

/// Deletes the history every live consumer has merged: Core Data's `deleteHistory(before:)`
/// run with the safe policy of invariant 4.
public enum HistoryCleaner {
    /// Cleans the history of `container`.
    ///
    /// Order of operations: (0) reconcile the store with the registry (a restored store moves its
    /// tokens past every known one); (1) evict consumers that are behind and not seen for
    /// `evictAfter` seconds, recorded in the registry so that their next sync reports expired;
    /// (2) take the minimum token over live consumers — one that never synced counts as needing
    /// everything; (3) delete through it in
    /// chunks of `chunkSize`, each its own short write transaction. Tokens only grow, so a
    /// minimum read in (2) stays safe while consumers advance during (3); a consumer that
    /// registers meanwhile loads in full on its first sync and needs no history. A crash in (3)
    /// leaves some chunks deleted and nothing any consumer needs.
    ///
    /// - Throws: ``StoreError`` when the store or the registry cannot be read or written
    ///   (`.registryDamaged`, `.busy`, `.storage`, …). What was deleted before stays deleted, and
    ///   it is never anything a live consumer needs.
    public static func clean(
        container: Container, registry: TokenRegistry, dryRun: Bool = false,
        evictAfter: TimeInterval? = nil, chunkSize: Int = 1000
    ) throws -> CleanReport {
        if let evictAfter {
            guard evictAfter.isFinite, evictAfter >= 0 else {
                throw StoreError(.invalidArgument, "evict-after must be a number of seconds ≥ 0")
            }
        }
        // A store put back to an older copy first moves its tokens past what the registry knows.
        try registry.reconcile(container)
        let current = try container.currentToken()
        // A process that is gone holds no history back with its live queries.
        let gone = try registry.goneEphemeral()
        if !dryRun { for name in gone { try registry.remove(name) } }
        let evicted = try evictAfter.map { try registry.evict(notSeenFor: $0, behind: current, dryRun: dryRun) } ?? []
        // A consumer whose token was lost in a restore reloads in full at its next sync; until
        // then it counts as needing everything, like one that never synced.
        let lost = try container.lostTokenRanges()
        // A dry run writes no eviction: leave out who would have been evicted.
        let minimum = try registry.minimum(storeID: container.storeID, excluding: Set(evicted + gone)) { value in
            value <= current.value && !lost.contains { $0.contains(value) }
        }
        let through: HistoryToken? = minimum.flatMap { m in
            m.value > 0 ? HistoryToken(storeID: container.storeID, value: min(m.value, current.value)) : nil
        }
        var deleted = 0
        if let through {
            if dryRun {
                deleted = try container.historyCount(through: through.value)
            } else {
                // The positions read above are on disk before anything is deleted by them: a
                // power loss must not keep the deletion and take back a consumer's advance.
                try registry.makeDurable()
                deleted = try container.deleteHistory(through: through, chunkSize: chunkSize)
            }
        }
        let total = try container.historyCount(through: nil)
        var report = CleanReport(
            deleted: deleted, through: through, oldestConsumer: minimum?.consumer,
            remaining: dryRun ? total - deleted : total, evicted: evicted, dryRun: dryRun)
        report.gone = gone
        return report
    }
}
