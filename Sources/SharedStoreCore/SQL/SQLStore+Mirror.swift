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
extension SQLStore {
    static let mirrorTable = "ss_mirror"

    static func createMirrorTables(_ c: SQLiteConnection) throws {
        try c.execute(
            """
            CREATE TABLE IF NOT EXISTS ss_mirror(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS ss_mirror_ids(gid BLOB PRIMARY KEY, pk INTEGER NOT NULL) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS ss_mirror_alias(gid BLOB PRIMARY KEY, target BLOB NOT NULL) WITHOUT ROWID;
            """)
    }

    func hasMirrorTables() throws -> Bool {
        try c.cached("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'ss_mirror'").firstRow { _ in true }
            ?? false
    }

    func mirrorValue(_ key: String) throws -> Int64? {
        try c.cached("SELECT value FROM ss_mirror WHERE key = ?").firstRow([.text(key)]) { $0.int64(0) }
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

    /// The object of `e` the mirror knows as `gid` (checked against the row: a deleted object's
    /// entry, or one of another entity, finds nothing).
    func mirroredKey(_ e: Entity, _ gid: UUID) throws -> Int64? {
        guard
            let pk = try c.cached("SELECT pk FROM ss_mirror_ids WHERE gid = ?").firstRow(
                [.blob(GlobalID.bytes(gid))],
                {
                    $0.int64(0)
                })
        else { return nil }
        return try globalID(e, pk) == gid ? pk : nil
    }

    func alias(of gid: UUID) throws -> UUID? {
        try c.cached("SELECT target FROM ss_mirror_alias WHERE gid = ?").firstRow([.blob(GlobalID.bytes(gid))]) {
            GlobalID.uuid($0.blob(0))
        } ?? nil
    }

    func setAlias(_ gid: UUID, to target: UUID) throws {
        try c.cached(
            "INSERT INTO ss_mirror_alias(gid, target) VALUES (?, ?) "
                + "ON CONFLICT(gid) DO UPDATE SET target = excluded.target"
        ).execute([.blob(GlobalID.bytes(gid)), .blob(GlobalID.bytes(target))])
    }

    /// Gives object `pk` of `e` global id `gid` (the winner of a collision takes over the loser).
    func setGlobalID(_ e: Entity, _ pk: Int64, _ gid: UUID) throws {
        try c.cached("UPDATE \(SQLMapping.quote(e.name)) SET \(Self.globalIDColumn) = ? WHERE Z_PK = ?").execute([
            .blob(GlobalID.bytes(gid)), .integer(pk),
        ])
    }

    /// How many history transactions after `token` are not `author`'s (a range of the table's
    /// key: only the rows after `token` are read).
    func historyCount(after token: Int64, excludingAuthor author: String) throws -> Int {
        try c.cached("SELECT count(*) FROM ss_history WHERE token > ? AND (author IS NULL OR author <> ?)")
            .firstRow([.integer(token), .text(author)]) { Int($0.int64(0)) } ?? 0
    }

    /// Up to `limit` primary keys of `e` after `after`, in order.
    func primaryKeys(after: Int64, of e: Entity, limit: Int) throws -> [Int64] {
        try c.cached("SELECT Z_PK FROM \(SQLMapping.quote(e.name)) WHERE Z_PK > ? ORDER BY Z_PK LIMIT ?")
            .rows([.integer(after), .integer(Int64(limit))]) { $0.int64(0) }
    }

    /// The stored object and its global id, in one statement (nil: no such row, or no id).
    func snapshotWithGlobalID(_ e: Entity, _ pk: Int64) throws -> (Snapshot, UUID)? {
        let sql = entitySQL(e)
        let column = Int32(2 + sql.layout.types.count + sql.layout.toOneNames.count)
        return try c.cached(
            "SELECT \(sql.columns), t0.\(Self.globalIDColumn) FROM \(SQLMapping.quote(e.name)) AS t0 WHERE t0.Z_PK = ?"
        ).firstRow([.integer(pk)]) { row in
            GlobalID.uuid(row.blob(column)).map { (container.snapshot(row, sql.layout), $0) }
        } ?? nil
    }
}
