import Foundation
import ReadLater
import SharedStore
import SharedStoreMirror
import SharedStorePostgres
import Synchronization
import Testing

@testable import SharedStoreCore

/// Found by a hostile review: each was a silent divergence, a loss, or a space wedged for good.
extension MirrorRetentionTests {
    /// A machine of an older model cannot read a newer model's snapshot: it makes none (a snapshot
    /// built without it dropped every object it held), and a newcomer gets every object.
    @Test func anOlderAppMakesNoSnapshotFromANewerOnesAndDropsNothing() throws {
        let server = Server()
        let (space, role) = try server.member("models")
        let old = try Machine(server, role: role, space: space, model: try ReadLater.model(version: 1))
        let new = try Machine(server, role: role, space: space, snapshotEvery: 10)
        var reference: [String: String] = [:]
        var ids: [String: ObjectID] = [:]
        var rng = SeededGenerator(seed: 13)
        try Self.write(20, in: old, live: 20, reference: &reference, ids: &ids, rng: &rng, tag: "a")
        try MirrorTests.settle([old.mirror, new.mirror])
        #expect(try server.admin.prune(space, goneAfter: 3600).newestSnapshot != nil)
        var oldIDs: [String: ObjectID] = [:]
        old.mirror.snapshotEvery = 10
        try Self.write(20, in: old, live: 40, reference: &reference, ids: &oldIDs, rng: &rng, tag: "b")
        let round = try old.mirror.round()
        #expect(!round.snapshotMade && round.lag == 0, "the newest snapshot is the newer app's")
        _ = try server.admin.prune(space, goneAfter: 3600)
        let newcomer = try Machine(server, role: role, space: space)
        try MirrorTests.settle([old.mirror, new.mirror, newcomer.mirror])
        #expect(try newcomer.articles == reference && reference.count == 40)
        #expect(try newcomer.mirror.verify().isEmpty && new.mirror.verify().isEmpty)
    }

    /// A store that pushed transactions before a crash, then lost the record of it (its registry
    /// put back), and was pruned past meanwhile: their keys name pruned rows, which cannot say
    /// whether they are the same transactions. It stops and names --rejoin instead of uploading
    /// them again over another machine's later change.
    @Test(.tags(.multiProcess)) func keysOfPrunedRowsAreNeverUploadedAgainOverLaterChanges() throws {
        let server = Server()
        let (space, role) = try server.member("crash")
        let a = try Machine(server, role: role, space: space, snapshotEvery: 1)
        var b: Machine? = try Machine(server, role: role, space: space)
        let bGroup = try #require(b).group
        var reference: [String: String] = [:]
        var ids: [String: ObjectID] = [:]
        var rng = SeededGenerator(seed: 17)
        try Self.write(5, in: try #require(b), live: 7, reference: &reference, ids: &ids, rng: &rng, tag: "a")
        _ = try #require(b).mirror.round()
        try Self.write(2, in: try #require(b), live: 7, reference: &reference, ids: &ids, rng: &rng, tag: "b")
        let registry = bGroup.path + "/" + TokenRegistry.fileName
        let saved = try Data(contentsOf: URL(fileURLWithPath: registry))
        _ = try #require(b).mirror.round()
        b = nil
        try MirrorTests.settle([a.mirror])
        // Machine A changes one of B's two last articles.
        let (url, id) = try #require(ids.first { $0.key.contains("/b/") })
        let context = a.container.newContext(author: "MainApp")
        let there = try #require(try context.fetch(FetchRequest("Article")).first { $0["url"].stringValue == url })
        try context.update(there.id, ["title": .string("changed on A")])
        try context.save()
        reference[url] = "changed on A"
        _ = id
        // More of A's own, so that its next snapshot is due (as many rows as the last one has objects).
        var aIDs: [String: ObjectID] = [:]
        try Self.write(10, in: a, live: 20, reference: &reference, ids: &aIDs, rng: &rng, tag: "c")
        _ = try a.mirror.round()
        _ = try a.mirror.round()
        #expect(try server.admin.prune(space, goneAfter: 0).prunedThrough >= 18)
        try saved.write(to: URL(fileURLWithPath: registry))
        let back = try Mirror(
            container: try bGroup.open(), registry: try TokenRegistry(group: bGroup.path),
            connection: try server.connect(as: role), space: space)
        let error = #expect(throws: MirrorError.self) { try back.round() }
        #expect(error?.code == .behindHorizon)
        back.rejoinDiscardingUnpushed = true
        try MirrorTests.settle([back, a.mirror])
        #expect(try a.articles == reference)
        #expect(try back.verify().isEmpty && a.mirror.verify().isEmpty)
    }

    /// A prune that passes a store while it pulls (it was counted gone) leaves a gap after its
    /// cursor: the pull stops before it, and the next round starts from the snapshot.
    @Test func aPruneDuringAPullStopsItAndTheNextRoundStartsFromTheSnapshot() throws {
        let server = Server()
        let (space, role) = try server.member("gap")
        let writer = try Machine(server, role: role, space: space)
        let reader = try Machine(server, role: role, space: space)
        var reference: [String: String] = [:]
        var ids: [String: ObjectID] = [:]
        var rng = SeededGenerator(seed: 19)
        try Self.write(10, in: writer, live: 20, reference: &reference, ids: &ids, rng: &rng, tag: "a")
        try MirrorTests.settle([writer.mirror, reader.mirror])
        writer.mirror.snapshotEvery = 1
        try Self.write(50, in: writer, live: 20, reference: &reference, ids: &ids, rng: &rng, tag: "b")
        _ = try writer.mirror.round()
        _ = try writer.mirror.round()
        reader.mirror.batchSize = 10
        nonisolated(unsafe) let admin = try server.admin
        nonisolated(unsafe) var pruned = false
        reader.mirror.isCancelled = {
            if !pruned { pruned = (try? admin.prune(space, goneAfter: 0)) != nil }
            return false
        }
        let error = #expect(throws: MirrorError.self) { try reader.mirror.round() }
        #expect(
            error?.description.contains("while this store was pulling them") == true, "\(String(describing: error))")
        reader.mirror.isCancelled = { false }
        try MirrorTests.settle([reader.mirror, writer.mirror])
        #expect(try reader.articles == reference)
        #expect(try reader.mirror.verify().isEmpty)
    }

    /// What a member may write on the server: its own cursor rows, stamped by the server (it
    /// cannot make another machine look gone, or itself seen in the future), never below 0; no
    /// row or cursor under another role's store id (which, once pruned, would make that
    /// machine's later uploads look old); a snapshot head without its parts, or with none, is
    /// neither read nor pruned through; a part planted beside a snapshot changes nothing; a
    /// huge key of its own, pruned, makes no other upload look old.
    @Test func membersCannotForgeCursorsSnapshotsOrPrunedKeys() throws {
        let server = Server()
        let space = try server.space("forge")
        let (role, evil) = (try server.role("forge"), try server.role("evil"))
        try server.admin.grant(space, to: role)
        try server.admin.grant(space, to: evil)
        let writer = try Machine(server, role: role, space: space)
        var reference: [String: String] = [:]
        var ids: [String: ObjectID] = [:]
        var rng = SeededGenerator(seed: 23)
        try Self.write(5, in: writer, live: 5, reference: &reference, ids: &ids, rng: &rng, tag: "a")
        _ = try writer.mirror.round()
        let schema = MirrorServer.spacePrefix + space
        let hostile = try server.connect(as: evil)
        let forged = try hostile.execute(
            "WITH u AS (UPDATE \(schema).cursors SET seen_at = '1970-01-01' RETURNING 1) SELECT count(*) FROM u")
        #expect(forged.first?[0] == "0")
        try hostile.execute(
            "INSERT INTO \(schema).cursors(origin, cursor, seen_at) VALUES (gen_random_uuid(), 0, 'infinity')")
        let stamped = try hostile.execute("SELECT seen_at <= now() FROM \(schema).cursors WHERE role = current_user")
        #expect(stamped.first?[0] == "t")
        // The upload lock row can be locked, never moved away; no table can be locked whole.
        for statement in [
            "UPDATE \(schema).upload_lock SET id = 2", "LOCK TABLE \(schema).cursors IN ACCESS EXCLUSIVE MODE",
            "LOCK TABLE \(schema).upload_lock IN ACCESS EXCLUSIVE MODE",
        ] {
            try hostile.execute("BEGIN")
            let denied = #expect(throws: PostgresError.self, "\(statement)") { try hostile.execute(statement) }
            #expect(denied?.sqlState == "42501", "\(statement): \(String(describing: denied))")
            try hostile.execute("ROLLBACK")
        }
        let heads = "INSERT INTO \(schema).snapshot_heads(id, through, parts, objects) VALUES (gen_random_uuid(), "
        for refused in [
            "INSERT INTO \(schema).cursors(origin, cursor) VALUES (gen_random_uuid(), \(Int64.min))",
            heads + "5, 0, 0)", heads + "0, 1, 0)", heads + "5, 1, -1)",
        ] {
            let error = #expect(throws: PostgresError.self, "\(refused)") { try hostile.execute(refused) }
            #expect(error?.sqlState == "23514", "\(String(describing: error))")
        }
        try hostile.execute(heads + "5, 3, 3)")
        // Rows and cursors under the writer's id, at its next keys: refused.
        let forger = try MirrorServer(connection: hostile, space: space)
        let empty = #"{"v":1,"model":3,"changes":[]}"#
        let victim = writer.container.storeID
        let next = try writer.container.currentToken().value + 1
        let upload = #expect(throws: PostgresError.self) {
            try forger.upload(origin: victim, token: next, author: "MainApp", payload: empty)
        }
        #expect(upload?.sqlState == MirrorServer.foreignOriginState, "\(String(describing: upload))")
        #expect(upload?.message.contains("belongs to role \(role)") == true, "\(String(describing: upload))")
        let cursor = #expect(throws: PostgresError.self) {
            try forger.reportCursor(origin: victim, cursor: 0)
        }
        #expect(cursor?.sqlState == MirrorServer.foreignOriginState)
        // Nor with a catalog of its own in front of the real one (a temporary pg_class that says
        // the member owns the tables).
        try hostile.execute("CREATE TEMP TABLE pg_class(oid oid, relowner oid)")
        try hostile.execute(
            """
            INSERT INTO pg_temp.pg_class SELECT c, r.oid FROM unnest(ARRAY['\(schema).transactions'::regclass,
                '\(schema).cursors'::regclass]) c, pg_roles r WHERE r.rolname = current_user
            """)
        try hostile.execute("SET search_path = pg_temp, pg_catalog")
        let shadowed = #expect(throws: PostgresError.self) {
            try forger.upload(origin: victim, token: next, author: "MainApp", payload: empty)
        }
        #expect(shadowed?.sqlState == MirrorServer.foreignOriginState, "\(String(describing: shadowed))")
        try hostile.execute("RESET search_path")
        try hostile.execute("DROP TABLE pg_temp.pg_class")
        // An administrator's own mirror claims its store id too.
        let owned = TemporaryGroup()
        let ownerStore = try owned.open(ReadLater.model)
        let ownerMirror = try Mirror(
            container: ownerStore, registry: try TokenRegistry(group: owned.path),
            connection: try PostgresConnection(try #require(server.database).conninfo), space: space)
        ownerMirror.cursorReportInterval = 0
        _ = try ownerMirror.round()
        let claimed = #expect(throws: PostgresError.self) {
            try forger.upload(origin: ownerStore.storeID, token: 1 << 50, author: "MainApp", payload: empty)
        }
        #expect(claimed?.sqlState == MirrorServer.foreignOriginState)
        // A row of its own with a huge key, pruned later.
        #expect(try forger.upload(origin: UUID(), token: 1 << 40, author: "MainApp", payload: empty) == 6)
        let newcomer = try Machine(server, role: role, space: space)
        try MirrorTests.settle([writer.mirror, newcomer.mirror])
        #expect(try newcomer.articles == reference)
        #expect(try newcomer.mirror.verify().isEmpty)
        // The head alone is no snapshot: a prune leaves the log whole.
        #expect(try server.admin.prune(space, goneAfter: 0).prunedThrough == 0)
        writer.mirror.snapshotEvery = 1
        _ = try writer.mirror.round()
        #expect(try server.admin.prune(space, goneAfter: 0).prunedThrough == 6)
        let whole = try #require(try forger.newestSnapshot())
        try hostile.execute(
            "INSERT INTO \(schema).snapshot_parts(id, part, payload) VALUES ($1, $2, 'planted')",
            [whole.id.uuidString.lowercased(), String(whole.chunks)])
        let taken = #expect(throws: PostgresError.self) {
            try hostile.execute(
                "INSERT INTO \(schema).snapshot_parts(id, part, payload) VALUES ($1, 0, 'planted')",
                [whole.id.uuidString.lowercased()])
        }
        #expect(taken?.sqlState == "23505")
        try Self.write(3, in: writer, live: 8, reference: &reference, ids: &ids, rng: &rng, tag: "b")
        #expect(try writer.mirror.round().pushed == 3, "the writer's later uploads are new")
        let late = try Machine(server, role: role, space: space)
        try MirrorTests.settle([writer.mirror, newcomer.mirror, late.mirror])
        for machine in [writer, newcomer, late] {
            #expect(try machine.articles == reference)
            #expect(try machine.mirror.verify().isEmpty)
        }
        // The member's made-up store at cursor 0 holds the horizon, until the role is revoked.
        #expect(try server.admin.prune(space, goneAfter: 3600).heldBy == evil)
        try server.admin.revoke(space, from: evil)
        #expect(try server.admin.prune(space, goneAfter: 3600).heldBy != evil)
    }

    /// A store that never mirrored, whose history was deleted before, joins a pruned space: what
    /// it holds goes up whole (against an empty state: the server has nothing of it), and it
    /// takes the snapshot's state beside it.
    @Test func aStoreThatNeverMirroredJoinsAPrunedSpaceWithItsCleanedObjects() throws {
        let server = Server()
        let (space, role) = try server.member("fresh")
        let writer = try Machine(server, role: role, space: space, snapshotEvery: 1)
        var reference: [String: String] = [:]
        var ids: [String: ObjectID] = [:]
        var rng = SeededGenerator(seed: 29)
        try Self.write(5, in: writer, live: 5, reference: &reference, ids: &ids, rng: &rng, tag: "a")
        _ = try writer.mirror.round()
        _ = try writer.mirror.round()
        #expect(try server.admin.prune(space, goneAfter: 0).prunedThrough == 5)
        let fresh = try Machine(server, role: role, space: space)
        var own: [String: ObjectID] = [:]
        try Self.write(3, in: fresh, live: 3, reference: &reference, ids: &own, rng: &rng, tag: "own")
        #expect(try fresh.container.deleteHistory(through: fresh.container.currentToken()) > 0)
        try MirrorTests.settle([fresh.mirror, writer.mirror])
        #expect(try fresh.articles == reference && reference.count == 8)
        #expect(try writer.articles == reference)
        #expect(try fresh.mirror.verify().isEmpty && writer.mirror.verify().isEmpty)
    }

    /// An older app whose pull stops at a newer model's row cannot tell the log's state: its
    /// verify says so instead of calling the store clean.
    @Test func anOlderAppsVerifyDoesNotCallALogWithANewerRowClean() throws {
        let server = Server()
        let (space, role) = try server.member("verify")
        let old = try Machine(server, role: role, space: space, model: try ReadLater.model(version: 1))
        let new = try Machine(server, role: role, space: space)
        var reference: [String: String] = [:]
        var ids: [String: ObjectID] = [:]
        var rng = SeededGenerator(seed: 31)
        try Self.write(2, in: new, live: 2, reference: &reference, ids: &ids, rng: &rng, tag: "a")
        _ = try new.mirror.round()
        let pulled = #expect(throws: MirrorError.self) { try old.mirror.round() }
        #expect(pulled?.code == .newerModel)
        let verified = #expect(throws: MirrorError.self) { try old.mirror.verify() }
        #expect(verified?.code == .newerModel, "\(String(describing: verified))")
    }

    /// A member plants an empty snapshot through the log's end (hostile review of issue 25). The
    /// space's only writer (it only pushed: cursor 0) took it as a newcomer would, deleted its
    /// objects with `--verify` clean, and a prune then lost them everywhere. Now it keeps them and
    /// pulls the log; a newcomer that takes the forged snapshot hears it from `--verify`, which
    /// compares with the whole log while nothing of it was pruned.
    @Test(.tags(.multiProcess)) func aForgedSnapshotNeitherWipesAWriterNorPassesVerify() throws {
        let server = Server()
        let (space, role) = try server.member("forged")
        let evil = try server.role("evil")
        try server.admin.grant(space, to: evil)
        var environment = try #require(server.database).environment
        environment["PGUSER"] = role
        let writer = TemporaryGroup()
        func storectl(_ arguments: [String]) throws -> (Int32, [String]) {
            let child = try Child(
                "storectl", arguments + ["--space", space, "--group", writer.path, "--json"], environment: environment)
            return (try child.waitForExit(), child.lines)
        }
        let container = try writer.open()
        let context = container.newContext(author: "MainApp")
        for i in 0..<5 {
            try context.insert(
                "Article",
                ["title": .string("P\(i)"), "url": .string("https://forged.example/\(i)"), "createdAt": .date(Date())])
            try context.save()
        }
        #expect(try storectl(["mirror"]).0 == 0)
        let schema = MirrorServer.spacePrefix + space
        let hostile = try server.connect(as: evil)
        let id = UUID().uuidString.lowercased()
        // (Claiming to be the honest member, as a move's copy would: the server stamps the role
        // that wrote it.)
        try hostile.execute("SET sharedstore.copying = 'on'")
        try hostile.execute(
            "INSERT INTO \(schema).snapshot_heads(id, through, parts, objects, made_as) "
                + "SELECT '\(id)', max(sequence), 1, 0, '\(role)' FROM \(schema).transactions")
        try hostile.execute(
            "INSERT INTO \(schema).snapshot_parts(id, part, payload) VALUES ($1, 0, $2)",
            [id, #"{"v":1,"model":\#(ReadLater.model.version),"changes":[]}"#])
        let round = try storectl(["mirror"])
        #expect(round.0 == 0, "\(round.1)")
        #expect(try container.newContext().count(FetchRequest("Article")) == 5)
        let verified = try storectl(["mirror", "--verify"])
        #expect(verified.0 == 0, "\(verified.1)")

        let newcomer = try Machine(server, role: role, space: space)
        _ = try newcomer.mirror.round()
        let differences = try newcomer.mirror.verify()
        #expect(try newcomer.articles.count == 5 || differences.count == 5, "\(differences)")
        let stamp = try hostile.execute("SELECT made_as FROM \(schema).snapshot_heads WHERE id = $1", [id])
        #expect(stamp.first?[0] == evil, "stamped by the server, not as the row said")

        // Pruned through it (the administrator did not verify first; the writer's cursor passes it
        // once it pulls the newcomer's save), the forged snapshot is the only record of what came
        // before: verify names it and who made it.
        let later = newcomer.container.newContext(author: "MainApp")
        try later.insert(
            "Article", ["title": "later", "url": "https://forged.example/later", "createdAt": .date(Date())])
        try later.save()
        newcomer.mirror.cursorReportInterval = 0
        _ = try newcomer.mirror.round()
        #expect(try storectl(["mirror"]).0 == 0)
        #expect(try storectl(["mirror"]).0 == 0)
        let cursors = try server.connect(as: role).execute("SELECT origin, role, cursor FROM \(schema).cursors")
        let pruned = try server.admin.prune(space, goneAfter: 3600)
        #expect(pruned.prunedThrough > 0, "\(pruned) \(cursors)")
        #expect(try storectl(["mirror", "--verify"]).0 == 1)
        let mirror = try Mirror(
            container: container, registry: try TokenRegistry(group: writer.path),
            connection: try server.connect(as: role),
            space: space)
        #expect(try mirror.verify().count == 5)
        let from = try #require(mirror.replayedFrom)
        #expect(from.id.uuidString.lowercased() == id && from.madeAs == evil)
        #expect(from.description.contains("snapshot \(id)") && from.description.contains("made by role '\(evil)'"))
    }

    /// After one eviction of its mirror's consumer, a store mirrored by `storectl mirror --once`
    /// (a new process each round) made a full upload every round, for good: the check for lost
    /// uploads compared the server's highest key of the store with its token, and full uploads
    /// use keys below every token (hostile review of issue 25: 15 s a round at 20,000 objects, and
    /// a prune past it then left only `--rejoin`, which dropped a save). Now one full upload, then
    /// plain rounds.
    @Test(.tags(.multiProcess)) func oneEvictionCostsOneFullUploadNotOneARound() throws {
        let server = Server()
        let (space, role) = try server.member("evicted")
        let group = TemporaryGroup()
        let container = try group.open()
        let context = container.newContext(author: "MainApp")
        var n = 0
        func add() throws {
            n += 1
            try context.insert(
                "Article",
                ["title": .string("a\(n)"), "url": .string("https://evicted.example/\(n)"), "createdAt": .date(Date())])
            try context.save()
        }
        /// One round of a new mirror, as `storectl mirror --once` runs; whether it made a full upload.
        func once() throws -> Bool {
            let mirror = try Mirror(
                container: container, registry: try TokenRegistry(group: group.path),
                connection: try server.connect(as: role), space: space)
            mirror.cursorReportInterval = 0
            var full = false
            mirror.fullUploadProgress = { _, _ in full = true }
            _ = try mirror.round()
            return full
        }
        try add()
        try add()
        #expect(try !once())
        try add()
        try add()
        let cleaner = try Child("history-cleaner", ["--evict-after", "0", "--group", group.path, "--json"])
        #expect(try cleaner.waitForExit() == 0, "\(cleaner.lines)")
        #expect(try once())
        try add()
        #expect(try !once())
        #expect(try !once())
        let other = try Machine(server, role: role, space: space)
        try MirrorTests.settle([other.mirror])
        #expect(try other.articles.count == n)
        #expect(try other.mirror.verify().isEmpty)
    }
}
