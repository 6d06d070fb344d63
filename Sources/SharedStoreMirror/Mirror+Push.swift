import Foundation
import SharedStoreCore
import SharedStorePostgres

/// The push side of a round: every local transaction after the mirror's token goes up, in
/// order, under its token as key (a fresh key where that key names another transaction).
extension Mirror {
    /// The local token the mirror has pushed through (nil: nothing yet).
    func pushedToken() throws -> HistoryToken? {
        guard let token = try registry.consumer(Self.consumer)?.token, token.storeID == container.storeID else {
            return nil
        }
        return token
    }

    /// Uploads every local transaction after the mirror's token, ``batchSize`` at a time;
    /// returns how many were new to the server (an upload repeated after a crash is not).
    @discardableResult
    public func push() throws -> Int { try untilShort(pushBatch) }

    private func pushBatch() throws -> (read: Int, done: Int) {
        // A restored store pushes nothing before its lost rows are back.
        // A full upload compares with the server's state, not history: it may go up while a
        // restored store pulls its lost rows back (they are in neither side of the comparison).
        if needsFullUpload { return (batchSize, try uploadChanged()) }
        if pullBack != nil { return (0, 0) }
        try pushMerges()
        let newest = try container.currentToken()
        let position = try registry.consumer(Self.consumer)
        let start = position?.token.flatMap { $0.storeID == container.storeID ? $0 : nil }
        // Evicted (its history may go at any time), or never pushed and history was cleaned
        // before: what it held is only in the objects.
        let cleaned = start == nil ? try container.historyDeletedThrough() > 0 : false
        if position?.isEvicted == true || cleaned {
            needsFullUpload = true
            return (batchSize, 0)
        }
        let transactions: [HistoryTransaction]
        do {
            transactions = try container.fetchHistory(
                HistoryRequest(
                    start: start.map { .after($0) } ?? .beginning, excludingAuthors: [Self.author], limit: batchSize))
        } catch let error as StoreError where error.code == .historyExpired {
            // Cleaned before it was pushed (the mirror was evicted, or its token reset).
            needsFullUpload = true
            return (batchSize, 0)
        }
        // History from before global ids names objects no other store can find.
        if transactions.contains(where: { $0.changes.contains { $0.globalID == nil } }) {
            needsFullUpload = true
            return (batchSize, 0)
        }
        let changes = try checked(try container.mirrorExport(transactions), tokens: transactions.map(\.token.value))
        let keys = reclaim.isEmpty ? transactions.map(\.token.value) : try keys(for: transactions)
        let uploads = zip(zip(transactions, keys), changes).map { tk, c in
            let (t, key) = tk
            return MirrorUpload(
                token: key, author: t.author,
                payload: MirrorPayload.encode(
                    c, modelVersion: container.model.version, at: t.timestamp.timeIntervalSince1970))
        }
        // Mapped before they go up: a row of this store naming an object its map does not know
        // was made by a lost copy (``recoverTimeline``).
        try container.noteMirrorIDs(Self.upserted(changes))
        let results = try rekeyClashes(uploads, try server.upload(origin: container.storeID, uploads))
        note(results.map(\.sequence), changes)
        if pendingIDs.count >= 10_000 {
            try container.noteMirrorIDs(pendingIDs)
            pendingIDs = []
        }
        // Everything through `newest` not of this mirror is pushed when the batch was not full.
        let through = transactions.count < batchSize ? newest : transactions.last?.token
        if let through, through.value > (start?.value ?? 0) {
            try registry.advance(Self.consumer, to: through)
            cleanThrough = max(cleanThrough, through.value)
        } else {
            try registry.advance(Self.consumer, to: start ?? newest)
        }
        return (transactions.count, results.filter(\.isNew).count)
    }

    /// Uploads the merges this store made where its own newer changes collided with another
    /// machine's (``MirrorChange/merge(entity:loser:winner:)``), before those changes: every
    /// machine then makes the same objects one, even where the collision no longer holds when
    /// they read this store's changes.
    func pushMerges() throws {
        let merges = try container.recordedMirrorMerges()
        guard !merges.isEmpty else { return }
        let key = try freshKeys(1)[0]
        let upload = MirrorUpload(
            token: key, author: Self.author,
            payload: MirrorPayload.encode(merges, modelVersion: container.model.version))
        let results = try server.upload(origin: container.storeID, [upload])
        note(results.map(\.sequence), [merges])
        try container.forgetMirrorMerges(merges.map(\.globalID))
    }

    /// The server had a row of this origin at an uploaded token already: the same transaction
    /// sent again after a crash (same timestamp), or another one — a copy of this store that was
    /// lost, or a row another program planted. Another one is not this save: it goes up again
    /// under a fresh key, never dropped as a duplicate.
    private func rekeyClashes(_ uploads: [MirrorUpload], _ results: [(sequence: Int64, isNew: Bool)]) throws
        -> [(sequence: Int64, isNew: Bool)]
    {
        var out = results
        // (Sequence 0: the server pruned the row; its key says it went up, and a store whose
        // history could name another transaction by it stops before pushing, behind the horizon.)
        for (i, (u, r)) in zip(uploads, results).enumerated() where !r.isNew && r.sequence > 0 {
            let there = try server.transaction(at: r.sequence).flatMap { MirrorPayload.timestamp($0.payload) }
            guard there == nil || there != MirrorPayload.timestamp(u.payload) else { continue }
            let again = MirrorUpload(token: try freshKeys(1)[0], author: u.author, payload: u.payload)
            out[i] = try server.upload(origin: container.storeID, [again])[0]
        }
        return out
    }

    /// Remembers the server sequence of each object's upload (see ``uploaded``).
    func note(_ sequences: [Int64], _ changes: [[MirrorChange]]) {
        for (sequence, c) in zip(sequences, changes) {
            for change in c {
                uploaded[change.globalID] = max(uploaded[change.globalID] ?? 0, sequence)
                uploadedEntities[change.entity] = max(uploadedEntities[change.entity] ?? 0, sequence)
            }
        }
    }

    /// The objects `changes` upsert, with their rows here: what the map records before an upload.
    static func upserted(_ changes: [[MirrorChange]]) -> [(UUID, Int64)] {
        changes.joined().compactMap { change in
            guard case .upsert(let o) = change, let pk = o.originKey else { return nil }
            return (o.globalID, pk)
        }
    }
}
