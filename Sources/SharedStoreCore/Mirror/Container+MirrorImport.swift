import Foundation
import SharedStoreSQLite
import SharedStoreSupport

extension Container {
    /// Applies remote transaction `sequence` in one local transaction of `author`, with the pull
    /// cursor moved to it in the same transaction: applied exactly once, even across kill -9.
    ///
    /// When this store holds a newer state of an object in the server's order — an upload of
    /// its own with a higher sequence (`uploaded`: the sequence of this store's last upload of
    /// each object after the cursor), or a local change not pushed yet (history after
    /// `unpushedAfter` by other authors than `author`) — a remote update is applied all the
    /// same, and then this store's state is put back on top: what the change does beyond the
    /// object (a collision that makes two objects one) happens here as it does everywhere, and
    /// the object ends as this store's later upload makes it everywhere. A remote delete of it
    /// is not applied (what it did to other objects travels as their own changes).
    ///
    /// `ids` (objects this store pushed, by row) are recorded in `ss_mirror_ids` in the same
    /// transaction, before anything is looked up. `again`: a quarantined row applied again,
    /// behind the cursor (which stays where it is).
    ///
    /// A payload of an older model (`modelVersion`) is read as this model names things: an
    /// entity or attribute renamed since is found under its old name; an attribute added since
    /// keeps its default (an insert) or its value here (an update).
    ///
    /// - Throws: ``StoreError`` when the changes cannot be applied (a value the model refuses, a
    ///   global id that names an object of another entity here); nothing is written then.
    package func mirrorImport(
        sequence: Int64, changes: [MirrorChange], uploaded: [UUID: Int64], uploadedEntities: [String: Int64]? = nil,
        unpushedAfter: Int64,
        ids: [(UUID, Int64)] = [], modelVersion: Int? = nil, again: Bool = false, author: String, contextName: String
    ) throws -> MirrorImportResult {
        let result = try write { s -> MirrorImportResult in
            for (gid, pk) in ids { try s.mapID(gid, pk) }
            if !again, let cursor = try s.mirrorValue(MirrorKeys.pullCursor), cursor >= sequence {
                return MirrorImportResult(token: nil, applied: false, foundUnpushed: false)
            }
            // Local changes not pushed must not be overwritten by older remote ones: when the
            // history that names them is gone (the mirror was evicted or reset and the cleaner
            // went on), nothing here can tell them apart, so nothing is applied until a full
            // upload by comparison has sent them.
            if try s.historyMeta().floor > unpushedAfter {
                throw StoreError(
                    .historyExpired,
                    "history this store has not pushed was deleted (its mirror was evicted or reset): "
                        + "its changes go up by comparison before anything is pulled")
            }
            let unpushed = try unpushedObjects(s, after: unpushedAfter, author: author)
            var importer = MirrorImporter(s: s, sequence: sequence, unpushed: unpushed.gids, uploaded: uploaded)
            importer.unpushedRows = unpushed.rows
            importer.uploadedEntities = uploadedEntities
            importer.older = (modelVersion ?? model.version) < model.version
            // Every update applies, also to objects this store holds a newer state of, so that
            // what it does beyond the object (a collision that makes two objects one) happens
            // here as everywhere else; then this store's newer states go back on top, as its
            // later upload will put them everywhere.
            let newer = try newerStates(s, changes, importer)
            for change in changes { try importer.apply(change) }
            for state in newer { try importer.apply(state, again: true) }
            try importer.relate()
            if importer.mayDiverge { try s.setMirrorValue(MirrorKeys.reconcile, 1) }
            if !again { try s.setMirrorValue(MirrorKeys.pullCursor, sequence) }
            let token = try importer.w.writeHistory(author: author, contextName: contextName)
            return MirrorImportResult(token: token, applied: true, foundUnpushed: !unpushed.gids.isEmpty)
        }
        if result.applied { didCommit(result.token) }
        return result
    }

    /// The global ids local transactions after `token` (not `author`'s) changed, each also as
    /// the object it became here (a collision made it another's alias); and the row each names
    /// (the mirror's map may not have it yet: it is recorded after the upload).
    func unpushedObjects(_ s: TransactionSQL, after token: Int64, author: String) throws
        -> (gids: Set<UUID>, rows: [UUID: ObjectID])
    {
        let query = TransactionSQL.historyQuery(HistoryFilter(authors: nil, excludedAuthors: [author]))
        var out = Set<UUID>()
        var rows: [UUID: ObjectID] = [:]
        var after = token
        while true {
            let batch = try s.historyTransactions(query, after: after, limit: 512, entities: nil)
            for t in batch.transactions {
                for c in t.changes {
                    guard let g = c.globalID else { continue }
                    out.insert(g)
                    rows[g] = c.objectID
                }
            }
            if batch.scanned < 512 { break }
            after = batch.last
        }
        for g in out { out.insert(try MirrorImporter.resolve(s, g)) }
        return (out, rows)
    }

    /// The states here of the objects `changes` name that this store holds newer (its own
    /// changes not pushed yet, or pushed past the transaction): each object's whole state, or
    /// its deletion when it is gone.
    private func newerStates(_ s: TransactionSQL, _ changes: [MirrorChange], _ importer: MirrorImporter) throws
        -> [MirrorChange]
    {
        var out: [MirrorChange] = []
        var seen = Set<UUID>()
        var targets: [ObjectID: UUID] = [:]
        // A remote delete of such an object is not applied at all: what it did to other objects
        // (a delete rule) is in the same transaction, as their own changes.
        for case .upsert(let remote) in changes {
            guard let e = importer.entity(named: remote.entity) else { continue }
            let gid = try importer.resolve(remote.globalID)
            guard importer.isNewerHere(gid), seen.insert(gid).inserted else { continue }
            if let pk = try importer.key(e, gid), let object = try exportObject(s, e, pk, &targets) {
                out.append(.upsert(object))
            } else {
                out.append(.delete(entity: e.name, globalID: gid))
            }
        }
        return out
    }
}
