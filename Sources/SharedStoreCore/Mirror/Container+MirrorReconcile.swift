import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// What a settled mirror's reconciliation did.
package struct MirrorReconcileResult: Sendable {
    /// Objects written (made, changed or deleted) to take the log's state.
    package var written = 0
    /// Objects that still differ after it (they stay for `storectl mirror --verify` to name).
    package var left = 0
}

extension Container {
    /// Makes every object here the state the server's log gives it (`server`, by global id, and
    /// the log's aliases), in one local transaction of `author`, when this store holds nothing
    /// newer than the log: no local change after `unpushedAfter` (other authors than `author`),
    /// no merge to upload and nothing quarantined. Returns nil, writing nothing, when it does.
    ///
    /// A mirror applies remote changes around its own unpushed ones, so a collision on a
    /// uniqueness constraint here can differ from the one the server's order makes (a category
    /// renamed here before a remote one took its old name). Once everything went up and came
    /// down, the log alone says what each object is: every store that settles becomes the same
    /// state, whatever its own order was (issue 19).
    ///
    /// Objects the log does not have go first; then each one that differs takes the log's state
    /// in place. One whose uniqueness values another object here still holds waits for it; two
    /// that wait for each other (a swap of names) are settled by making one again under its
    /// global id. Relationships to objects made later in the pass are set at its end; the pass
    /// runs again while it changes something (at most four times).
    package func mirrorReconcile(
        to server: [UUID: MirrorObject], aliases: [UUID: UUID], unpushedAfter: Int64, author: String,
        contextName: String
    ) throws -> MirrorReconcileResult? {
        let outcome = try write { s -> (MirrorReconcileResult, HistoryToken?)? in
            guard try s.hasMirrorTables(), try s.historyCount(after: unpushedAfter, excludingAuthor: author) == 0,
                try s.recordedMerges().isEmpty, try s.quarantined().isEmpty
            else { return nil }
            try s.replaceAliases(aliases)
            // Every object by its global id: one saved here and never pushed is in no map yet.
            try s.rebuildMirrorIDs()
            var importer = MirrorImporter(s: s, sequence: Int64.max, unpushed: [], uploaded: [:])
            var result = MirrorReconcileResult()
            var touched = Set<UUID>()
            for _ in 0..<4 {
                let local = try exportEverything(s)
                let gone = local.values.filter { server[$0.globalID] == nil }
                let differing = server.values.filter { o in local[o.globalID].map(MirrorState.init) != MirrorState(o) }
                if gone.isEmpty && differing.isEmpty { break }
                try reconcilePass(&importer, gone: gone, differing: differing, touched: &touched)
            }
            let left = try exportEverything(s)
            result.left = Set(server.keys).union(left.keys).count { gid in
                left[gid].map(MirrorState.init) != server[gid].map(MirrorState.init)
            }
            result.written = touched.count
            try s.setMirrorValue(MirrorKeys.reconcile, result.left == 0 ? 0 : 2)
            let token = try importer.w.writeHistory(author: author, contextName: contextName)
            return (result, token)
        }
        guard let (result, token) = outcome else { return nil }
        didCommit(token)
        return result
    }

    /// One pass of ``mirrorReconcile(to:aliases:unpushedAfter:author:contextName:)``: deletes
    /// `gone`, then gives each of `differing` its state, those whose uniqueness values another
    /// object still holds after the ones they wait for.
    private func reconcilePass(
        _ importer: inout MirrorImporter, gone: [MirrorObject], differing: [MirrorObject], touched: inout Set<UUID>
    ) throws {
        for o in gone.sorted(by: { $0.globalID.uuidString < $1.globalID.uuidString }) {
            guard let e = model.entity(named: o.entity), let pk = o.originKey else { continue }
            try importer.w.delete(e, pks: [pk])
            touched.insert(o.globalID)
        }
        let order = mirrorUploadOrder.first
        var pending = differing.sorted { a, b in
            let (i, j) = (order.firstIndex(of: a.entity) ?? 0, order.firstIndex(of: b.entity) ?? 0)
            return i != j ? i < j : a.globalID.uuidString < b.globalID.uuidString
        }
        while !pending.isEmpty {
            var waiting: [MirrorObject] = []
            for o in pending {
                guard let e = model.entity(named: o.entity) else { continue }
                let own = try importer.key(e, o.globalID)
                let changes = try importer.propertyChanges(e, o)
                if let holder = try importer.w.existingUnique(e, changes, object: "\(e.name) \(o.globalID)"),
                    holder != own
                {
                    waiting.append(o)
                    continue
                }
                try importer.apply(.upsert(o))
                touched.insert(o.globalID)
            }
            if waiting.count == pending.count {
                // Each waits for another: one of them that is here is made again.
                let here = try waiting.lazy.compactMap { o -> (Entity, Int64)? in
                    guard let e = self.model.entity(named: o.entity), let pk = try importer.key(e, o.globalID)
                    else { return nil }
                    return (e, pk)
                }.first
                guard let (e, pk) = here else { break }
                try importer.w.delete(e, pks: [pk])
            }
            pending = waiting
        }
        try importer.relate()
        importer.related = []
    }
}
