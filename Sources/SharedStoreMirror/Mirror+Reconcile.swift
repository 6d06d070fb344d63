import Foundation
import SharedStoreCore
import SharedStorePostgres
import SharedStoreSupport

/// What a settled store does when it may have met changes in another order than the server's
/// (issue 19: renames onto colliding names): it takes the state the server's log gives it.
extension Mirror {
    /// The server's log replayed as ``serverState(through:then:)`` says, into a store in memory,
    /// with every global id its rows name (made, changed, deleted or merged).
    ///
    /// - Throws: ``ReplayCancelled`` when `cancellable` and ``isCancelled`` turns true (a follower
    ///   asked to stop does not finish a long replay first).
    ///
    /// - Parameter wholeLog: replay the log from its first row when nothing of it was pruned,
    ///   never a snapshot (a member's word): what `--verify` compares with, so that a snapshot
    ///   forged or wrong shows as differences wherever the log can still tell.
    func replayLog(
        through: Int64, then own: [MirrorTransaction], cancellable: Bool = false, from source: MirrorServer? = nil,
        wholeLog: Bool = false
    ) throws -> (shadow: Container, known: Set<UUID>, newer: Int64?) {
        let shadow = try newShadow()
        var known = Set<UUID>()
        var newer: Int64?
        let source = source ?? server
        replayedFrom = nil
        // The newest snapshot through `through`, then the log after it, read as one state of the
        // server (a prune meanwhile would delete rows after the snapshot read).
        try source.consistentRead {
            var after: Int64 = 0
            if try !wholeLog || source.prunedThrough() > 0,
                let snapshot = try source.newestSnapshot(atMost: min(through, source.maxSequence()))
            {
                known = try replay(snapshot, from: source, into: shadow, cancellable: cancellable)
                replayedFrom = snapshot
                after = snapshot.through
            } else if through > 0, case let pruned = try source.prunedThrough(), pruned > 0 {
                // (The state through 0 is empty, pruned or not.)
                throw Self.behindHorizon(
                    through, pruned, why: "the server's state at that point cannot be read (no snapshot is that old)")
            }
            while after < through {
                if cancellable && isCancelled() { throw ReplayCancelled() }
                let rows = try source.log(after: after, through: through, limit: 1000)
                for t in rows { known.formUnion(Self.named(replay(t, into: shadow, newer: &newer))) }
                guard let last = rows.last else { break }
                after = last.sequence
            }
        }
        for t in own { known.formUnion(Self.named(replay(t, into: shadow, newer: &newer))) }
        return (shadow, known, newer)
    }

    /// An empty store in memory with this store's model, keeping no history (the replay's objects
    /// alone count; history would grow with the log, in memory).
    func newShadow() throws -> Container {
        var options = Container.Options()
        options.inMemory = true
        options.historyTracking = false
        let shadow = try Container(group: "", model: container.model, options: options)
        try shadow.prepareMirroring()
        return shadow
    }

    /// Applies the payloads of `snapshot` (read from `source`) to `shadow`, as a store that joins
    /// takes them; returns the global ids they name.
    ///
    /// - Throws: ``MirrorError`` for a part that cannot be read (`.malformedRow`) or was made by a
    ///   newer model (`.newerModel`), or what applying it throws.
    func replay(_ snapshot: MirrorSnapshot, from source: MirrorServer, into shadow: Container, cancellable: Bool)
        throws -> Set<UUID>
    {
        var known = Set<UUID>()
        try source.readSnapshot(snapshot) { payloads in
            if cancellable && isCancelled() { throw ReplayCancelled() }
            // A part that cannot be read or applied fails the replay: skipped, every object of it
            // would be missing from the state (a snapshot made from it would drop them for good).
            for payload in payloads {
                let (model, changes) = try decode(snapshotPart: payload, snapshot)
                _ = try shadow.mirrorImport(
                    sequence: snapshot.through, changes: changes, uploaded: [:], unpushedAfter: Int64.max,
                    modelVersion: model, again: true, author: Self.author, contextName: Self.contextName)
                known.formUnion(Self.named(changes))
            }
        }
        return known
    }

    /// The global ids `changes` name: made, changed, deleted, merged, and what they merged into.
    static func named(_ changes: [MirrorChange]) -> Set<UUID> {
        var out = Set<UUID>()
        for change in changes {
            out.insert(change.globalID)
            if case .merge(_, _, let winner) = change { out.insert(winner) }
        }
        return out
    }

    /// When this store may have applied something in another order than the server's (an
    /// import made, merged or renamed an object of an entity with a uniqueness constraint while
    /// it held newer states, or a full upload or a restore's pull-back ran:
    /// ``MirrorKeys/reconcile``) and the round settled (nothing left to pull, nothing
    /// quarantined): makes every object here the state the server's log gives it, but for its
    /// own unpushed changes. A collision this store met in its own order, around its unpushed
    /// changes, can differ from the one every other machine meets in the server's order; the log
    /// decides. Costs one replay of the log (as `--verify`), only after such rounds; one that
    /// left objects to put right later is not tried again for ten times as long as it took (at
    /// least a second). Returns what it did (nil: nothing to do, or not now).
    ///
    /// A failure to write the log's state here (a `deny` delete rule that still holds) fails no
    /// round: it is reported (``MirrorRound/reconcileError``), and not tried again before
    /// another import marks the store.
    func reconcileIfNeeded(settled: Bool) throws -> (MirrorReconcileResult?, error: String?) {
        guard settled, !needsFullUpload, pullBack == nil, Date() >= reconcileNotBefore,
            try container.mirrorValue(MirrorKeys.reconcile) == 1
        else { return (nil, nil) }
        let started = Date()
        defer {
            // Tried again no sooner than ten times its cost, when it has to be tried again.
            reconcileNotBefore = Date().addingTimeInterval(max(1, 10 * Date().timeIntervalSince(started)))
        }
        let own = try server.ownTransactions(of: container.storeID, after: scanned).filter {
            !reclaim.contains($0.token)
        }
        let shadow: Container
        let known: Set<UUID>
        do {
            (shadow, known, _) = try replayLog(through: scanned, then: own, cancellable: true)
        } catch is ReplayCancelled {
            return (nil, nil)
        }
        let (_, state) = try shadow.mirrorExportEverything()
        do {
            return (
                try container.mirrorReconcile(
                    to: state, known: known, aliases: try shadow.mirrorAliases(),
                    unpushedAfter: try pushedToken()?.value ?? 0, author: Self.author, contextName: Self.contextName),
                nil
            )
        } catch let error where Self.isRowProblem(error) {
            try container.setMirrorValue(MirrorKeys.reconcile, 2)
            return (nil, TextSafety.visible("\(error)"))
        }
    }
}

/// A replay stopped because the mirror was asked to stop (see ``Mirror/replayLog(through:then:cancellable:)``).
struct ReplayCancelled: Error {}
