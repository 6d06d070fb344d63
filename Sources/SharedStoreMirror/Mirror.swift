import Foundation
import SharedStoreCore
import SharedStoreLMDB
import SharedStorePostgres
import SharedStoreSupport
import SharedStoreSync

/// What one round of a mirror did: `storectl mirror`'s line.
public struct MirrorRound: Sendable, Hashable {
    /// Local transactions uploaded (new to the server) and remote ones applied here.
    public var pushed = 0
    public var pulled = 0
    /// Transactions not yet mirrored after the round: local ones not uploaded plus remote ones
    /// not applied (nil: not known, the server was unreachable).
    public var lag: Int64?
    /// The server, or why it could not be reached.
    public var server = ""
    public var error: String?
    /// Objects this round made the state the server's log gives them, once it settled (a
    /// collision met here in another order than the server's; see ``Mirror/round()``).
    public var reconciled = 0
    /// Objects that still differ from the log's state after that, other than this store's own
    /// unpushed changes (`storectl mirror --verify` names them).
    public var unreconciled = 0
    /// Why the store could not take the log's state (nil: it could, or did not have to).
    public var reconcileError: String?
    /// Objects this round took from the server's snapshot (a store that joined, or one the log
    /// was pruned past), and whether it made a snapshot.
    public var bootstrapped = 0
    public var snapshotMade = false
    /// Rows that could not be applied here, or local changes that could not go up, still
    /// quarantined after the round (``Mirror/retryQuarantined()`` applies them again).
    package var quarantined: [MirrorQuarantine] = []

    public init(pushed: Int = 0, pulled: Int = 0, lag: Int64? = nil, server: String = "", error: String? = nil) {
        self.pushed = pushed
        self.pulled = pulled
        self.lag = lag
        self.server = server
        self.error = error
    }

    /// How many rows stay quarantined after the round.
    public var quarantinedCount: Int { quarantined.count }

    /// Each server row still quarantined after the round, as the error that keeps it out
    /// (`.malformedRow`, reason ``MirrorError/Reason/badRow(sequence:problem:)``: its sequence
    /// and what is wrong with it). Local changes that could not go up are not server rows and are
    /// not listed here (``quarantinedCount`` counts them too).
    ///
    /// For example:
    /// ```swift
    /// for problem in try mirror.round().badRows {
    ///     if case .badRow(let sequence, let why)? = problem.reason { print(sequence, why) }
    /// }
    /// ```
    public var badRows: [MirrorError] {
        quarantined.compactMap { q in
            q.sequence.map { sequence in
                // The quarantine keeps the whole message; the reason holds what is wrong, as
                // MirrorPayload.decode says it.
                let prefix = "server transaction \(sequence) is malformed: "
                let problem = q.reason.hasPrefix(prefix) ? String(q.reason.dropFirst(prefix.count)) : q.reason
                return MirrorError(q.reason, code: .malformedRow, reason: .badRow(sequence: sequence, problem: problem))
            }
        }
    }

    public var json: JSONValue {
        var fields: [(String, JSONValue)] = [
            ("pushed", .number(Double(pushed))), ("pulled", .number(Double(pulled))),
            ("lag", lag.map { .number(Double($0)) } ?? .null), ("server", .string(server)),
        ]
        if let error { fields.append(("error", .string(error))) }
        if reconciled > 0 { fields.append(("reconciled", .number(Double(reconciled)))) }
        if unreconciled > 0 { fields.append(("unreconciled", .number(Double(unreconciled)))) }
        if let reconcileError { fields.append(("reconcile_error", .string(reconcileError))) }
        if bootstrapped > 0 { fields.append(("bootstrapped", .number(Double(bootstrapped)))) }
        if snapshotMade { fields.append(("snapshot", .bool(true))) }
        if !quarantined.isEmpty { fields.append(("quarantined", .array(quarantined.map(\.json)))) }
        return .object(fields)
    }
}

/// Mirrors one store through a PostgreSQL server, as Core Data's CloudKit mirroring does
/// through CloudKit, on persistent history (issue 14).
///
/// - It is a consumer of the token registry (``consumer``): the cleaner keeps what it has not
///   pushed.
/// - **Push** uploads each local transaction after its token (its own imports aside) with the
///   changed objects' current state, keyed by (store id, token): repeated after a crash, an
///   upload is not doubled.
/// - **Pull** applies the other stores' transactions in the server's order, each in one local
///   transaction of author ``author`` (context `mirror.import`) that also moves the pull cursor:
///   applied exactly once, even across kill -9. Local targets see them like any other save.
///
/// Every machine applies the same order; an object's state is the last one in that order (a
/// change not pushed yet is pushed later, so it wins later). A delete and an update of the same
/// object: the later in the server's order wins — an update after a delete brings the object
/// back, with the same global id. Two objects that collide on a uniqueness constraint become
/// one, the smaller global id, on every machine.
public final class Mirror {
    public static let author = MirrorKeys.author
    public static let consumer = "Mirror"
    public static let contextName = "mirror.import"

    public let container: Container
    public let registry: TokenRegistry
    private(set) var server: MirrorServer
    /// Where pulls read: the server, or a standby of it.
    private(set) var reader: MirrorServer
    /// The largest server row, in bytes, this mirror reads: a larger one is quarantined unread
    /// (``MirrorError/Code/malformedRow``, naming its size), so that rows a member planted
    /// cannot exhaust this machine's memory; raised, the row is read by the next
    /// ``retryQuarantined()``. Reading a row takes about three times its size. The default is
    /// an eighth of this machine's memory (PostgreSQL's own limit, 1 GB, on most).
    public var rowLimit: Int64 {
        get { server.rowLimit }
        set {
            server.rowLimit = newValue
            reader.rowLimit = newValue
        }
    }

    /// An eighth of this machine's memory: the default ``rowLimit``.
    public static var defaultRowLimit: Int64 { Int64(clamping: ProcessInfo.processInfo.physicalMemory / 8) }
    /// Whether pulls read from another server than uploads go to (`--read-from`).
    let readsElsewhere: Bool
    /// Asked between batches: true ends the round early (a follower asked to stop); what was
    /// done is kept, and the next round goes on from there.
    public var isCancelled: @Sendable () -> Bool = { false }
    /// Transactions per upload or pull batch.
    public var batchSize = 500
    /// Told how many of a full upload's batches are up, of how many, after each (a full upload
    /// after an eviction or a restore sends every object: a progress line shows it).
    public var fullUploadProgress: ((_ done: Int, _ total: Int) -> Void)?
    /// How far the server's order may run past the stored pull cursor before it is stored again
    /// without an import (a store that only uploads).
    public var cursorStride: Int64 = 10_000
    /// Rows the log must grow by past the newest snapshot before this mirror makes one (and at
    /// least as many as that snapshot holds objects); 0: it never makes one.
    public var snapshotEvery: Int64 = 10_000
    /// Seconds between two reports of this store's pull cursor to the server (the horizon waits
    /// for the lowest reported cursor of the mirrors seen lately).
    public var cursorReportInterval: TimeInterval = 10
    var lastCursorReport = Date.distantPast
    /// The next round makes a store the log pruned past take the server's state even where that
    /// drops changes of its own that did not go up (``MirrorError/Code/behindHorizon``).
    public var rejoinDiscardingUnpushed = false
    /// Local history after this token holds no unpushed change (see ``Container/mirrorImport``).
    var cleanThrough: Int64 = 0
    /// The server sequence read through: remote transactions up to it are applied, this store's
    /// own read past (in memory; the pull cursor in the store moves with each import).
    var scanned: Int64 = 0
    /// The server sequence of this store's last upload of each object, after the pull cursor:
    /// a remote change of one of them ordered before it is older, and is not applied.
    var uploaded: [UUID: Int64] = [:]
    /// The same by entity: the sequence of this store's last upload of an object of each.
    var uploadedEntities: [String: Int64] = [:]
    /// Rows of pushed objects not yet in `ss_mirror_ids`: written by the next import (a write
    /// of the store per push would slow the app's saves), or once 10,000 wait. Lost in a crash,
    /// they are read back from this store's uploads after the cursor (their `originKey`).
    var pendingIDs: [(UUID, Int64)] = []
    /// Tokens of this store's own rows on the server that this store no longer holds (it was
    /// put back to an older copy): pulled back like another store's rows.
    var reclaim: Set<Int64> = []
    /// The next push compares every object with the server's state and uploads what differs
    /// (history to push is gone, lacks global ids, or reuses tokens the server holds).
    var needsFullUpload = false
    /// The snapshot the last replay of the server's state started from (nil: the whole log).
    public internal(set) var replayedFrom: MirrorSnapshot?
    /// The newest local token the last full upload compared: changes through it went up.
    var comparedThrough: Int64 = 0
    /// A restored store pulling back its lost rows (see ``notePullBack(through:reused:)``):
    /// the sequence to pull through before anything is pushed, and the restore floor.
    var pullBack: (through: Int64, floor: Int64)?
    /// When a reconciliation that has to be tried again may be (see ``reconcileIfNeeded(settled:)``).
    var reconcileNotBefore = Date.distantPast
    /// One mirror per store at a time (a lock in the group directory, released by the kernel
    /// when the process dies): two would not know of each other's uploads.
    private let lock: FileRangeLock

    /// Prepares the store (the mirror's tables) and the server's schema, and registers the
    /// mirror as a consumer. `space` is the space the store mirrors into (nil: the server's log
    /// outside any space, which the first mirror makes); a store mirrors into one log for good.
    /// `readConnection`, when given, is where pulls read (a streaming standby: the primary takes
    /// the uploads and the wake-ups; a standby that lags only makes pulls later, never skipped).
    ///
    /// - Throws: ``MirrorError`` when another process mirrors this store, the store keeps no
    ///   history, mirrors into another log (``MirrorError/Code/otherLog``), or this role may not
    ///   use the space (``MirrorError/Code/accessDenied``); ``PostgresError`` when the server
    ///   cannot be reached or its tables are newer than this build.
    public init(
        container: Container, registry: TokenRegistry, connection: PostgresConnection, space: String? = nil,
        readConnection: PostgresConnection? = nil
    ) throws {
        guard !container.options.inMemory else { throw MirrorError("an in-memory store cannot be mirrored") }
        guard container.options.historyTracking else {
            throw MirrorError("history tracking is off for this store: a mirror pushes history, and there is none")
        }
        let path = PathName.directory(of: container.storePath) + "/mirror.lock"
        try GroupDirectory.prepareFile(path)
        // Another user able to write the lock file could take it and stop this store's mirror.
        var st = stat()
        if lstat(path, &st) == 0, st.st_mode & 0o022 != 0 || st.st_uid != geteuid() {
            throw MirrorError(
                "\(TextSafety.visible(path)) is mode \(String(st.st_mode & 0o777, radix: 8)) owned by uid "
                    + "\(st.st_uid): others could take the mirror's lock; "
                    + "make it yours and private (chmod 600) or remove it")
        }
        lock = try FileRangeLock(path: path)
        do {
            try lock.acquire(timeout: 0)
        } catch let busy as LockBusy {
            throw MirrorError(
                "another mirror runs on this store: \(busy.holder); one at a time", code: .busy,
                reason: .busy(holder: busy.holder))
        }
        self.container = container
        self.registry = registry
        server = try MirrorServer(connection: connection, space: space)
        reader = try readConnection.map { try MirrorServer(connection: $0, space: space) } ?? server
        server.rowLimit = Self.defaultRowLimit
        reader.rowLimit = Self.defaultRowLimit
        readsElsewhere = readConnection != nil
        try refuseForgottenSpace()
        do {
            try Self.mapAccess(server) { try server.prepare() }
        } catch let error as PostgresError where error.sqlState == "42501" && space == nil {
            throw PostgresError(
                sqlState: error.sqlState,
                message: error.message + " (the log outside any space is made by its first mirror and used by that "
                    + "role; a role granted a space mirrors with --space NAME)")
        }
        if readConnection != nil {
            let (log, read) = (try server.logID(), try Self.mapAccess(reader) { try reader.logID() })
            guard log == read else {
                throw MirrorError(
                    "the server pulls would read from (\(reader.connection.serverDescription)) holds another log than "
                        + "the one uploads go to: --read-from must name a standby of the same server", code: .otherLog)
            }
            try checkReadServer()
        }
        try container.prepareMirroring()
        try bindLog()
        try registry.register(Self.consumer)
        try Self.mapAccess(server) {
            // A log rewritten since this store pulled it is not this store's to compare with:
            // the round refuses (or rejoins), and nothing is sent from what it would skip.
            guard try rewrittenLog() == nil else { return }
            try recoverTimeline()
            try noteLostUploads()
        }
    }

    /// The space this store mirrors into (nil: the log outside any space).
    public var space: String? { server.space }

    /// Runs `body`, turning PostgreSQL's "permission denied" on a space into an error that names
    /// the role, the space and the fix (a role revoked meanwhile fails so at its next statement).
    static func mapAccess<T>(_ server: MirrorServer, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as PostgresError where error.sqlState == MirrorServer.movedState {
            throw MirrorError(error.message, code: .spaceMoved)
        } catch let error as PostgresError where error.sqlState == "42501" && server.space != nil {
            let denied = server.accessDenied()
            throw MirrorError(
                denied.message, code: .accessDenied,
                reason: .accessDenied(space: server.space ?? "", role: server.connection.user))
        }
    }

    public var serverDescription: String { server.connection.serverDescription }

    /// Starts receiving the server's wake-ups (``wait(timeout:wake:)``).
    public func listen() throws { try Self.mapAccess(server) { try server.listen() } }

    /// Waits up to `timeout` for an upload by another mirror, or for one of `wake` to become
    /// readable.
    public func wait(timeout: TimeInterval, wake: [Int32]) throws {
        _ = try server.connection.notifications(timeout: timeout, wake: wake)
    }

    /// Pushes, then pulls, until both are done; returns what it did and the lag after.
    public func round() throws -> MirrorRound {
        try Self.mapAccess(server) { try Self.mapAccess(reader) { try unmappedRound() } }
    }

    private func unmappedRound() throws -> MirrorRound {
        var round = MirrorRound(server: serverDescription)
        if rejoinDiscardingUnpushed, try rewrittenLog() != nil {
            round.bootstrapped = try takeRewrittenLogState()
            rejoinDiscardingUnpushed = false
        }
        try checkServerLog()
        // Seen before it pulls: a prune meanwhile keeps what it has not pulled (a newcomer or a
        // store back after long reports where it starts).
        try reportCursorIfDue()
        // Rejoining drops what this store did not push: the server's state comes first.
        if rejoinDiscardingUnpushed {
            round.bootstrapped = try bootstrapIfNeeded()
            rejoinDiscardingUnpushed = false
        }
        try refuseUnclearChanges()
        round.pushed = try push()
        round.bootstrapped += try bootstrapIfNeeded()
        round.pulled = try pull()
        // A pull that found unpushed history deleted meanwhile (an eviction during the round)
        // stopped: the full upload goes first, then the pull again.
        for _ in 0..<3 where needsFullUpload && !isCancelled() {
            round.pushed += try push()
            round.pulled += try pull()
        }
        // Moves the mirror's token past its own imports (and pushes what came meanwhile), so
        // that the cleaner is not held back by them.
        if round.pulled > 0 { round.pushed += try push() }
        let (local, remote) = try lagParts()
        round.lag = local + remote
        round.quarantined = try container.quarantinedMirrorRows()
        // Settled as far as the server goes (nothing left to pull): this store's own unpushed
        // changes are left alone.
        let (done, failure) = try reconcileIfNeeded(settled: remote == 0 && round.quarantined.isEmpty && !isCancelled())
        if let done {
            round.reconciled = done.written
            round.unreconciled = done.left - done.unpushed
            if done.written > 0 { round.pushed += try push() }
        }
        round.reconcileError = failure
        try reportCursorIfDue()
        if remote == 0 && !isCancelled() { round.snapshotMade = try snapshotIfDue() }
        return round
    }

    /// Runs `batch` until one reads fewer than ``batchSize`` rows; returns the sum of what they did.
    func untilShort(_ batch: () throws -> (read: Int, done: Int)) throws -> Int {
        var done = 0
        while true {
            let (read, n) = try batch()
            done += n
            if read < batchSize || isCancelled() { return done }
        }
    }

    /// Applies every remote transaction on the server after the pull cursor, in the server's
    /// order, ``batchSize`` rows at a time; returns how many it applied.
    @discardableResult
    public func pull() throws -> Int { try untilShort(pullBatch) }

    private func pullBatch() throws -> (read: Int, done: Int) {
        let cursor = try container.mirrorValue(MirrorKeys.pullCursor) ?? 0
        scanned = max(scanned, cursor)
        let (remote, through, read, first, last) = try reader.pull(
            after: scanned, for: container.storeID, reclaim: reclaim, limit: batchSize)
        // Rows after the cursor that are gone were pruned meanwhile (this store was counted gone):
        // nothing after them is applied; the next round starts from the snapshot.
        if first.map({ $0 > scanned + 1 }) ?? true, try reader.prunedThrough() > scanned {
            throw MirrorError(
                "the server pruned rows from \(scanned + 1) of its log while this store was pulling them: "
                    + "nothing after them was applied; the next round starts from the server's snapshot")
        }
        cleanThrough = max(cleanThrough, try pushedToken()?.value ?? 0)
        if let (_, floor) = pullBack {
            // Only what was saved after the restore is this copy's own unpushed change, and
            // what a full upload compared since went up. History of it the cleaner deleted
            // meanwhile is not taken as pushed: the import refuses, and a full upload goes first.
            cleanThrough = max(floor, comparedThrough)
        }
        var applied = 0
        do {
            for t in remote where try apply(t) { applied += 1 }
        } catch let error as StoreError where error.code == .historyExpired {
            // Unpushed history is gone: the pull stops here until a full upload went first.
            needsFullUpload = true
            return (0, applied)
        }
        // The last row read is the one this store knows the log by (``rewrittenLog()``).
        if let last {
            try container.setMirrorValues([
                (MirrorKeys.checkedSequence, last.sequence),
                (MirrorKeys.checkedRow, MirrorKeys.rowPrint(origin: last.origin, token: last.token)),
            ])
        }
        // Read through `through`: uploads of this store at or before it can no longer be newer
        // than anything left to pull.
        scanned = through
        try endPullBackIfDone(scanned: through)
        if !uploaded.isEmpty { uploaded = uploaded.filter { $0.value > through } }
        if !uploadedEntities.isEmpty { uploadedEntities = uploadedEntities.filter { $0.value > through } }
        // The stored cursor moves with imports; a store that mostly uploads reads past its own
        // rows without one. Stored every ``cursorStride`` of them, so that a restart reads back
        // at most that many of its own uploads (see init), however long it ran.
        if through - cursor >= cursorStride {
            try container.advanceMirrorCursor(to: through, ids: pendingIDs)
            pendingIDs = []
        }
        return (read, applied)
    }

    /// Applies one remote transaction; a row that cannot be applied is quarantined (the pull
    /// goes on past it). Returns whether it was applied.
    private func apply(_ t: MirrorTransaction) throws -> Bool {
        do {
            let (model, changes) = try decode(t)
            let result = try container.mirrorImport(
                sequence: t.sequence, changes: changes, uploaded: uploaded, uploadedEntities: uploadedEntities,
                unpushedAfter: cleanThrough,
                ids: pendingIDs, modelVersion: model, author: Self.author, contextName: Self.contextName)
            pendingIDs = []
            if !result.foundUnpushed, let token = result.token { cleanThrough = max(cleanThrough, token.value) }
            return result.applied
        } catch let error where Self.isRowProblem(error) {
            try container.quarantineMirrorRow(
                MirrorQuarantine(
                    sequence: t.sequence, origin: t.origin, token: t.token, reason: TextSafety.visible("\(error)"),
                    at: Date().timeIntervalSince1970), ids: pendingIDs)
            pendingIDs = []
            return false
        }
    }

    /// A payload's model version and changes.
    ///
    /// - Throws: ``MirrorError`` `.malformedRow` for a row that cannot be read, `.newerModel` for
    ///   one made by a newer model (this app must be updated to pull past it).
    func decode(_ t: MirrorTransaction) throws -> (model: Int, changes: [MirrorChange]) {
        if let size = t.withheld {
            let what =
                "it is \(size) bytes, past this machine's row limit of \(server.rowLimit) "
                + "(storectl mirror --max-row-mb): not read; raise the limit to apply it"
            throw MirrorError(
                "server transaction \(t.sequence) of \(t.author.map { "author '\(TextSafety.visible($0))', " } ?? "")"
                    + "origin \(t.origin.uuidString.lowercased()) is too large: \(what)", code: .malformedRow,
                reason: .badRow(sequence: t.sequence, problem: what))
        }
        let (model, changes) = try MirrorPayload.decode(t.payload, sequence: t.sequence)
        try checkModel(model, at: t.sequence, of: "server transaction \(t.sequence)")
        return (model, changes)
    }

    /// Throws ``MirrorError`` `.newerModel` when `model` (of `what`, at `sequence`) is newer
    /// than this app's.
    func checkModel(_ model: Int, at sequence: Int64, of what: String) throws {
        guard model > container.model.version else { return }
        throw MirrorError(
            "\(what) was made with model \(model), newer than this app's (\(container.model.version)): update the app "
                + "to pull further", code: .newerModel,
            reason: .newerModel(sequence: sequence, rowModel: model, appModel: container.model.version))
    }

    /// Whether `error` is a row's fault (quarantined) rather than the store's or the system's
    /// (busy, disk full, an outdated model: the round fails and is tried again).
    static func isRowProblem(_ error: any Error) -> Bool {
        if let e = error as? MirrorError { return e.code == .malformedRow }
        guard let e = error as? StoreError else { return false }
        let rowCodes: Set<StoreError.Code> = [
            .validation, .uniqueness, .conflict, .deleteDenied, .objectNotFound, .unknownEntity, .unknownProperty,
            .malformedID, .foreignID, .invalidArgument,
        ]
        return rowCodes.contains(e.code)
    }

    /// Local transactions not pushed plus remote ones not applied.
    public func lag() throws -> Int64 {
        let (local, remote) = try lagParts()
        return local + remote
    }

    /// The lag's two parts: local transactions not pushed, and remote ones not applied.
    private func lagParts() throws -> (local: Int64, remote: Int64) {
        let local = try container.historyCount(after: try pushedToken()?.value ?? 0, excludingAuthor: Self.author)
        return (Int64(local), try server.count(after: scanned, excluding: container.storeID))
    }
}
