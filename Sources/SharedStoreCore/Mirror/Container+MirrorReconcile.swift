import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// What a settled mirror's reconciliation did.
package struct MirrorReconcileResult: Sendable {
    /// Objects written (made, changed or deleted) to take the log's state.
    package var written = 0
    /// Objects that still differ after it: this store's own changes not pushed yet (they go up
    /// and come back), and those it could not put right (`storectl mirror --verify` names them).
    package var left = 0
    /// Of `left`, the objects of this store's unpushed changes and those they refer to, left as
    /// they are until those changes went up.
    package var unpushed = 0
}

/// The state a reconciliation works in: the store's transaction and what it must not touch.
private struct ReconcilePass {
    var importer: MirrorImporter
    let server: [UUID: MirrorObject]
    /// Every global id the log names (an object it never named was not made through history:
    /// left alone).
    let known: Set<UUID>
    /// Objects of this store's unpushed changes: left alone.
    let unpushed: Set<UUID>
    /// Objects those refer to (to-one targets, owned links): changed in place, never deleted or
    /// made again (a `nullify` rule would take the reference from an object left alone, and its
    /// push would carry that everywhere).
    let pinned: Set<UUID>
    var touched = Set<UUID>()

    func mayTouch(_ gid: UUID) -> Bool { known.contains(gid) && !unpushed.contains(gid) }
    func mayDelete(_ gid: UUID) -> Bool { mayTouch(gid) && !pinned.contains(gid) }
}

extension Container {
    /// Makes every object here the state the server's log gives it (`server`, by global id,
    /// `known`: every global id the log names, and the log's aliases), in one local transaction
    /// of `author`. Objects of local changes after `unpushedAfter` (other authors than `author`:
    /// not pushed yet) are left as they are, as are objects the log never named. Returns nil,
    /// writing nothing, while a merge waits to be uploaded, a row is quarantined, or history
    /// after `unpushedAfter` was deleted (changes not pushed could not be told apart).
    ///
    /// A mirror applies remote changes around its own unpushed ones, so a collision on a
    /// uniqueness constraint here can differ from the one the server's order makes (a category
    /// renamed here before a remote one took its old name). Once its changes went up and came
    /// down, the log alone says what each object is: every store that settles becomes the same
    /// state, whatever its own order was (issue 19).
    ///
    /// Each object that differs takes the log's state in place; one whose uniqueness values
    /// another object here holds waits for it (an object the log deleted or merged away goes at
    /// once when it holds them). Two that wait for each other (a swap of names) are settled by
    /// making one again under its global id. Relationships to objects made later in the pass are
    /// set at its end, and objects the log does not have go last, after what refers to them moved
    /// (a `deny` rule then finds nothing). The pass runs again while it changes something (at
    /// most four times).
    ///
    /// - Throws: what a save throws when the log's state cannot be written here (a `deny` rule
    ///   that still holds); nothing is written then.
    package func mirrorReconcile(
        to server: [UUID: MirrorObject], known: Set<UUID>, aliases: [UUID: UUID], unpushedAfter: Int64,
        author: String, contextName: String
    ) throws -> MirrorReconcileResult? {
        let outcome = try write { s -> (MirrorReconcileResult, HistoryToken?)? in
            guard try s.hasMirrorTables(), try s.recordedMerges().isEmpty, try s.quarantined().isEmpty,
                // History of changes not pushed was deleted (the mirror was evicted since its last
                // push): nothing here can tell them apart, and a full upload sends them first.
                try s.historyMeta().floor <= unpushedAfter
            else { return nil }
            let unpushed = try unpushedObjects(s, after: unpushedAfter, author: author).gids
            var pinned = Set<UUID>()
            if !unpushed.isEmpty {
                let before = try exportEverything(s)
                for gid in unpushed {
                    guard let o = before[gid] else { continue }
                    pinned.formUnion(o.toOne.values)
                    for targets in o.toMany.values { pinned.formUnion(targets) }
                }
            }
            // The log's aliases, but for ids of objects left alone here.
            try s.replaceAliases(aliases.filter { !unpushed.contains($0.key) && !pinned.contains($0.key) })
            // Every object by its global id: one saved here and never pushed is in no map yet.
            try s.rebuildMirrorIDs()
            var pass = ReconcilePass(
                importer: MirrorImporter(s: s, sequence: Int64.max, unpushed: [], uploaded: [:]), server: server,
                known: known, unpushed: unpushed, pinned: pinned)
            for _ in 0..<4 {
                let local = try exportEverything(s)
                let gone = local.values.filter { server[$0.globalID] == nil && pass.mayDelete($0.globalID) }
                let differing = server.values.filter { o in
                    pass.mayTouch(o.globalID) && local[o.globalID].map(MirrorState.init) != MirrorState(o)
                }
                if gone.isEmpty && differing.isEmpty { break }
                try reconcilePass(&pass, gone: gone, differing: differing)
            }
            let now = try exportEverything(s)
            let left = Set(server.keys).union(now.keys).filter { gid in
                now[gid].map(MirrorState.init) != server[gid].map(MirrorState.init)
            }
            var result = MirrorReconcileResult(written: pass.touched.count, left: left.count)
            result.unpushed = left.intersection(unpushed.union(pinned)).count
            // Done; or to try again once the unpushed changes went up; or not to be tried again
            // before another import marks the store (what is left is named by --verify).
            let mark: Int64 = left.isEmpty ? 0 : result.unpushed > 0 ? 1 : 2
            try s.setMirrorValue(MirrorKeys.reconcile, mark)
            let token = try pass.importer.w.writeHistory(author: author, contextName: contextName)
            return (result, token)
        }
        guard let (result, token) = outcome else { return nil }
        didCommit(token)
        return result
    }

    /// One pass of the reconciliation: gives each of `differing` its state (those whose
    /// uniqueness values another object still holds after the ones they wait for), then deletes
    /// `gone`.
    private func reconcilePass(_ pass: inout ReconcilePass, gone: [MirrorObject], differing: [MirrorObject]) throws {
        var goneRows: [RowKey: MirrorObject] = [:]
        for o in gone { if let pk = o.originKey { goneRows[RowKey(entity: o.entity, pk: pk)] = o } }
        let order = mirrorUploadOrder.first
        var pending = differing.sorted { a, b in
            let (i, j) = (order.firstIndex(of: a.entity) ?? 0, order.firstIndex(of: b.entity) ?? 0)
            return i != j ? i < j : a.globalID.uuidString < b.globalID.uuidString
        }
        while !pending.isEmpty {
            // Each object that waits, with its row here (nil: not here) and the row it waits for.
            var waiting: [(object: MirrorObject, row: RowKey?, holder: RowKey)] = []
            for o in pending {
                guard let e = model.entity(named: o.entity) else { continue }
                let own = try pass.importer.key(e, o.globalID)
                let changes = try pass.importer.propertyChanges(e, o)
                if let holder = try pass.importer.w.existingUnique(e, changes, object: "\(e.name) \(o.globalID)"),
                    holder != own
                {
                    let key = RowKey(entity: e.name, pk: holder)
                    guard let loser = goneRows.removeValue(forKey: key) else {
                        waiting.append((o, own.map { RowKey(entity: e.name, pk: $0) }, key))
                        continue
                    }
                    // An object the log does not have holds them: it goes first.
                    try pass.importer.w.delete(e, pks: [holder])
                    pass.touched.insert(loser.globalID)
                }
                try pass.importer.apply(.upsert(o))
                pass.touched.insert(o.globalID)
            }
            if waiting.count == pending.count {
                // Objects that wait for each other (a swap of names): one of them is made again.
                // One that waits for an object left alone (an unpushed change) stays as it is.
                let rows = Set(waiting.compactMap(\.row))
                let holders = Set(waiting.map(\.holder))
                guard
                    let cycle = waiting.first(where: { w in
                        w.row.map(holders.contains) == true && rows.contains(w.holder)
                            && pass.mayDelete(w.object.globalID)
                    }), let row = cycle.row, let e = model.entity(named: row.entity)
                else { break }
                try pass.importer.w.delete(e, pks: [row.pk])
            }
            pending = waiting.map(\.object)
        }
        try pass.importer.relate()
        pass.importer.related = []
        // What the log does not have, after what refers to it moved.
        for (row, o) in goneRows.sorted(by: { ($0.key.entity, $0.key.pk) < ($1.key.entity, $1.key.pk) }) {
            guard let e = model.entity(named: row.entity), try pass.importer.s.exists(e, row.pk) else { continue }
            try pass.importer.w.delete(e, pks: [row.pk])
            pass.touched.insert(o.globalID)
        }
    }
}

/// A row of an entity's table.
private struct RowKey: Hashable {
    let entity: String
    let pk: Int64
}
