import Foundation
import SharedStoreCore
import SharedStorePostgres
import SharedStoreSupport
import SharedStoreSync

/// The keys of the full upload's state in the store.
enum FullUploadKeys {
    /// The lowest server key this store's full uploads used (0: none). A row of this store on
    /// the server below it was made by a copy of the store this one does not hold.
    static let floor = "full_upload_floor"
    /// While a restored store pulls back its lost rows: the server sequence through which it
    /// must pull before it pushes anything, and the newest token of its own from before the
    /// restore (its later transactions are the only changes it has not pushed).
    static let restoreThrough = "restore_through"
    static let restoreFloor = "restore_floor"
    /// The newest local token a full upload (or a rejoin) accounted for: its transactions went
    /// up as the upload's rows, under keys below every token, or were on the server already.
    /// With it, the server's highest key of this store when it ran, and the lowest key it used
    /// (0: none): while the server still holds both, those transactions are not lost uploads
    /// (``Mirror/noteLostUploads()``), however many processes later.
    static let comparedThrough = "compared_through"
    static let comparedServerMax = "compared_server_max"
    static let comparedKey = "compared_key"
}

/// How a mirror keeps the rule of issue 19 — no change made on any machine is lost or reverted
/// except by a later change in the server's order — when its own history cannot say what it
/// changed: after an eviction, a reset, a restore, or with history from before global ids.
///
/// The server's log determines every object's state (``serverState(through:then:)`` replays
/// it). A store compares its objects with the state the log gave them as of its pull cursor
/// (plus its own later uploads): only what differs is its own change, and only that goes up —
/// deletions included. A change another machine made after the cursor is not outranked: this
/// store did not upload the object, and pulls the change next.
extension Mirror {
    // MARK: - A store put back to an older copy

    /// Finds what a restore lost (called when the mirror starts): the registry's high-water
    /// mark (a restored `Store.sqlite`) and the server's (a restored group directory) move the
    /// token sequence past every number handed out before, and this store's rows on the server
    /// that it no longer holds are pulled back (``reclaim``) like another store's. A local
    /// transaction that reuses a number the server holds (saved after the restore, before the
    /// mirror saw it) goes up under a fresh key (``keys(for:)``).
    func recoverTimeline() throws {
        _ = try registry.reconcile(container)
        let cursor = try container.mirrorValue(MirrorKeys.pullCursor) ?? 0
        let own = try server.ownTransactions(of: container.storeID, after: cursor)
        // The highest token any copy of this store used: its uploads' tokens, and the newest
        // token its full uploads name.
        let highest = max(
            try server.tokenRange(of: container.storeID).max,
            own.compactMap { $0.token < 0 ? MirrorPayload.highWater($0.payload) : nil }.max() ?? 0)
        if highest > 0 { try container.adoptHighWater(highest) }
        let lost = try container.lostTokenRanges()
        let floor = try container.mirrorValue(FullUploadKeys.floor) ?? 0
        // A pull-back under way: its rows as found when it started. They cannot all be told
        // again: a full upload of this copy since moved the floor below the lost copy's keys.
        let resuming = try container.mirrorValue(FullUploadKeys.restoreThrough) ?? 0 > cursor
        let recorded = resuming ? try container.reclaimedMirrorKeys() : []
        var reused: [Int64] = []
        var through: Int64 = 0
        var lostSince: Double?
        let (decoded, lostRows) = try ownRowsDecoded(own, lost: lost, floor: floor, recorded: recorded)
        for t in own {
            if let why = lostRows[t.sequence] {
                reclaim.insert(t.token)
                // A lost row outside the lost ranges has a number this copy handed out again.
                if why == .reused || (why == .unknownObject && t.token > 0) { reused.append(t.token) }
                through = max(through, t.sequence)
                if let at = MirrorPayload.timestamp(t.payload) { lostSince = min(lostSince ?? at, at) }
                continue
            }
            // What this store uploaded after the cursor: newer than anything before it to pull.
            // (An unreadable row of its own was not made by it; the pull quarantines it.)
            for change in decoded[t.sequence] ?? [] {
                uploaded[change.globalID] = t.sequence
                uploadedEntities[change.entity] = max(uploadedEntities[change.entity] ?? 0, t.sequence)
                if case .upsert(let o) = change, let pk = o.originKey { pendingIDs.append((o.globalID, pk)) }
            }
        }
        // A copy from before the mirror recorded the rows of its last uploads lacks them in its
        // map: its own rows pulled back would make those objects a second time.
        if !reclaim.isEmpty { try container.rebuildMirrorIDs() }
        // A copy from the backup holds nothing newer than the first transaction the lost copy
        // made after it: a local transaction newer than that was saved after the restore, and is
        // unpushed whatever number it took (the lost copy may have used the same one for an
        // import, which never went up).
        // A backup whose history the cleaner deleted keeps none from before that time: then the
        // first transaction saved since is the first after the restore.
        let backupNewest = try lostSince.flatMap { since in
            try container.newestHistoryToken(before: since)
                ?? container.oldestHistoryToken(from: since).map { max($0, 1) - 1 }
        }
        try notePullBack(
            through: through, reused: reused,
            marker: [lost.last.map { $0.upperBound + 1 }, backupNewest].compactMap { $0 }.min())
    }

    /// Starts (or goes on with) pulling back a restored store's lost rows: until the pull
    /// reaches `through`, nothing is pushed — what this copy holds from before the restore was
    /// pushed by the copy it replaced, and those rows (and every later change) come back first —
    /// and only transactions after the restore floor count as this store's unpushed changes.
    /// The keys of its lost rows (``reclaim``) are recorded with it: a restart goes on with them.
    private func notePullBack(through: Int64, reused: [Int64], marker: Int64?) throws {
        if let stored = try container.mirrorValue(FullUploadKeys.restoreThrough),
            stored > (try container.mirrorValue(MirrorKeys.pullCursor) ?? 0)
        {
            let all = max(stored, through)
            try container.noteMirrorPullBack([(FullUploadKeys.restoreThrough, all)], reclaimed: reclaim)
            pullBack = (all, try container.mirrorValue(FullUploadKeys.restoreFloor) ?? 0)
            return
        }
        guard through > 0 else { return }
        // The restore's own transaction (``Container/adoptHighWater(_:)``) marks where this
        // copy's new saves start; saves before it that reuse numbers the server holds, too.
        let newest = try container.currentToken().value
        let floor = min(reused.min().map { $0 - 1 } ?? newest, marker ?? newest, newest)
        try container.noteMirrorPullBack(
            [(FullUploadKeys.restoreFloor, floor), (FullUploadKeys.restoreThrough, through)], reclaimed: reclaim)
        pullBack = (through, floor)
    }

    /// Ends the pull-back once the pull went past its last lost row: the mirror's position
    /// becomes the restore floor (what is before it went up from the replaced copy).
    func endPullBackIfDone(scanned: Int64) throws {
        guard let (through, floor) = pullBack, scanned >= through else { return }
        let position = try registry.consumer(Self.consumer)
        let token = HistoryToken(storeID: container.storeID, value: floor)
        if position?.isEvicted == true || (position?.token?.value ?? 0) < floor || position?.token == nil {
            try registry.reset(Self.consumer, to: token)
        }
        cleanThrough = max(cleanThrough, floor)
        // Its lost rows came back around what it held: once it settles, the log decides. The
        // cursor passes them: a restart never has to tell them from this copy's own again.
        try container.endMirrorPullBack(
            [(FullUploadKeys.restoreThrough, 0), (MirrorKeys.reconcile, 1)], cursor: scanned, ids: pendingIDs)
        pendingIDs = []
        pullBack = nil
    }

    /// Why a row of this store is one it no longer holds (`recorded`: found so when the pull-back
    /// under way started).
    enum Lost { case token, reused, fullUpload, unknownObject, recorded }

    /// The changes of each row of `own` (by sequence) that is not lost and can be read (the pull
    /// quarantines the others), and why each lost row is lost: by ``standing(of:lost:floor:)``,
    /// or because it names an object this copy never knew and its history cannot tell (each row
    /// is looked at once). The mirror maps every object
    /// before it pushes it, so a row that upserts or deletes an object neither held nor mapped
    /// here was made by a copy of this store that was lost — even when its token number was saved
    /// again here and that history is gone (nothing left to compare its time with). Pulled back,
    /// such a row brings the object back; compared, it would have deleted the object everywhere.
    private func ownRowsDecoded(
        _ own: [MirrorTransaction], lost: [ClosedRange<Int64>], floor: Int64, recorded: Set<Int64>
    ) throws -> (changes: [Int64: [MirrorChange]], lost: [Int64: Lost]) {
        var decoded: [Int64: [MirrorChange]] = [:]
        var lostRows: [Int64: Lost] = [:]
        // Rows whose transaction this copy holds: an object they name that is unknown here was
        // made and deleted here before the upload, not by a lost copy.
        var held = Set<Int64>()
        for t in own {
            if recorded.contains(t.token) {
                lostRows[t.sequence] = .recorded
                continue
            }
            let standing = try standing(of: t, lost: lost, floor: floor)
            if case .lost(let why) = standing {
                lostRows[t.sequence] = why
                continue
            }
            if case .held = standing { held.insert(t.sequence) }
            decoded[t.sequence] = try? MirrorPayload.decode(t.payload, sequence: t.sequence).changes
        }
        let unknown = try container.unknownGlobalIDs(Set(decoded.values.joined().compactMap(Self.namedObject)))
        for (sequence, changes) in decoded
        where !held.contains(sequence)
            && changes.contains(where: { Self.namedObject($0).map(unknown.contains) == true })
        {
            lostRows[sequence] = .unknownObject
        }
        return (decoded, lostRows)
    }

    /// The object a change upserts or deletes (nil for a merge: it names two, both known elsewhere).
    static func namedObject(_ change: MirrorChange) -> UUID? {
        switch change {
        case .upsert(let o): return o.globalID
        case .delete(_, let gid): return gid
        case .merge: return nil
        }
    }

    /// What this copy knows of one of its rows on the server.
    private enum Standing {
        /// A row it no longer holds, and why.
        case lost(Lost)
        /// Its history holds the row's transaction: the same token, saved at the same time.
        case held
        /// Nothing here tells (history the cleaner deleted, a full upload of its own).
        case unknown
    }

    /// Whether row `t` of this store is one it no longer holds: a token it lost, one whose
    /// transaction here is another (another timestamp: the number was handed out again before
    /// the mirror saw the restore), or a full upload below the lowest this store made.
    private func standing(of t: MirrorTransaction, lost: [ClosedRange<Int64>], floor: Int64) throws -> Standing {
        if t.token < 0 { return t.token < floor ? .lost(.fullUpload) : .unknown }
        if lost.contains(where: { $0.contains(t.token) }) { return .lost(.token) }
        guard let at = MirrorPayload.timestamp(t.payload), let here = try container.historyTimestamp(of: t.token)
        else { return .unknown }
        return at != here ? .lost(.reused) : .held
    }

    // MARK: - Checks before an upload

    /// `changes` without the objects whose state the model refuses (a foreign tool wrote around
    /// it): those are quarantined here as local changes that cannot go up, and every machine
    /// keeps what it had until the object is saved valid again.
    func checked(_ changes: [[MirrorChange]], tokens: [Int64]) throws -> [[MirrorChange]] {
        var out: [[MirrorChange]] = []
        for (c, token) in zip(changes, tokens) {
            var kept: [MirrorChange] = []
            for change in c {
                if case .upsert(let o) = change, let problem = container.mirrorUploadProblem(o) {
                    try container.quarantineMirrorRow(
                        MirrorQuarantine(
                            sequence: nil, origin: container.storeID, token: token, globalID: o.globalID,
                            reason: "not uploaded: " + TextSafety.visible(problem), at: Date().timeIntervalSince1970))
                } else {
                    kept.append(change)
                }
            }
            out.append(kept)
        }
        let wentUp = out.flatMap { $0.map(\.globalID) }
        if try !container.quarantinedMirrorRows().isEmpty { try container.releaseQuarantine(globalIDs: wentUp) }
        return out
    }

    // MARK: - Full upload by comparison

    /// Records that the local transactions through `token` are accounted for on the server (a
    /// full upload sent what differed, its lowest key `lowestKey`, 0: it sent nothing; or a
    /// rejoin dropped what had not gone up): see ``FullUploadKeys/comparedThrough``.
    func noteCompared(through token: Int64, lowestKey: Int64) throws {
        let onServer = try server.tokenRange(of: container.storeID).max
        try container.setMirrorValues([
            (FullUploadKeys.comparedServerMax, onServer), (FullUploadKeys.comparedKey, lowestKey),
            (FullUploadKeys.comparedThrough, token),
        ])
    }

    /// Uploads every object whose state differs from the server's as of the pull cursor (this
    /// store's own changes), and a deletion for every object the server has that this store
    /// deleted, then moves the mirror's token to the newest read. Returns how many server
    /// transactions it made.
    func uploadChanged() throws -> Int {
        // The state to compare with is gone when the log was pruned past the cursor.
        try refuseUnclearChanges()
        let cursor = try container.mirrorValue(MirrorKeys.pullCursor) ?? 0
        let own = try server.ownTransactions(of: container.storeID, after: cursor).filter {
            !reclaim.contains($0.token)
        }
        let base = try serverState(through: cursor, then: own)
        let (newest, local) = try container.mirrorExportEverything()
        // A reference to an object merged here into another (a collision) names the same
        // object as one to the winner: not a change of the referring object.
        let aliases = try container.mirrorAliases()
        var chunks: [[MirrorChange]] = []
        func add(_ changes: [MirrorChange]) {
            for start in stride(from: 0, to: changes.count, by: batchSize) {
                chunks.append(Array(changes[start..<min(start + batchSize, changes.count)]))
            }
        }
        let (first, again) = container.mirrorUploadOrder
        for entity in first + again {
            let changed = local.values.filter { o in
                o.entity == entity && base[o.globalID].map { MirrorState($0).resolved(aliases) } != MirrorState(o)
            }.sorted { $0.originKey ?? 0 < $1.originKey ?? 0 }
            add(changed.map(MirrorChange.upsert))
        }
        var merged: [MirrorChange] = []
        var deletions: [MirrorChange] = []
        for (gid, o) in base.sorted(by: { $0.key.uuidString < $1.key.uuidString }) where local[gid] == nil {
            if let winner = aliases[gid] {
                // Merged here into `winner` by a collision the server's log does not hold yet
                // (a rename whose history is gone): the merge goes up.
                merged.append(.merge(entity: o.entity, loser: gid, winner: winner))
            } else {
                deletions.append(.delete(entity: o.entity, globalID: gid))
            }
        }
        add(merged)
        add(deletions)
        try upload(chunks, highWater: newest.value)
        // What this store held was compared with the log as of its cursor: once it settles,
        // it takes the log's state (``reconcileIfNeeded(settled:)``).
        try container.setMirrorValue(MirrorKeys.reconcile, 1)
        try registry.reset(Self.consumer, to: newest)
        try noteCompared(
            through: newest.value, lowestKey: chunks.isEmpty ? 0 : container.mirrorValue(FullUploadKeys.floor) ?? 0)
        cleanThrough = max(cleanThrough, newest.value)
        comparedThrough = max(comparedThrough, newest.value)
        needsFullUpload = false
        return chunks.count
    }

    /// `count` server keys below every key of this store on the server (negative: they name no
    /// local transaction), the lowest recorded in the store before any is used.
    func freshKeys(_ count: Int) throws -> [Int64] {
        guard count > 0 else { return [] }
        let stored = try container.mirrorValue(FullUploadKeys.floor) ?? 0
        let lowest = min(try server.tokenRange(of: container.storeID).min, stored, 0)
        let (floor, overflow) = lowest.subtractingReportingOverflow(Int64(count))
        guard !overflow else { throw MirrorError("this store's full uploads have used every key") }
        try container.setMirrorValue(FullUploadKeys.floor, floor)
        return (1...count).map { lowest - Int64($0) }
    }

    /// The server key of each local transaction: its token, or a fresh key for a token the
    /// server holds from a copy of this store that was lost (``reclaim``).
    func keys(for transactions: [HistoryTransaction]) throws -> [Int64] {
        let reused = transactions.filter { reclaim.contains($0.token.value) }.count
        var fresh = try freshKeys(reused)[...]
        return transactions.map { t in
            reclaim.contains(t.token.value) ? fresh.popFirst() ?? t.token.value : t.token.value
        }
    }

    /// Uploads `chunks` under fresh keys (``freshKeys(_:)``).
    private func upload(_ chunks: [[MirrorChange]], highWater: Int64) throws {
        guard !chunks.isEmpty else { return }
        let keys = try freshKeys(chunks.count)
        let checkedChunks = try checked(chunks, tokens: keys)
        for (i, changes) in checkedChunks.enumerated() {
            let upload = MirrorUpload(
                token: keys[i], author: Self.author,
                // Its time: a copy of this store restored from an older backup tells its own
                // later saves from this one's by it (``recoverTimeline()``).
                payload: MirrorPayload.encode(
                    changes, modelVersion: container.model.version, at: Date().timeIntervalSince1970,
                    highWater: highWater))
            try container.noteMirrorIDs(Self.upserted([changes]))
            let results = try server.upload(origin: container.storeID, [upload])
            note(results.map(\.sequence), [changes])
            fullUploadProgress?(i + 1, checkedChunks.count)
        }
    }

    // MARK: - The server's state

    /// Every object's state as the server's log determines it: its rows through `through`, in
    /// order, then `own` (rows of this store after them), applied to an empty store in memory
    /// by the same importer every pull uses. A row that cannot be applied is left out, as a
    /// pull quarantines it.
    func serverState(through: Int64, then own: [MirrorTransaction] = []) throws -> [UUID: MirrorObject] {
        try replayLog(through: through, then: own).shadow.mirrorExportEverything().objects
    }

    /// Applies row `t` to `shadow` as a pull would; returns its changes (none: it cannot be read).
    @discardableResult
    func replay(_ t: MirrorTransaction, into shadow: Container) -> [MirrorChange] {
        var newer: Int64?
        return replay(t, into: shadow, newer: &newer)
    }

    /// ``replay(_:into:)``, noting in `newer` the first row left out because a newer model made
    /// it (the state then is not the log's: this app cannot read all of it).
    func replay(_ t: MirrorTransaction, into shadow: Container, newer: inout Int64?) -> [MirrorChange] {
        let model: Int
        let changes: [MirrorChange]
        do {
            (model, changes) = try decode(t)
        } catch let error as MirrorError where error.code == .newerModel {
            newer = newer ?? t.sequence
            return []
        } catch {
            return []
        }
        _ = try? shadow.mirrorImport(
            sequence: t.sequence, changes: changes, uploaded: [:], unpushedAfter: Int64.max, modelVersion: model,
            author: Self.author, contextName: Self.contextName)
        return changes
    }
}

extension Mirror {
    /// Finds uploads the server lost (a failover to a standby that replicated asynchronously, a
    /// server put back to a backup): local transactions the mirror's token says went up, of which
    /// the server holds none. Their changes go up again with a full upload, which compares every
    /// object with the server's state. History the cleaner deleted since cannot be looked at:
    /// `storectl mirror --verify` finds what that hides.
    func noteLostUploads() throws {
        guard reclaim.isEmpty, pullBack == nil, !needsFullUpload, let pushed = try pushedToken() else { return }
        let range = try server.tokenRange(of: container.storeID)
        var onServer = range.max
        // A full upload (or a rejoin) accounted for the local transactions through its token: a
        // later process must not take them for lost (it made a full upload every round, for
        // good: full uploads use keys below every token). Unless the server lost rows since: its
        // highest key of this store went down, or the lowest key that upload used is gone.
        if let through = try container.mirrorValue(FullUploadKeys.comparedThrough), through > onServer,
            try range.max >= container.mirrorValue(FullUploadKeys.comparedServerMax) ?? Int64.max,
            case let key = try container.mirrorValue(FullUploadKeys.comparedKey) ?? 0, key == 0 || range.min <= key
        {
            onServer = through
        }
        guard onServer < pushed.value else { return }
        let after = try container.historyCount(after: max(onServer, 0), excludingAuthor: Self.author)
        let beyond = try container.historyCount(after: pushed.value, excludingAuthor: Self.author)
        if after > beyond { needsFullUpload = true }
    }
}

extension Mirror {
    /// `--rejoin` where the server's log is not the one this store pulled (``rewrittenLog()``):
    /// makes every object here the state the log gives it now, but for the objects of this
    /// store's changes the server lacks (not pushed, or lost with the rows the log lost): those
    /// are kept, and go up again from history at this round's push. The pull reads on from the
    /// log's end. Returns how many objects it wrote.
    ///
    /// - Throws: ``MirrorError`` when this store holds merges or quarantined changes of its own
    ///   not sent yet (nothing is changed then), or rows of the log only a newer app can read.
    func takeRewrittenLogState() throws -> Int {
        let through = try server.maxSequence()
        let (shadow, known, newer) = try replayLog(through: through, then: [])
        if let newer {
            throw MirrorError(
                "server transaction \(newer) was made with a newer model than this app's "
                    + "(\(container.model.version)): update the app to rejoin", code: .newerModel)
        }
        // This store's changes the server holds go no further than its highest key there: those
        // after it (and after what history the cleaner kept) go up again.
        let onServer = try server.tokenRange(of: container.storeID).max
        let kept = max(min(try pushedToken()?.value ?? 0, max(onServer, 0)), try container.historyDeletedThrough())
        let quarantined = try container.quarantinedMirrorRows()
        if quarantined.contains(where: { $0.sequence == nil }) {
            throw MirrorError(
                "this store could not take the server's state: it holds quarantined changes of its own that did not "
                    + "go up (listed by a round; save those objects valid again); nothing was changed")
        }
        // Rows of the old log held in quarantine: the log's state as a whole replaces them.
        for q in quarantined {
            if let sequence = q.sequence { try container.releaseQuarantine(sequence: sequence) }
        }
        let (_, state) = try shadow.mirrorExportEverything()
        let local = try container.mirrorExportEverything().objects
        guard
            let result = try container.mirrorReconcile(
                to: state, known: known.union(local.keys), aliases: try shadow.mirrorAliases(), unpushedAfter: kept,
                author: Self.author, contextName: Self.contextName)
        else {
            throw MirrorError(
                "this store could not take the server's state: it holds merges of its own that did not go up "
                    + "(a round sends them); only rows of the old log held in quarantine were released")
        }
        try registry.reset(Self.consumer, to: HistoryToken(storeID: container.storeID, value: kept))
        try container.setMirrorValue(MirrorKeys.pullCursor, through)
        let row = try server.rowKey(at: through)
        try container.setMirrorValues([
            (MirrorKeys.checkedSequence, row?.sequence ?? 0),
            (MirrorKeys.checkedRow, row.map { MirrorKeys.rowPrint(origin: $0.origin, token: $0.token) } ?? 0),
            (MirrorKeys.reconcile, 0),
        ])
        scanned = through
        cleanThrough = kept
        needsFullUpload = false
        reclaim = []
        pullBack = nil
        uploaded = [:]
        uploadedEntities = [:]
        return result.written
    }
}
