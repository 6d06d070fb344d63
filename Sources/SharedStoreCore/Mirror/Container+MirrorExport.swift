import Foundation
import SharedStoreSQLite
import SharedStoreSupport

extension Container {
    /// Makes the mirror's tables (idempotent).
    package func prepareMirroring() throws {
        try write { s in try SchemaSQL.createMirrorTables(s.c) }
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

    /// Which of `tokens` name a history transaction not of `author` (one read).
    package func historyTokens(among tokens: [Int64], excludingAuthor author: String) throws -> [Int64] {
        guard !tokens.isEmpty else { return [] }
        return try read { s in try s.historyTokens(among: tokens, excludingAuthor: author) }
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

    /// How far history was deleted (the token) and the time of the newest transaction deleted
    /// (seconds since 1970; 0 when none was), with the mean size of the newest `sample`
    /// transactions' changes: what a dashboard shows of history without reading all of it.
    package func historyCleaning(sample: Int = 200) throws -> (through: Int64, time: Double, meanBytes: Double) {
        try read { s in
            let meta = try s.historyMeta()
            return (meta.floor, meta.floorTime, try s.historyMeanBytes(sample: sample))
        }
    }

    /// One object's state; `targets` remembers the global ids of to-one targets read so far (a
    /// batch of articles names few categories).
    func exportObject(_ s: TransactionSQL, _ e: Entity, _ pk: Int64, _ targets: inout [ObjectID: UUID]) throws
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
}
