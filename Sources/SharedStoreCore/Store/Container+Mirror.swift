import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// One object as a mirror uploads it (issue 14): its global id, its stored attributes (derived
/// ones aside: every store computes its own) and its to-one relationships by global id (an
/// absent relationship is nil).
package struct MirrorObject: Sendable, Hashable {
    package var entity: String
    package var globalID: UUID
    package var values: [String: Value]
    package var toOne: [String: UUID]
    /// Its many-to-many links, on the side that owns them (one side per relationship: the
    /// other side's state leaves them out, so a link has one last writer).
    package var toMany: [String: [UUID]]
    /// Its primary key in the store that uploaded it (that store's mirror reads it back after a
    /// restart; other stores ignore it).
    package var originKey: Int64?

    package init(
        entity: String, globalID: UUID, values: [String: Value], toOne: [String: UUID],
        toMany: [String: [UUID]] = [:], originKey: Int64? = nil
    ) {
        self.entity = entity
        self.globalID = globalID
        self.values = values
        self.toOne = toOne
        self.toMany = toMany
        self.originKey = originKey
    }
}

/// One change of a mirrored transaction: an object's whole current state, its deletion, or two
/// objects that a collision made one (`loser` is an alias of `winner` from then on).
package enum MirrorChange: Sendable, Hashable {
    case upsert(MirrorObject)
    case delete(entity: String, globalID: UUID)
    case merge(entity: String, loser: UUID, winner: UUID)

    package var globalID: UUID {
        switch self {
        case .upsert(let o): return o.globalID
        case .delete(_, let g): return g
        case .merge(_, let loser, _): return loser
        }
    }
}

/// What applying one remote transaction did.
package struct MirrorImportResult: Sendable {
    /// The local transaction it made (nil: it changed nothing here, or was applied before).
    package let token: HistoryToken?
    /// False when the pull cursor was at or past it already (another mirror run applied it).
    package let applied: Bool
    /// Whether local changes not yet pushed were found (the caller then keeps looking for them
    /// from the same token next time).
    package let foundUnpushed: Bool
}

extension Container {
    /// Makes the mirror's tables (idempotent).
    package func prepareMirroring() throws {
        try write { s in try SQLStore.createMirrorTables(s.c) }
    }

    /// Moves the pull cursor to `sequence` (when it is further) with `ids` recorded, in one write
    /// transaction: a mirror read everything through `sequence`, its own uploads past the last
    /// import (so that a restart does not read them all again).
    package func advanceMirrorCursor(to sequence: Int64, ids: [(UUID, Int64)]) throws {
        try write { s in
            for (gid, pk) in ids { try s.mapID(gid, pk) }
            if try (s.mirrorValue(MirrorKeys.pullCursor) ?? 0) < sequence {
                try s.setMirrorValue(MirrorKeys.pullCursor, sequence)
            }
        }
    }

    /// Records which row each pushed object is (`ss_mirror_ids`), in one write transaction (a
    /// mirror does it in its next import otherwise).
    package func noteMirrorIDs(_ ids: [(UUID, Int64)]) throws {
        guard !ids.isEmpty else { return }
        try write { s in for (gid, pk) in ids { try s.mapID(gid, pk) } }
    }

    /// The mirror's state value `key` (nil: never set, or no mirror yet).
    package func mirrorValue(_ key: String) throws -> Int64? {
        try read { s in try s.hasMirrorTables() ? s.mirrorValue(key) : nil }
    }

    /// How many history transactions after `token` are not `author`'s (a mirror's unpushed).
    package func historyCount(after token: Int64, excludingAuthor author: String) throws -> Int {
        try readOneStatement { s in try s.historyCount(after: token, excludingAuthor: author) }
    }

    /// The changes to upload for each of `transactions` (one read): for an insert or update, the
    /// object's state now (a deletion when it is gone since); for a delete, the delete. Changes
    /// recorded without a global id (history from before them) are left out. Also returns the
    /// row of each object exported (``MirrorObject/originKey``), for `ss_mirror_ids`.
    package func mirrorExport(_ transactions: [HistoryTransaction]) throws -> [[MirrorChange]] {
        try read { s in
            var targets: [ObjectID: UUID] = [:]
            return try transactions.map { t in
                var seen = Set<ObjectID>()
                var out: [MirrorChange] = []
                for change in t.changes {
                    guard let gid = change.globalID, seen.insert(change.objectID).inserted,
                        let e = model.entity(named: change.objectID.entity)
                    else { continue }
                    guard change.kind != .delete else {
                        out.append(.delete(entity: e.name, globalID: gid))
                        continue
                    }
                    // Rows are never reused (AUTOINCREMENT). When the row is gone, the object
                    // may live on under its global id: merged into another by a collision (the
                    // id is an alias now).
                    if let object = try exportObject(s, e, change.objectID.primaryKey, &targets) {
                        out.append(.upsert(object))
                        continue
                    }
                    // Merged into another: the change goes up under its own id with the state of
                    // the object it became, so that every machine merges the two alike (its
                    // uniqueness values are the winner's now).
                    let current = try MirrorImporter.resolve(s, gid)
                    if let pk = try s.mirroredKey(e, current), var object = try exportObject(s, e, pk, &targets) {
                        if current != gid {
                            object.globalID = gid
                            object.originKey = nil
                        }
                        out.append(.upsert(object))
                    } else {
                        out.append(.delete(entity: e.name, globalID: gid))
                    }
                }
                return out
            }
        }
    }

    /// The order of a full upload: an entity after those its to-one relationships point to, so
    /// that a receiver has each target before what refers to it; then, again, the entities
    /// whose references that order cannot settle (cycles, references within the entity,
    /// many-to-many links, which need both sides).
    package var mirrorUploadOrder: (first: [String], again: [String]) {
        var order: [Entity] = []
        var placed = Set<String>()
        var left = model.entities
        while let i = left.firstIndex(where: { e in
            e.toOneRelationships.allSatisfy { placed.contains($0.destination) || $0.destination == e.name }
        }) {
            let e = left.remove(at: i)
            order.append(e)
            placed.insert(e.name)
        }
        order += left
        let again = order.filter { e in
            left.contains { $0.name == e.name } || e.toOneRelationships.contains { $0.destination == e.name }
                || e.toManyRelationships.contains { model.joinTable(e, $0)?.isOwner == true }
        }
        return (order.map(\.name), again.map(\.name))
    }

    /// Through which token history was deleted (0: never).
    package func historyDeletedThrough() throws -> Int64 {
        try read { s in try s.historyMeta().floor }
    }

    /// One object's state; `targets` remembers the global ids of to-one targets read so far (a
    /// batch of articles names few categories).
    func exportObject(_ s: SQLStore, _ e: Entity, _ pk: Int64, _ targets: inout [ObjectID: UUID]) throws
        -> MirrorObject?
    {
        guard let (snapshot, gid) = try s.snapshotWithGlobalID(e, pk) else { return nil }
        var values: [String: Value] = [:]
        for a in e.attributes where !a.isDerived { values[a.name] = snapshot[a.name] }
        var toOne: [String: UUID] = [:]
        for r in e.toOneRelationships {
            guard let target = snapshot.relationships[r.name] else { continue }
            if let known = targets[target] {
                toOne[r.name] = known
            } else if let id = try s.globalID(try model.entity(r.destination), target.primaryKey) {
                targets[target] = id
                toOne[r.name] = id
            }
        }
        var toMany: [String: [UUID]] = [:]
        for r in e.toManyRelationships {
            guard let join = model.joinTable(e, r), join.isOwner else { continue }
            let destination = try model.entity(r.destination)
            toMany[r.name] = try s.linked(join, to: pk).compactMap { try s.globalID(destination, $0) }
        }
        return MirrorObject(
            entity: e.name, globalID: gid, values: values, toOne: toOne, toMany: toMany, originKey: pk)
    }

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
        sequence: Int64, changes: [MirrorChange], uploaded: [UUID: Int64], unpushedAfter: Int64,
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
            importer.older = (modelVersion ?? model.version) < model.version
            // Every update applies, also to objects this store holds a newer state of, so that
            // what it does beyond the object (a collision that makes two objects one) happens
            // here as everywhere else; then this store's newer states go back on top, as its
            // later upload will put them everywhere.
            let newer = try newerStates(s, changes, importer)
            for change in changes { try importer.apply(change) }
            for state in newer { try importer.apply(state, again: true) }
            try importer.relate()
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
    private func unpushedObjects(_ s: SQLStore, after token: Int64, author: String) throws
        -> (gids: Set<UUID>, rows: [UUID: ObjectID])
    {
        let query = SQLStore.historyQuery(HistoryFilter(authors: nil, excludedAuthors: [author]))
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
    private func newerStates(_ s: SQLStore, _ changes: [MirrorChange], _ importer: MirrorImporter) throws
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

/// The keys of the mirror's state in the store.
package enum MirrorKeys {
    /// The server sequence applied last.
    package static let pullCursor = "pull_cursor"
}
