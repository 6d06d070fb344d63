import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// A server row a mirror could not apply, or a local change it could not upload (issue 19):
/// kept in the store, reported by every round and by `storectl verify` until it is applied.
package struct MirrorQuarantine: Sendable, Hashable {
    /// The server's sequence of the row (nil: a local change that did not go up).
    package var sequence: Int64?
    /// The store that made the transaction, and its token there.
    package var origin: UUID
    package var token: Int64
    /// The object whose change could not go up (local changes only).
    package var globalID: UUID?
    package var reason: String
    /// When it was quarantined (seconds since 1970).
    package var at: Double

    package init(sequence: Int64?, origin: UUID, token: Int64, globalID: UUID? = nil, reason: String, at: Double) {
        self.sequence = sequence
        self.origin = origin
        self.token = token
        self.globalID = globalID
        self.reason = reason
        self.at = at
    }
}

/// One object's state as every machine must agree on it: its stored attributes, its to-one
/// targets and its owned links, by global id (``MirrorObject`` without this store's row).
package struct MirrorState: Sendable, Hashable {
    package var entity: String
    package var values: [String: Value]
    package var toOne: [String: UUID]
    package var toMany: [String: Set<UUID>]

    package init(_ o: MirrorObject) {
        entity = o.entity
        values = o.values
        toOne = o.toOne
        toMany = o.toMany.mapValues(Set.init)
    }

    /// The state with every object it names taken as the object it stands for here
    /// (`aliases`: ids merged into others by collisions).
    package func resolved(_ aliases: [UUID: UUID]) -> MirrorState {
        guard !aliases.isEmpty else { return self }
        var out = self
        out.toOne = toOne.mapValues { aliases[$0] ?? $0 }
        out.toMany = toMany.mapValues { Set($0.map { aliases[$0] ?? $0 }) }
        return out
    }

    /// A short text of the state, for a report (values as JSON-like text, ids in full).
    package var summary: String {
        let parts =
            values.keys.sorted().map { "\($0)=\(values[$0]?.description ?? "nil")" }
            + toOne.keys.sorted().map { "\($0)->\(GlobalID.text(toOne[$0] ?? UUID()))" }
            + toMany.keys.sorted().map {
                "\($0)=[\((toMany[$0] ?? []).map(GlobalID.text).sorted().joined(separator: ","))]"
            }
        return TextSafety.visible(parts.joined(separator: " "))
    }
}

extension Container {
    /// Quarantines `row`; for a server row, also moves the pull cursor past it and records
    /// `ids` (pending rows of `ss_mirror_ids`), in one write transaction, so that pulls go on.
    package func quarantineMirrorRow(_ row: MirrorQuarantine, ids: [(UUID, Int64)] = []) throws {
        try write { s in
            for (gid, pk) in ids { try s.mapID(gid, pk) }
            try s.quarantine(row)
            if let sequence = row.sequence, try (s.mirrorValue(MirrorKeys.pullCursor) ?? 0) < sequence {
                try s.setMirrorValue(MirrorKeys.pullCursor, sequence)
            }
        }
    }

    /// Every quarantined row (none when the store was never mirrored).
    package func quarantinedMirrorRows() throws -> [MirrorQuarantine] {
        try read { s in try s.hasMirrorTables() ? s.quarantined() : [] }
    }

    /// Forgets a quarantined server row (it was applied), or what was quarantined of a local
    /// object's changes (they went up).
    package func releaseQuarantine(sequence: Int64? = nil, globalIDs: [UUID] = []) throws {
        guard sequence != nil || !globalIDs.isEmpty else { return }
        try write { s in
            if let sequence { try s.unquarantine(sequence: sequence) }
            for g in globalIDs { try s.unquarantine(globalID: g) }
        }
    }

    /// Sets the mirror's state value `key`.
    package func setMirrorValue(_ key: String, _ value: Int64) throws {
        try write { s in try s.setMirrorValue(key, value) }
    }

    /// Sets the mirror's state values `values` in one write transaction: all or none.
    package func setMirrorValues(_ values: [(String, Int64)]) throws {
        try write { s in for (key, value) in values { try s.setMirrorValue(key, value) } }
    }

    /// The server keys of the lost rows a restored store pulls back, recorded when its pull-back
    /// started (``noteMirrorPullBack(_:reclaimed:)``).
    package func reclaimedMirrorKeys() throws -> Set<Int64> {
        try read { s in try s.reclaimedKeys() }
    }

    /// Records, in one write transaction, the state values `values` of a pull-back and the keys of
    /// the lost rows it pulls back (added to those recorded before).
    package func noteMirrorPullBack(_ values: [(String, Int64)], reclaimed: Set<Int64>) throws {
        try write { s in
            for (key, value) in values { try s.setMirrorValue(key, value) }
            try s.addReclaimedKeys(reclaimed)
        }
    }

    /// Ends a pull-back in one write transaction: sets `values`, forgets the keys of its rows,
    /// and moves the pull cursor to `cursor` (everything through it was read) with `ids` recorded.
    package func endMirrorPullBack(_ values: [(String, Int64)], cursor: Int64, ids: [(UUID, Int64)]) throws {
        try write { s in
            for (key, value) in values { try s.setMirrorValue(key, value) }
            try s.clearReclaimedKeys()
            for (gid, pk) in ids { try s.mapID(gid, pk) }
            if try (s.mirrorValue(MirrorKeys.pullCursor) ?? 0) < cursor {
                try s.setMirrorValue(MirrorKeys.pullCursor, cursor)
            }
        }
    }

    /// Every object's state, by global id, and the newest token, read in one transaction: what a
    /// full upload compares with the server's state, and `storectl mirror --verify` too.
    package func mirrorExportEverything() throws -> (newest: HistoryToken, objects: [UUID: MirrorObject]) {
        try read { s in (HistoryToken(storeID: storeID, value: try s.currentToken()), try exportEverything(s)) }
    }

    /// Every object's state, by global id, in transaction `s`.
    func exportEverything(_ s: TransactionSQL) throws -> [UUID: MirrorObject] {
        var out: [UUID: MirrorObject] = [:]
        var targets: [ObjectID: UUID] = [:]
        for e in model.entities {
            var after: Int64 = 0
            while true {
                let keys = try s.primaryKeys(after: after, of: e, limit: 1000)
                for pk in keys {
                    if let o = try exportObject(s, e, pk, &targets) { out[o.globalID] = o }
                }
                guard keys.count == 1000, let last = keys.last else { break }
                after = last
            }
        }
        return out
    }

    /// Every global id that names another object here after collisions, with the object it
    /// names (chains followed).
    package func mirrorAliases() throws -> [UUID: UUID] {
        try read { s in
            guard try s.hasMirrorTables() else { return [:] }
            var out: [UUID: UUID] = [:]
            for (gid, _) in try s.aliases() {
                let target = try MirrorImporter.resolve(s, gid)
                if target != gid { out[gid] = target }
            }
            return out
        }
    }

    /// The merges this store made that involve its own newer changes, to push before them
    /// (see ``MirrorChange/merge(entity:loser:winner:)``).
    package func recordedMirrorMerges() throws -> [MirrorChange] {
        try read { s in
            guard try s.hasMirrorTables() else { return [] }
            return try s.recordedMerges().map { .merge(entity: $0.entity, loser: $0.loser, winner: $0.winner) }
        }
    }

    /// Maps every object by its global id again (``Mirror`` does it when a restore is found).
    package func rebuildMirrorIDs() throws {
        try write { s in try s.rebuildMirrorIDs() }
    }

    /// Of `gids`, those this store never knew: no object holds them and the mirror's map does not
    /// name them (it names every object the mirror pushed, before the push, and every one it
    /// pulled). Maps every object again first when some are not in the map (one pass over each
    /// table), for a copy whose map predates its objects.
    package func unknownGlobalIDs(_ gids: Set<UUID>) throws -> Set<UUID> {
        func unmapped() throws -> Set<UUID> { try read { s in try gids.filter { try !s.isMapped($0) } } }
        guard !gids.isEmpty, !(try unmapped()).isEmpty else { return [] }
        try rebuildMirrorIDs()
        return try unmapped()
    }

    /// The newest local transaction saved before `time` (seconds since 1970; nil: none kept).
    package func newestHistoryToken(before time: Double) throws -> Int64? {
        try read { s in try s.newestHistoryToken(before: time) }
    }

    /// The oldest local transaction saved at or after `time` (seconds since 1970; nil: none kept).
    package func oldestHistoryToken(from time: Double) throws -> Int64? {
        try read { s in try s.oldestHistoryToken(from: time) }
    }

    /// Forgets recorded merges that went up.
    package func forgetMirrorMerges(_ losers: [UUID]) throws {
        guard !losers.isEmpty else { return }
        try write { s in try s.forgetMerges(losers) }
    }

    /// The object `gid` stands for here after collisions (itself when it is no alias).
    package func mirrorResolve(_ gid: UUID) throws -> UUID {
        try read { s in try s.hasMirrorTables() ? MirrorImporter.resolve(s, gid) : gid }
    }

    /// Why `object` cannot be uploaded (nil: it can): a value the model refuses, as a save
    /// would refuse it — a row a foreign tool wrote around the model. Every machine would have
    /// to refuse it too.
    package func mirrorUploadProblem(_ object: MirrorObject) -> String? {
        guard let e = model.entity(named: object.entity) else { return "\(object.entity) is not in this model" }
        let name = "\(e.name) \(GlobalID.text(object.globalID))"
        do {
            for a in e.attributes where !a.isDerived {
                _ = try validator.validate(object.values[a.name] ?? a.defaultValue, a, object: name)
            }
            return nil
        } catch {
            return "\(error)"
        }
    }

    /// Global ids that more than one object holds here (at most `limit`), with how many.
    package func duplicateGlobalIDs(limit: Int = 20) throws -> [(UUID, Int64)] {
        try read { s in try s.duplicateGlobalIDs(limit: limit) }
    }

    /// What the token sequence of this store holds for `token`: nil when the store holds no
    /// transaction of that number (lost, cleaned, or ahead), else the transaction's timestamp.
    package func historyTimestamp(of token: Int64) throws -> Double? {
        guard token > 0 else { return nil }
        // History cleaned through it, or a lost number: the store holds no such transaction.
        guard
            let found = try? fetchHistory(
                HistoryRequest(after: HistoryToken(storeID: storeID, value: token - 1), limit: 1)),
            let t = found.first, t.token.value == token
        else { return nil }
        return t.timestamp.timeIntervalSince1970
    }
}
