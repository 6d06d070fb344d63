import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// The tables a mirror keeps in the store (issue 14), made by its first run:
/// - `ss_mirror`: its state by key (the pull cursor: the server sequence applied last);
/// - `ss_mirror_ids`: the primary key of each object the mirror pushed or pulled, by global id
///   — how a pull finds the object a remote change names. (A unique index on each table's
///   global id column would do it too, but every save of the app would pay for it: a one-row
///   save went from 0.6 to 0.5 of a raw insert, measured. The mirror fills this table itself,
///   a batch per push.)
/// - `ss_mirror_alias`: global ids that name another object here (the loser of a collision of
///   uniqueness constraints, pointing at the winner).
/// - `ss_mirror_quarantine`: server rows that could not be applied here (with the server's
///   sequence) and local changes that could not go up (without one), each with its reason.
/// - `ss_mirror_reclaim`: while a restored store pulls back its lost rows, the server keys of
///   those rows, as found when the pull-back started (a restart cannot tell them again once this
///   copy made uploads of its own).
extension TransactionSQL {
    /// Records a row that could not be applied (`sequence` non-nil: a server row) or a local
    /// change that could not go up (`gid`: its object); a server row is recorded once.
    func quarantine(_ row: MirrorQuarantine) throws {
        try c.cached(
            "INSERT INTO ss_mirror_quarantine(sequence, origin, token, gid, reason, at) VALUES (?, ?, ?, ?, ?, ?) "
                + "ON CONFLICT(sequence) DO UPDATE SET reason = excluded.reason, at = excluded.at"
        ).execute([
            row.sequence.map(SQLValue.integer) ?? .null, .text(row.origin.uuidString.lowercased()),
            .integer(row.token), row.globalID.map { .blob(GlobalID.bytes($0)) } ?? .null, .text(row.reason),
            .double(row.at),
        ])
    }

    /// Every quarantined row, server rows first in the server's order.
    func quarantined() throws -> [MirrorQuarantine] {
        try c.cached(
            "SELECT sequence, origin, token, gid, reason, at FROM ss_mirror_quarantine "
                + "ORDER BY sequence IS NULL, sequence, id"
        ).rows([]) { row in
            MirrorQuarantine(
                sequence: row.isNull(0) ? nil : row.int64(0), origin: UUID(uuidString: row.text(1)) ?? UUID(),
                token: row.int64(2), globalID: row.isNull(3) ? nil : GlobalID.uuid(row.blob(3)), reason: row.text(4),
                at: row.double(5))
        }
    }

    /// Removes the quarantined server row `sequence`.
    func unquarantine(sequence: Int64) throws {
        try c.cached("DELETE FROM ss_mirror_quarantine WHERE sequence = ?").execute([.integer(sequence)])
    }

    /// Removes what was quarantined of local changes to `gid` (it went up since).
    func unquarantine(globalID gid: UUID) throws {
        try c.cached("DELETE FROM ss_mirror_quarantine WHERE sequence IS NULL AND gid = ?").execute([
            .blob(GlobalID.bytes(gid))
        ])
    }

    /// Every row of the global id column `gid` names, entity by entity (more than one: two
    /// objects share a global id).
    func objects(withGlobalID gid: UUID) throws -> [(Entity, Int64)] {
        var out: [(Entity, Int64)] = []
        for e in model.entities {
            let table = SQLMapping.quote(e.name)
            let sql = "SELECT \(StoreColumn.primaryKey) FROM \(table) WHERE \(StoreColumn.globalID) = ?"
            for pk in try c.cached(sql).rows([.blob(GlobalID.bytes(gid))], { $0.int64(0) }) { out.append((e, pk)) }
        }
        return out
    }

    /// Where the mirror's map names `gid` as a row of another entity than `e`: that entity's name.
    func mappedEntity(_ gid: UUID, other e: Entity) throws -> String? {
        guard
            let pk = try c.cached("SELECT pk FROM ss_mirror_ids WHERE gid = ?").firstRow(
                [.blob(GlobalID.bytes(gid))], { $0.int64(0) })
        else { return nil }
        for x in model.entities where x.name != e.name {
            if try globalID(x, pk) == gid { return x.name }
        }
        return nil
    }

    /// Global ids held by more than one object (of one entity or of several), with how many.
    func duplicateGlobalIDs(limit: Int) throws -> [(UUID, Int64)] {
        let union = model.entities.map { "SELECT \(StoreColumn.globalID) AS g FROM \(SQLMapping.quote($0.name))" }
            .joined(separator: " UNION ALL ")
        return try c.cached(
            "SELECT g, count(*) FROM (\(union)) WHERE g IS NOT NULL GROUP BY g HAVING count(*) > 1 LIMIT ?"
        ).rows([.integer(Int64(limit))]) { row in (GlobalID.uuid(row.blob(0)) ?? UUID(), row.int64(1)) }
    }

    func hasMirrorTables() throws -> Bool {
        try c.cached("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'ss_mirror'").firstRow { _ in true }
            ?? false
    }

    /// ``hasMirrorTables()`` inside a write transaction after a statement of it ran: from the
    /// connection's schema, which is then the file's, with no query; remembered while no other
    /// connection commits (see ``Container/write(lease:_:)``).
    func hasMirrorTablesInWrite() -> Bool { c.hasTableRemembered("ss_mirror") }

    func mirrorValue(_ key: String) throws -> Int64? {
        try c.cached("SELECT value FROM ss_mirror WHERE key = ?").firstRow([.text(key)]) { $0.int64(0) }
    }

    /// The server keys of the rows a restored store pulls back (`ss_mirror_reclaim`).
    func reclaimedKeys() throws -> Set<Int64> {
        Set(try c.cached("SELECT token FROM ss_mirror_reclaim").rows { $0.int64(0) })
    }

    /// Records `keys` among the rows a restored store pulls back.
    func addReclaimedKeys(_ keys: some Sequence<Int64>) throws {
        let insert = try c.cached("INSERT OR IGNORE INTO ss_mirror_reclaim(token) VALUES (?)")
        for key in keys { try insert.execute([.integer(key)]) }
    }

    /// Forgets the rows a restored store pulled back (its pull-back ended).
    func clearReclaimedKeys() throws {
        try c.cached("DELETE FROM ss_mirror_reclaim").execute()
    }

    func setMirrorValue(_ key: String, _ value: Int64) throws {
        try c.cached(
            "INSERT INTO ss_mirror(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"
        ).execute([.text(key), .integer(value)])
    }

    /// Records that object `gid` is row `pk` here.
    func mapID(_ gid: UUID, _ pk: Int64) throws {
        try c.cached("INSERT INTO ss_mirror_ids(gid, pk) VALUES (?, ?) ON CONFLICT(gid) DO UPDATE SET pk = excluded.pk")
            .execute([.blob(GlobalID.bytes(gid)), .integer(pk)])
    }

    /// The object of `e` whose global id is `gid` (nil: none here, deleted, or one of another
    /// entity), through the mirror's map. An entry that names a row which is no longer that
    /// object (its row was recorded wrongly: the object was made again since) is corrected by
    /// reading the table; global ids have no index (it would slow every save of the app).
    func mirroredKey(_ e: Entity, _ gid: UUID) throws -> Int64? {
        let bytes = SQLValue.blob(GlobalID.bytes(gid))
        guard let pk = try c.cached("SELECT pk FROM ss_mirror_ids WHERE gid = ?").firstRow([bytes], { $0.int64(0) })
        else { return nil }
        if try globalID(e, pk) == gid { return pk }
        let key = StoreColumn.primaryKey
        return try c.cached(
            "SELECT \(key) FROM \(SQLMapping.quote(e.name)) WHERE \(StoreColumn.globalID) = ? ORDER BY \(key) LIMIT 1"
        ).firstRow([bytes]) { $0.int64(0) }
    }

    /// Whether the mirror's map names `gid` (an object this store pushed, pulled or mapped).
    func isMapped(_ gid: UUID) throws -> Bool {
        try c.cached("SELECT 1 FROM ss_mirror_ids WHERE gid = ?").firstRow([.blob(GlobalID.bytes(gid))]) { _ in true }
            ?? false
    }

    /// Maps every object of the store by its global id (one pass over each table): after a
    /// restore, whose copy may predate entries the mirror had not written yet.
    func rebuildMirrorIDs() throws {
        for e in model.entities {
            let (gid, key) = (StoreColumn.globalID, StoreColumn.primaryKey)
            try c.execute(
                "INSERT INTO ss_mirror_ids(gid, pk) SELECT \(gid), \(key) FROM "
                    + "\(SQLMapping.quote(e.name)) WHERE length(\(gid)) = 16 ORDER BY \(key) "
                    + "ON CONFLICT(gid) DO UPDATE SET pk = excluded.pk")
        }
    }

    /// The newest history transaction saved before `time` (seconds since 1970), if any.
    func newestHistoryToken(before time: Double) throws -> Int64? {
        try c.cached("SELECT max(token) FROM ss_history WHERE timestamp < ?").firstRow([.double(time)]) {
            $0.isNull(0) ? nil : $0.int64(0)
        } ?? nil
    }

    /// The oldest history transaction saved at or after `time` (nil: none kept).
    func oldestHistoryToken(from time: Double) throws -> Int64? {
        try c.cached("SELECT min(token) FROM ss_history WHERE timestamp >= ?").firstRow([.double(time)]) {
            $0.isNull(0) ? nil : $0.int64(0)
        } ?? nil
    }

    /// Records a merge to push (``MirrorImporter/noteMerge(_:loser:winner:)``).
    func recordMerge(_ entity: String, loser: UUID, winner: UUID) throws {
        try c.cached(
            "INSERT INTO ss_mirror_merges(loser, winner, entity) VALUES (?, ?, ?) "
                + "ON CONFLICT(loser) DO UPDATE SET winner = excluded.winner, entity = excluded.entity"
        ).execute([.blob(GlobalID.bytes(loser)), .blob(GlobalID.bytes(winner)), .text(entity)])
    }

    /// The merges waiting to be pushed, in no particular order.
    func recordedMerges() throws -> [(entity: String, loser: UUID, winner: UUID)] {
        try c.cached("SELECT entity, loser, winner FROM ss_mirror_merges").rows([]) { row in
            (row.text(0), GlobalID.uuid(row.blob(1)), GlobalID.uuid(row.blob(2)))
        }.compactMap { m in m.1.flatMap { l in m.2.map { (m.0, l, $0) } } }
    }

    /// Forgets recorded merges (pushed).
    func forgetMerges(_ losers: [UUID]) throws {
        let stmt = try c.cached("DELETE FROM ss_mirror_merges WHERE loser = ?")
        for l in losers { try stmt.execute([.blob(GlobalID.bytes(l))]) }
    }

    /// Every alias and the id it names (one step; ``MirrorImporter/resolve(_:_:)`` follows chains).
    func aliases() throws -> [(UUID, UUID)] {
        try c.cached("SELECT gid, target FROM ss_mirror_alias").rows([]) { row in
            (GlobalID.uuid(row.blob(0)), GlobalID.uuid(row.blob(1)))
        }.compactMap { pair in pair.0.flatMap { a in pair.1.map { (a, $0) } } }
    }

    /// Makes the alias table `aliases` (each id and the object it names), and nothing else: a
    /// mirror that settled takes the server log's aliases (``Container/mirrorReconcile``).
    func replaceAliases(_ aliases: [UUID: UUID]) throws {
        try c.cached("DELETE FROM ss_mirror_alias").execute()
        let insert = try c.cached("INSERT INTO ss_mirror_alias(gid, target) VALUES (?, ?)")
        for (gid, target) in aliases where gid != target {
            try insert.execute([.blob(GlobalID.bytes(gid)), .blob(GlobalID.bytes(target))])
        }
    }

    func alias(of gid: UUID) throws -> UUID? {
        try c.cached("SELECT target FROM ss_mirror_alias WHERE gid = ?").firstRow([.blob(GlobalID.bytes(gid))]) {
            GlobalID.uuid($0.blob(0))
        } ?? nil
    }

    /// Makes `gid` name `target` (the winner of a collision), and every id that named `gid`
    /// name `target` too: a chain of aliases stays one step long.
    func setAlias(_ gid: UUID, to target: UUID) throws {
        guard gid != target else { return }
        let (from, to) = (SQLValue.blob(GlobalID.bytes(gid)), SQLValue.blob(GlobalID.bytes(target)))
        try c.cached(
            "INSERT INTO ss_mirror_alias(gid, target) VALUES (?, ?) "
                + "ON CONFLICT(gid) DO UPDATE SET target = excluded.target"
        ).execute([from, to])
        try c.cached("UPDATE ss_mirror_alias SET target = ? WHERE target = ?").execute([to, from])
        // The winner itself is no alias any more (it was one of an object since merged into it).
        try c.cached("DELETE FROM ss_mirror_alias WHERE gid = ?").execute([to])
    }

    /// Gives object `pk` of `e` global id `gid` (the winner of a collision takes over the loser).
    func setGlobalID(_ e: Entity, _ pk: Int64, _ gid: UUID) throws {
        try c.cached("UPDATE \(SQLMapping.quote(e.name)) SET \(StoreColumn.globalID) = ? WHERE \(StoreColumn.isKey)")
            .execute([.blob(GlobalID.bytes(gid)), .integer(pk)])
    }

    /// How many history transactions after `token` are not `author`'s (a range of the table's
    /// key: only the rows after `token` are read).
    func historyCount(after token: Int64, excludingAuthor author: String) throws -> Int {
        try c.cached("SELECT count(*) FROM ss_history WHERE token > ? AND (author IS NULL OR author <> ?)")
            .firstRow([.integer(token), .text(author)]) { Int($0.int64(0)) } ?? 0
    }

    /// Which of `tokens` name a history transaction not of `author`.
    func historyTokens(among tokens: [Int64], excludingAuthor author: String) throws -> [Int64] {
        let statement = try c.cached("SELECT 1 FROM ss_history WHERE token = ? AND (author IS NULL OR author <> ?)")
        return try tokens.filter { t in try statement.firstRow([.integer(t), .text(author)]) { _ in true } ?? false }
    }

    /// Up to `limit` primary keys of `e` after `after`, in order.
    func primaryKeys(after: Int64, of e: Entity, limit: Int) throws -> [Int64] {
        let key = StoreColumn.primaryKey
        return try c.cached("SELECT \(key) FROM \(SQLMapping.quote(e.name)) WHERE \(key) > ? ORDER BY \(key) LIMIT ?")
            .rows([.integer(after), .integer(Int64(limit))]) { $0.int64(0) }
    }

    /// The stored object and its global id, in one statement (nil: no such row, or no id).
    func snapshotWithGlobalID(_ e: Entity, _ pk: Int64) throws -> (Snapshot, UUID)? {
        let sql = entitySQL(e)
        let (decoder, column) = (rows, sql.layout.globalIDColumn)
        let text = SelectFrame.select(
            sql.columns + [SelectFrame.column(StoreColumn.globalID)], from: e, where: SelectFrame.byPrimaryKey)
        return try c.cached(text).firstRow([.integer(pk)]) { row in
            GlobalID.uuid(row.blob(column)).map { (decoder.snapshot(row, sql.layout), $0) }
        } ?? nil
    }
}
