import Foundation
import SharedStoreCore
import SharedStorePostgres
import SharedStoreSupport

/// Retention (issue 25): a log pruned below a horizon, with a snapshot in its place.
///
/// - A mirror reports its pull cursor to the server (at most every ``Mirror/cursorReportInterval``
///   seconds): the horizon never passes the cursor of a mirror seen lately.
/// - A settled mirror makes a snapshot when the log after the newest one holds
///   ``Mirror/snapshotEvery`` rows and as many as the snapshot has objects (its cost, one replay of
///   the snapshot and the rows after it, is then paid once per as many rows as it holds objects).
/// - A store that joins, or whose cursor the log was pruned past, takes the snapshot's state and
///   pulls the log after it (``bootstrapIfNeeded()``): O(live objects), not O(history).
extension Mirror {
    /// The error of a store that cannot take the snapshot's state without losing something.
    static func behindHorizon(_ cursor: Int64, _ pruned: Int64, why: String) -> MirrorError {
        MirrorError(
            "the server pruned its log through sequence \(pruned), past this store's pull cursor \(cursor), and "
                + why + ": nothing was pulled; 'storectl mirror --rejoin' takes the server's state, dropping "
                + "this store's changes that did not go up", code: .behindHorizon)
    }

    /// Starts a store from the newest snapshot when it joins (nothing pulled yet) or the log was
    /// pruned past its cursor, after its own changes went up (a round pushes first). Returns how
    /// many objects it took (0: nothing to do).
    ///
    /// - A store with no objects imports the snapshot's payloads in order, one local transaction
    ///   each (memory: one batch of payloads).
    /// - Another becomes the snapshot's state (then its own uploads after it), but for its
    ///   changes not pushed yet; an object it holds that the snapshot lacks was deleted.
    ///
    /// - Throws: ``MirrorError`` `.behindHorizon` when this store's unpushed changes cannot be
    ///   told apart (its history is gone, or it was put back to an older copy), unless
    ///   ``rejoinDiscardingUnpushed``.
    func bootstrapIfNeeded() throws -> Int {
        let cursor = max(scanned, try container.mirrorValue(MirrorKeys.pullCursor) ?? 0)
        let pruned = try reader.prunedThrough()
        let joining = try cursor == 0 && reader.newestSnapshot(atMost: reader.maxSequence()) != nil
        guard cursor < pruned || joining else { return 0 }
        let local = try container.mirrorExportEverything().objects
        if local.isEmpty && cursor == 0 { return try importSnapshot() }
        // A store that uploaded (it only pushed so far: cursor 0) and whose cursor the log still
        // reaches pulls the log: a snapshot is a member's word, and one forged empty made such a
        // store, maybe the only one that knew the truth, delete what it held; a prune then lost it
        // for good. (A newcomer killed while it imported a snapshot uploaded nothing: it goes on.)
        if cursor >= pruned, try server.tokenRange(of: container.storeID) != (0, 0) { return 0 }
        try refuseUnclearChanges(cursor: cursor, pruned: pruned)
        return try takeSnapshotState(local: Set(local.keys))
    }

    /// Throws ``MirrorError/Code/behindHorizon`` when the log was pruned past this store's cursor
    /// and what it changed since its last upload cannot be told from what it missed (its history
    /// is gone, or it was put back to an older copy), unless ``rejoinDiscardingUnpushed``.
    func refuseUnclearChanges(cursor: Int64? = nil, pruned: Int64? = nil) throws {
        guard !rejoinDiscardingUnpushed else { return }
        let cursor = try cursor ?? max(scanned, container.mirrorValue(MirrorKeys.pullCursor) ?? 0)
        let pruned = try pruned ?? reader.prunedThrough()
        guard cursor < pruned, try !isNewcomer(cursor: cursor) else { return }
        if needsFullUpload || pullBack != nil || !reclaim.isEmpty {
            throw Self.behindHorizon(
                cursor, pruned,
                why: "what this store changed since its last upload cannot be told from what it missed (its "
                    + "history was deleted, or it was put back to an older copy)")
        }
        if try pushedToken() == nil && container.historyDeletedThrough() > 0 {
            throw Self.behindHorizon(cursor, pruned, why: "this store's history from before its first upload is gone")
        }
        if try reusesPrunedKeys() {
            throw Self.behindHorizon(
                cursor, pruned,
                why: "transactions of this store after its last recorded upload have keys whose rows the server "
                    + "pruned (they went up before a crash, or a copy this store was put back to used the same numbers)"
            )
        }
    }

    /// Whether this store never mirrored: it never pulled, and the server holds nothing of it
    /// (in the log or pruned). Everything it holds is then its own change, and goes up whole
    /// against an empty state as on a log never pruned.
    private func isNewcomer(cursor: Int64) throws -> Bool {
        guard cursor == 0, pullBack == nil, reclaim.isEmpty, try pushedToken() == nil else { return false }
        return try server.tokenRange(of: container.storeID) == (0, 0)
    }

    /// Whether a local transaction after the mirror's token (not the mirror's own) has a key
    /// whose row the server pruned: uploaded before a crash, or another transaction under the
    /// same number in a copy this store was put back to; the pruned rows cannot say which. A
    /// pruned key no local transaction has (a row forged under this store's id) says nothing.
    private func reusesPrunedKeys() throws -> Bool {
        let pushed = try pushedToken()?.value ?? 0
        let newest = try container.currentToken().value
        guard newest > pushed else { return false }
        let origin = container.storeID.uuidString.lowercased()
        let legacy = try server.legacyPrunedMax(of: origin)
        if legacy > pushed,
            try container.historyCount(after: pushed, excludingAuthor: Self.author)
                > container.historyCount(after: legacy, excludingAuthor: Self.author)
        {
            return true
        }
        var after = pushed
        while after < newest {
            let keys = try server.prunedKeys(of: origin, in: (after + 1)...newest, limit: 1000)
            if try !container.historyTokens(among: keys, excludingAuthor: Self.author).isEmpty { return true }
            guard keys.count == 1000, let last = keys.last else { return false }
            after = last
        }
        return false
    }

    /// Imports the newest snapshot into a store with no objects.
    private func importSnapshot() throws -> Int {
        var objects = 0
        let snapshot = try reader.consistentRead { () throws -> MirrorSnapshot? in
            // One past the log's end is no state of it (a member's row can claim anything).
            guard let snapshot = try reader.newestSnapshot(atMost: reader.maxSequence()) else { return nil }
            try reader.readSnapshot(snapshot) { payloads in
                for payload in payloads {
                    let (model, changes) = try decode(snapshotPart: payload, snapshot)
                    _ = try container.mirrorImport(
                        sequence: snapshot.through, changes: changes, uploaded: uploaded,
                        uploadedEntities: uploadedEntities, unpushedAfter: cleanThrough, ids: pendingIDs,
                        modelVersion: model, again: true, author: Self.author, contextName: Self.contextName)
                    pendingIDs = []
                    objects += changes.count
                }
            }
            return snapshot
        }
        guard let snapshot else { return 0 }
        try container.advanceMirrorCursor(to: snapshot.through, ids: pendingIDs)
        pendingIDs = []
        scanned = snapshot.through
        return objects
    }

    /// Makes this store the snapshot's state followed by its own uploads after it, but for its
    /// unpushed changes (``rejoinDiscardingUnpushed``: none); `local` are its objects now, each of
    /// which the snapshot decides (absent from it: deleted).
    private func takeSnapshotState(local: Set<UUID>) throws -> Int {
        // The snapshot is chosen and read in one state of the server: a prune meanwhile could
        // delete one chosen before.
        let shadow = try newShadow()
        var known = Set<UUID>()
        let chosen = try reader.consistentRead { () throws -> Int64? in
            guard let snapshot = try reader.newestSnapshot(atMost: reader.maxSequence()) else { return nil }
            known = try replay(snapshot, from: reader, into: shadow, cancellable: false)
            return snapshot.through
        }
        guard let through = chosen else { return 0 }
        for t in try server.ownTransactions(of: container.storeID, after: through) where !reclaim.contains(t.token) {
            known.formUnion(Self.named(replay(t, into: shadow)))
        }
        let (_, state) = try shadow.mirrorExportEverything()
        let newest = try container.currentToken()
        let unpushedAfter = rejoinDiscardingUnpushed ? newest.value : try pushedToken()?.value ?? 0
        guard
            let result = try container.mirrorReconcile(
                to: state, known: known.union(local), aliases: try shadow.mirrorAliases(), unpushedAfter: unpushedAfter,
                author: Self.author, contextName: Self.contextName)
        else {
            throw MirrorError(
                "this store cannot take the snapshot's state yet (a merge waits to go up, or a row is quarantined): "
                    + "the next round tries again")
        }
        if rejoinDiscardingUnpushed {
            try registry.reset(Self.consumer, to: newest)
            try noteCompared(through: newest.value, lowestKey: 0)
            try container.endMirrorPullBack([(FullUploadKeys.restoreThrough, 0)], cursor: 0, ids: [])
            (needsFullUpload, pullBack, reclaim) = (false, nil, [])
            cleanThrough = max(cleanThrough, newest.value)
        }
        try container.advanceMirrorCursor(to: through, ids: pendingIDs)
        pendingIDs = []
        scanned = through
        return result.written
    }

    /// One payload of `snapshot`, read as a row of the log would be.
    func decode(snapshotPart payload: String, _ snapshot: MirrorSnapshot) throws -> (
        model: Int, changes: [MirrorChange]
    ) {
        let (model, changes): (Int, [MirrorChange])
        do {
            (model, changes) = try MirrorPayload.decode(payload, sequence: snapshot.through)
        } catch let error as MirrorError where error.code == .malformedRow {
            let problem: String
            if case .badRow(_, let what)? = error.reason { problem = what } else { problem = error.description }
            throw MirrorError(
                "the server's \(snapshot.description) is malformed: \(problem)", code: .malformedRow,
                reason: .badRow(sequence: snapshot.through, problem: problem))
        }
        try checkModel(model, at: snapshot.through, of: "the server's \(snapshot.description)")
        return (model, changes)
    }

    /// Makes a snapshot through the sequence this store read through, when the log after the
    /// newest one holds ``snapshotEvery`` rows and at least as many as it has objects. Returns
    /// whether it stored one.
    func snapshotIfDue() throws -> Bool {
        guard snapshotEvery > 0, !needsFullUpload, pullBack == nil, scanned > 0 else { return false }
        let newest = try server.newestSnapshot()
        let base = newest?.through ?? 0
        guard scanned - base >= max(snapshotEvery, newest?.objects ?? 0) else { return false }
        let through = scanned
        let shadow: Container
        do {
            shadow = try replayLog(through: through, then: [], cancellable: true).shadow
        } catch is ReplayCancelled {
            return false
        } catch let error as MirrorError where error.code == .newerModel {
            // The newest snapshot was made by a newer app: this one cannot read it, and leaves
            // snapshots to the machines that can.
            return false
        }
        let chunks = try Self.snapshotPayloads(of: shadow, batchSize: batchSize)
        return try server.storeSnapshot(
            through: through, chunks: chunks.payloads, objects: Int64(chunks.objects), origin: container.storeID)
    }

    /// A store's state as snapshot payloads: every object (an entity after those it refers to,
    /// then those whose references need a second pass again), then every alias a collision left.
    static func snapshotPayloads(of shadow: Container, batchSize: Int) throws -> (payloads: [String], objects: Int) {
        let (_, objects) = try shadow.mirrorExportEverything()
        let version = shadow.model.version
        var payloads: [String] = []
        func add(_ changes: [MirrorChange]) {
            for start in stride(from: 0, to: changes.count, by: max(batchSize, 1)) {
                payloads.append(
                    MirrorPayload.encode(
                        Array(changes[start..<min(start + max(batchSize, 1), changes.count)]), modelVersion: version))
            }
        }
        let byEntity = Dictionary(grouping: objects.values, by: \.entity)
        let (first, again) = shadow.mirrorUploadOrder
        for entity in first + again {
            add(
                (byEntity[entity] ?? []).sorted { $0.globalID.uuidString < $1.globalID.uuidString }.map { o in
                    var o = o
                    // The shadow's own rows name nothing on any machine.
                    o.originKey = nil
                    return .upsert(o)
                })
        }
        // An id merged away still names its winner in later rows. An entity is needed to apply
        // a merge; neither object is held by a store that takes it, so any entity does.
        let fallback = shadow.model.entities.first?.name ?? ""
        add(
            try shadow.mirrorAliases().sorted { $0.key.uuidString < $1.key.uuidString }.map { loser, winner in
                .merge(entity: objects[winner]?.entity ?? fallback, loser: loser, winner: winner)
            })
        // A snapshot of nothing is one empty part (a head without parts is no snapshot).
        if payloads.isEmpty { payloads.append(MirrorPayload.encode([], modelVersion: version)) }
        return (payloads, objects.count)
    }

    /// Tells the server this store's pull cursor, at most every ``cursorReportInterval`` seconds.
    /// What it reports is the cursor stored in the store (moved to what this run read through
    /// first): a restart reads on from there, and the log keeps it.
    func reportCursorIfDue() throws {
        guard Date().timeIntervalSince(lastCursorReport) >= cursorReportInterval else { return }
        var cursor = try container.mirrorValue(MirrorKeys.pullCursor) ?? 0
        // (A restore's pull-back or a full upload waiting keeps the cursor where the store has it.)
        if scanned > cursor && pullBack == nil && !needsFullUpload {
            try container.advanceMirrorCursor(to: scanned, ids: pendingIDs)
            pendingIDs = []
            cursor = scanned
        }
        try server.reportCursor(origin: container.storeID, cursor: cursor)
        lastCursorReport = Date()
    }
}
