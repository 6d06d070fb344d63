import Foundation
import ReadLater
import SharedStore
import SharedStoreMirror
import SharedStorePostgres
import Synchronization
import Testing

@testable import SharedStoreCore

/// Logs of the first retention layout, and administrators working at once.
extension MirrorRetentionTests {
    /// A space pruned by the first layout (snapshots keyed by their sequence, pruned keys as a
    /// range) is refused by a mirror until upgraded; the upgrade keeps its whole snapshot (a head
    /// with no part is dropped) and what it pruned stays known.
    @Test func aSpaceOfTheFirstRetentionLayoutKeepsItsSnapshotAndPrunedKeys() throws {
        let server = Server()
        let (space, role) = try server.member("first")
        let writer = try Machine(server, role: role, space: space, snapshotEvery: 1)
        var reference: [String: String] = [:]
        var ids: [String: ObjectID] = [:]
        var rng = SeededGenerator(seed: 37)
        try Self.write(5, in: writer, live: 5, reference: &reference, ids: &ids, rng: &rng, tag: "a")
        _ = try writer.mirror.round()
        _ = try writer.mirror.round()
        #expect(try server.admin.prune(space, goneAfter: 0).prunedThrough == 5)
        let admin = try PostgresConnection(try #require(server.database).conninfo)
        let s = MirrorServer.spacePrefix + space
        for statement in [
            """
            CREATE TABLE \(s).snapshots(through bigint PRIMARY KEY, chunks int NOT NULL, objects bigint NOT NULL,
                made_by uuid, made_at timestamptz NOT NULL DEFAULT now())
            """,
            """
            CREATE TABLE \(s).snapshot_chunks(through bigint NOT NULL, chunk int NOT NULL, payload text NOT NULL,
                PRIMARY KEY (through, chunk))
            """,
            "INSERT INTO \(s).snapshots SELECT through, parts, objects, made_by, made_at FROM \(s).snapshot_heads",
            """
            INSERT INTO \(s).snapshot_chunks SELECT h.through, p.part, p.payload
            FROM \(s).snapshot_parts p JOIN \(s).snapshot_heads h USING (id)
            """,
            "INSERT INTO \(s).snapshots(through, chunks, objects) VALUES (5000, 0, 0)",
            "DROP TABLE \(s).snapshot_parts, \(s).snapshot_heads, \(s).pruned_keys",
            "ALTER TABLE \(s).pruned_origins DROP COLUMN legacy_max",
            "ALTER TABLE \(s).cursors DROP CONSTRAINT cursor_not_negative",
            // The very first commit's cursors: one per store, no role, no row-level security.
            "DROP POLICY cursors_read ON \(s).cursors", "DROP POLICY cursors_insert ON \(s).cursors",
            "DROP POLICY cursors_update ON \(s).cursors", "ALTER TABLE \(s).cursors DISABLE ROW LEVEL SECURITY",
            "ALTER TABLE \(s).cursors DROP CONSTRAINT cursors_pkey", "ALTER TABLE \(s).cursors DROP COLUMN role",
            "ALTER TABLE \(s).cursors ADD PRIMARY KEY (origin)", "DROP TABLE \(s).origins",
            "DELETE FROM \(s).meta WHERE key = 'retention_layout'",
        ] {
            try admin.execute(statement)
        }
        let refused = #expect(throws: (any Error).self) { _ = try Machine(server, role: role, space: space) }
        #expect("\(refused.map { "\($0)" } ?? "")".contains("storectl mirror-admin --upgrade \(space)"))
        try server.admin.upgrade(space)
        let log = try MirrorServer(connection: try server.connect(as: role), space: space)
        #expect(try log.newestSnapshot()?.through == 5)
        let again = try log.upload(
            origin: writer.container.storeID, token: 3, author: "MainApp", payload: #"{"v":1,"model":3,"changes":[]}"#)
        #expect(again == nil, "a key pruned by the first layout stays known")
        let newcomer = try Machine(server, role: role, space: space)
        try Self.write(2, in: writer, live: 7, reference: &reference, ids: &ids, rng: &rng, tag: "b")
        try MirrorTests.settle([writer.mirror, newcomer.mirror])
        #expect(try newcomer.articles == reference)
        #expect(try newcomer.mirror.verify().isEmpty)
    }

    /// Administrators at once: upgrades (as a prune and a move make) of one space from two
    /// connections take turns instead of failing; a member that holds the upload lock makes
    /// uploads and prunes fail after their wait with an error naming its role and the session to
    /// end; `--prune-all` prunes every space it can and fails at the end naming the one it could
    /// not.
    @Test(.tags(.multiProcess)) func administratorsAtOnceAndASpaceThatCannotBePruned() throws {
        let server = Server()
        let (good, bad) = (try server.space("good"), try server.space("bad"))
        let role = try server.role("admins")
        try server.admin.grant(good, to: role)
        let conninfo = try #require(server.database).conninfo
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 2) { _ in
            do {
                let spaces = MirrorSpaces(connection: try PostgresConnection(conninfo))
                for _ in 0..<10 {
                    try spaces.upgrade(good)
                    _ = try spaces.prune(good, goneAfter: 0)
                }
            } catch {
                failures.withLock { $0.append("\(error)") }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty)
        let holder = try server.connect(as: role)
        try holder.execute("BEGIN")
        try holder.execute("SELECT 1 FROM \(MirrorServer.spacePrefix + good).upload_lock WHERE id = 1 FOR UPDATE")
        var upload = try MirrorServer(connection: try server.connect(as: role), space: good)
        upload.uploadLockWait = 0.2
        var prune = try MirrorServer(connection: try PostgresConnection(conninfo), space: good)
        prune.adminLockWait = 0.2
        for attempt in [
            { _ = try upload.upload(origin: UUID(), token: 1, author: nil, payload: "{}") },
            { _ = try prune.prune(goneAfter: 0) },
        ] {
            let error = #expect(throws: PostgresError.self) { try attempt() }
            #expect(error?.sqlState == "55P03")
            #expect(error?.message.contains("held by role '\(role)'") == true, "\(String(describing: error))")
            #expect(error?.message.contains("pg_terminate_backend(") == true, "\(String(describing: error))")
        }
        try holder.execute("ROLLBACK")
        // A member that inserts a row without taking the lock takes it with the row (the order
        // trigger does), so an upload it stalls names it too (a hostile review saw "canceling
        // statement due to lock timeout", naming no one).
        let schema = MirrorServer.spacePrefix + good
        try holder.execute("BEGIN")
        try holder.execute(
            """
            INSERT INTO \(schema).transactions(sequence, origin, token, author, payload)
            SELECT greatest(coalesce(max(sequence), 0),
                (SELECT value::bigint FROM \(schema).meta WHERE key = 'pruned_through')) + 1, $1, 777, 'Evil', '{}'
            FROM \(schema).transactions
            """, [UUID().uuidString.lowercased()])
        let stalled = #expect(throws: PostgresError.self) {
            _ = try upload.upload(origin: UUID(), token: 1, author: nil, payload: "{}")
        }
        #expect(stalled?.message.contains("held by role '\(role)'") == true, "\(String(describing: stalled))")
        try holder.execute("ROLLBACK")
        _ = try prune.prune(goneAfter: 0)
        let admin = try PostgresConnection(conninfo)
        try admin.execute("DROP TABLE \(MirrorServer.spacePrefix + bad).snapshot_heads CASCADE")
        let child = try Child(
            "storectl", ["mirror-admin", "--prune-all", "--gone-after", "0", "--json"],
            environment: try #require(server.database).environment)
        #expect(try child.waitForExit() != 0)
        #expect(child.lines.contains { $0.contains("\"space\":\"\(good)\",\"pruned_through\"") }, "\(child.lines)")
        #expect(child.lines.contains { $0.contains("\"space\":\"\(bad)\",\"error\"") }, "\(child.lines)")
    }
}

/// A small deterministic generator (SplitMix64), so that a failing seed can be run again.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
