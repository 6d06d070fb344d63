import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// A token names one transaction forever (invariant 2), also after `Store.sqlite` is put back to
/// an older copy (a backup restore) or loses its last commits (a power loss that the token
/// registry survived). Such a store would hand out again the token numbers of the transactions it
/// lost, and a consumer that merged the lost ones would take the new ones for merged.
///
/// What the store forgot, the token registry remembers: the highest token any consumer merged or
/// any target saw (``TokenRegistry/highWater(storeID:)``). When a process opens both and finds the
/// registry ahead of the store, ``Container/adoptHighWater(_:)`` records the numbers in between as
/// lost and moves the sequence past them with one transaction of author ``restoreAuthor``. From
/// then on a token in a lost range is `.historyExpired` (its holder reloads in full), and no number
/// is ever given twice. The check runs where a process opens the store and the registry, never per
/// save.
extension Container {
    /// The author of the transaction that marks a restore.
    public static let restoreAuthor = "SharedStore"
    /// Its context name.
    public static let restoreContext = "store.restored"

    /// Token numbers that named transactions this store has since lost, oldest first.
    ///
    /// - Throws: ``StoreError`` when the store cannot be read: `.modelOutdated` after another
    ///   process migrated it, `.busy`, `.storage`. `.notAStore` when the store's record of lost
    ///   tokens is damaged.
    public func lostTokenRanges() throws -> [ClosedRange<Int64>] {
        try read { s in try lostRanges(s) }
    }

    func lostRanges(_ s: TransactionSQL) throws -> [ClosedRange<Int64>] {
        try s.historyMeta().lost.map(Self.parseLostRanges) ?? []
    }

    static func parseLostRanges(_ text: String) throws -> [ClosedRange<Int64>] {
        try text.split(separator: ",").map { part in
            let ends = part.split(separator: "-")
            guard ends.count == 2, let lo = Int64(ends[0]), let hi = Int64(ends[1]), lo >= 1, lo <= hi else {
                throw StoreError(
                    .notAStore,
                    "the store's record of lost tokens is damaged ('\(TextSafety.visible(String(part.prefix(40))))')")
            }
            return lo...hi
        }
    }

    /// Why `token` cannot be read after on this store's timeline, or nil when it can.
    func timelineProblem(_ value: Int64, newest: Int64, lost: [ClosedRange<Int64>]) -> String? {
        if let range = lost.first(where: { $0.contains(value) }) {
            return "token \(value) named a transaction this store lost when it was put back to an older copy "
                + "(tokens \(range.lowerBound)…\(range.upperBound)); reload in full"
        }
        if value > newest {
            return "token \(value) is ahead of this store's newest transaction \(newest): the store was put back to an "
                + "older copy or lost its last commits; reload in full"
        }
        return nil
    }

    /// Whether a token registry has held consumers of this store (``noteRegistryInUse()``).
    ///
    /// - Throws: ``StoreError`` when the store cannot be read: `.modelOutdated` after another
    ///   process migrated it, `.busy`, `.storage`.
    public func registryWasInUse() throws -> Bool {
        try read { s in try s.meta(.registryInUse) != nil }
    }

    /// Records, once, that a token registry holds consumers of this store: from then on an
    /// empty registry beside the store is a lost one, not a new one.
    ///
    /// - Throws: like any write: `.busy`, `.diskFull`, `.fileAccess`, `.storage`.
    public func noteRegistryInUse() throws {
        guard try !registryWasInUse() else { return }
        try write { s in try s.setMeta(.registryInUse, "1") }
    }

    /// Moves the token sequence past `highWater`, the highest token known elsewhere (the token
    /// registry) to have been handed out by this store. Does nothing when the store is there
    /// already. Otherwise, in one write transaction: the numbers after the store's newest
    /// transaction through `highWater` are recorded as lost, and a transaction of author
    /// ``restoreAuthor`` with no changes takes `highWater + 1`, so that the next save gets a number
    /// never used before and every consumer sees that the store changed.
    ///
    /// - Returns: the range recorded as lost, or nil.
    /// - Throws: `.tokenSpaceExhausted` when `highWater` leaves no number to use.
    @discardableResult
    public func adoptHighWater(_ highWater: Int64) throws -> ClosedRange<Int64>? {
        // The common case reads: no write lock taken by every process that opens the store.
        guard highWater > 0, highWater > (try read { s in try s.currentToken() }) else { return nil }
        // Its transaction takes highWater + 1, past the newest: the lease must cover it first.
        if highWater < Int64.max - 1 { try leaseCovering(highWater + 1) }
        let recorded = try write { s -> (ClosedRange<Int64>, Int64)? in
            let newest = try s.currentToken()
            guard highWater > newest else { return nil }
            guard highWater < Int64.max - 1 else {
                throw StoreError(
                    .tokenSpaceExhausted,
                    "token space exhausted: the registry holds token \(highWater); nothing was saved")
            }
            return ((newest + 1)...highWater, try recordLost(s, (newest + 1)...highWater))
        }
        guard let (range, token) = recorded else { return nil }
        noteToken(token)
        didCommit(HistoryToken(storeID: storeID, value: token))
        return range
    }

    /// Records `range` as lost and gives `range.upperBound + 1` to a transaction of author
    /// ``restoreAuthor`` with no changes, in the write transaction of `s`. Returns that token.
    func recordLost(_ s: TransactionSQL, _ range: ClosedRange<Int64>) throws -> Int64 {
        try Self.recordLost(s.c, range, after: try s.historyMeta().lost)
    }

    /// The same on a bare connection (a migration's transaction runs before a container
    /// exists); `after` is the store's record of lost ranges so far.
    static func recordLost(_ c: SQLiteConnection, _ range: ClosedRange<Int64>, after: String?) throws -> Int64 {
        let lost = try (after.map(parseLostRanges) ?? []) + [range]
        try SchemaSQL.insertEmptyTransaction(
            c, token: range.upperBound + 1, author: restoreAuthor, context: restoreContext)
        try SchemaSQL.setMeta(c, .lostTokens, lost.map { "\($0.lowerBound)-\($0.upperBound)" }.joined(separator: ","))
        return range.upperBound + 1
    }
}
