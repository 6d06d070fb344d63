import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// The tables a mirror keeps in the store (issue 14), made by its first run:
/// - `ss_mirror`: its state by key (the pull cursor: the server sequence applied last);
/// - `ss_mirror_objects`: for each object this store uploaded, the server sequence of its last
///   upload (a remote change ordered before it is older, and is not applied);
/// - `ss_mirror_alias`: global ids that name another object here (the loser of a collision of
///   uniqueness constraints, pointing at the winner).
extension SQLStore {
    static let mirrorTable = "ss_mirror"

    static func createMirrorTables(_ c: SQLiteConnection) throws {
        try c.execute(
            """
            CREATE TABLE IF NOT EXISTS ss_mirror(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS ss_mirror_objects(gid BLOB PRIMARY KEY, sequence INTEGER NOT NULL) WITHOUT ROWID;
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

    /// The server sequence of this store's last upload of object `gid`.
    func uploadedSequence(_ gid: UUID) throws -> Int64? {
        try c.cached("SELECT sequence FROM ss_mirror_objects WHERE gid = ?").firstRow([.blob(GlobalID.bytes(gid))]) {
            $0.int64(0)
        }
    }

    func noteUploaded(_ gid: UUID, sequence: Int64) throws {
        try c.cached(
            """
            INSERT INTO ss_mirror_objects(gid, sequence) VALUES (?, ?)
            ON CONFLICT(gid) DO UPDATE SET sequence = max(sequence, excluded.sequence)
            """
        ).execute([.blob(GlobalID.bytes(gid)), .integer(sequence)])
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
}
