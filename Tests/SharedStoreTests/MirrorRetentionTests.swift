import Foundation
import ReadLater
import SharedStore
import SharedStoreMirror
import SharedStorePostgres
import Synchronization
import Testing

@testable import SharedStoreCore

/// Retention (issue 25): a space's log pruned below the horizon, with a snapshot in its place.
/// The mirrors connect as roles without superuser; the administrator prunes.
@Suite(
    .enabled(if: ProcessInfo.processInfo.environment["PGHOST"] != nil, "no PostgreSQL server (PGHOST)"),
    .tags(.postgres))
struct MirrorRetentionTests {
    typealias Server = MirrorSpacesTests.Server

    /// One machine of the space, with a mirror that reports its cursor every round and makes a
    /// snapshot every `snapshotEvery` rows.
    final class Machine {
        let group = TemporaryGroup()
        let container: Container
        let mirror: Mirror

        init(_ server: Server, role: String, space: String, snapshotEvery: Int64 = 0, model: Model = ReadLater.model)
            throws
        {
            container = try group.open(model)
            mirror = try Mirror(
                container: container, registry: try TokenRegistry(group: group.path),
                connection: try server.connect(as: role), space: space)
            mirror.cursorReportInterval = 0
            mirror.snapshotEvery = snapshotEvery
        }

        /// Every article by title → url, the state compared between machines and the reference.
        var articles: [String: String] {
            get throws {
                var out: [String: String] = [:]
                for s in try container.newContext().fetch(FetchRequest("Article")) {
                    out[s["url"].stringValue ?? "?"] = s["title"].stringValue ?? "?"
                }
                return out
            }
        }
    }

    /// Writes `count` transactions in `machine`'s store, one save each: new articles while fewer
    /// than `live` exist, then mostly retitles of a random one (and a few deletes and new ones),
    /// so that most transactions are overwritten later. Keeps `reference` (url → title) as
    /// every machine must end.
    static func write(
        _ count: Int, in machine: Machine, live: Int, reference: inout [String: String],
        ids: inout [String: ObjectID], rng: inout some RandomNumberGenerator, tag: String
    ) throws {
        let context = machine.container.newContext(author: "MainApp")
        for i in 0..<count {
            var inserted: (url: String, id: ObjectID)?
            let roll = Int.random(in: 0..<100, using: &rng)
            if ids.count < live || roll < 2 {
                let url = "https://retention.example/\(tag)/\(i)"
                let title = "made \(tag) \(i)"
                inserted = (
                    url,
                    try context.insert(
                        "Article", ["title": .string(title), "url": .string(url), "createdAt": .date(Date())])
                )
                reference[url] = title
            } else if roll < 4, let url = ids.keys.randomElement(using: &rng), let id = ids[url] {
                try context.delete(id)
                ids[url] = nil
                reference[url] = nil
            } else if let url = ids.keys.randomElement(using: &rng), let id = ids[url] {
                let title = "retitled \(tag) \(i)"
                try context.update(id, ["title": .string(title)])
                reference[url] = title
            }
            let saved = try context.save()
            if let (url, id) = inserted { ids[url] = saved.permanentIDs[id] }
        }
    }

    /// A machine that joins after N transactions of which about 95% were overwritten later, and
    /// one that returns from behind the horizon with a change of its own made while away: the
    /// first starts from the snapshot (it pulls O(live objects), not the history), the second
    /// takes the snapshot's state but keeps its change, and every machine converges on the state
    /// a plain replay of the writes gives, with `--verify` clean. N is 100,000
    /// (`SHAREDSTORE_RETENTION_TRANSACTIONS` sets another).
    @Test func machinesJoiningLateOrReturningFromBehindTheHorizonStartFromTheSnapshot() throws {
        let total = Int(ProcessInfo.processInfo.environment["SHAREDSTORE_RETENTION_TRANSACTIONS"] ?? "") ?? 100_000
        let seed = UInt64.random(in: 1...UInt64.max)
        print("retention seed \(seed), \(total) transactions")
        var rng = SeededGenerator(seed: seed)
        let live = max(total / 20, 10)
        let server = Server()
        let (space, role) = try server.member("retention")
        let writer = try Machine(server, role: role, space: space, snapshotEvery: 1_000)
        let returning = try Machine(server, role: role, space: space)
        var reference: [String: String] = [:]
        var ids: [String: ObjectID] = [:]

        try Self.write(total / 2, in: writer, live: live, reference: &reference, ids: &ids, rng: &rng, tag: "a")
        try MirrorTests.settle([writer.mirror, returning.mirror])
        #expect(try returning.articles == reference)
        // Away: it changes something of its own, and is not seen for a day.
        let away = returning.container.newContext(author: "MainApp")
        _ = try away.insert(
            "Article",
            [
                "title": .string("saved while away"), "url": .string("https://away.example/1"),
                "createdAt": .date(Date()),
            ])
        try away.save()
        reference["https://away.example/1"] = "saved while away"
        try Self.write(total - total / 2, in: writer, live: live, reference: &reference, ids: &ids, rng: &rng, tag: "b")
        let writerRound = try writer.mirror.round()
        #expect(writerRound.lag == 0)
        _ = try writer.mirror.round()
        let admin = try PostgresConnection(try #require(server.database).conninfo)
        let schema = MirrorServer.spacePrefix + space
        try admin.execute(
            "UPDATE \(schema).cursors SET seen_at = now() - interval '1 day' WHERE origin = $1",
            [returning.container.storeID.uuidString.lowercased()])

        let pruned = try server.admin.prune(space, goneAfter: 3600)
        #expect(pruned.gone == 1 && pruned.live == 1)
        #expect(pruned.deleted > Int64(total) * 9 / 10, "\(pruned)")
        let left = try admin.execute("SELECT count(*) FROM \(schema).transactions").first?[0].flatMap { Int($0) }
        #expect((left ?? .max) < total / 10, "rows left after the prune: \(left ?? -1)")

        // The newcomer pulls the snapshot and what came after, not the history.
        let newcomer = try Machine(server, role: role, space: space)
        let first = try newcomer.mirror.round()
        #expect(first.bootstrapped >= reference.count - 1 && first.pulled < total / 10, "\(first)")
        try MirrorTests.settle([writer.mirror, newcomer.mirror, returning.mirror])
        for machine in [writer, newcomer, returning] {
            #expect(try machine.articles == reference, "seed \(seed)")
            #expect(try machine.mirror.verify().isEmpty, "seed \(seed)")
        }
    }

    /// The horizon never passes a live mirror's cursor: a mirror seen lately that has not pulled
    /// everything keeps every row after its cursor, and pulls them without a snapshot.
    @Test func pruningKeepsWhatALiveMirrorHasNotPulled() throws {
        let server = Server()
        let (space, role) = try server.member("horizon")
        let writer = try Machine(server, role: role, space: space, snapshotEvery: 10)
        let slow = try Machine(server, role: role, space: space)
        var reference: [String: String] = [:]
        var ids: [String: ObjectID] = [:]
        var rng = SeededGenerator(seed: 7)
        try Self.write(30, in: writer, live: 10, reference: &reference, ids: &ids, rng: &rng, tag: "a")
        try MirrorTests.settle([writer.mirror, slow.mirror])
        let cursor = try #require(try slow.container.mirrorValue(MirrorKeys.pullCursor))
        try Self.write(60, in: writer, live: 10, reference: &reference, ids: &ids, rng: &rng, tag: "b")
        _ = try writer.mirror.round()
        #expect(try writer.mirror.round().lag == 0)
        let pruned = try server.admin.prune(space, goneAfter: 3600)
        #expect(pruned.prunedThrough <= cursor && pruned.prunedThrough > 0, "\(pruned), slow at \(cursor)")
        #expect(pruned.lowestLiveCursor == cursor && pruned.heldBy == role, "the role holding the horizon is named")
        let round = try slow.mirror.round()
        #expect(round.bootstrapped == 0 && round.pulled == 60)
        #expect(try slow.articles == reference)
        #expect(try slow.mirror.verify().isEmpty)
    }

    /// An upload repeated after a crash, of a row the log was pruned past, is not taken for a new
    /// one; a mirror's role may not prune; the log's order goes on after every row is pruned.
    @Test func prunedRowsStayKnownAndOnlyTheOwnerPrunes() throws {
        let server = Server()
        let (space, role) = try server.member("known")
        let writer = try Machine(server, role: role, space: space, snapshotEvery: 1)
        var reference: [String: String] = [:]
        var ids: [String: ObjectID] = [:]
        var rng = SeededGenerator(seed: 11)
        try Self.write(5, in: writer, live: 5, reference: &reference, ids: &ids, rng: &rng, tag: "a")
        _ = try writer.mirror.round()
        _ = try writer.mirror.round()
        let log = try MirrorServer(connection: try server.connect(as: role), space: space)
        let denied = #expect(throws: PostgresError.self) { try log.prune(goneAfter: 0) }
        #expect(denied?.sqlState == "42501")
        let pruned = try server.admin.prune(space, goneAfter: 0)
        #expect(pruned.prunedThrough == 5 && pruned.deleted == 5, "\(pruned)")
        #expect(try log.maxSequence() == 5)
        let again = try log.upload(
            origin: writer.container.storeID, token: 3, author: "MainApp", payload: #"{"v":1,"model":1,"changes":[]}"#)
        #expect(again == nil)
        try Self.write(1, in: writer, live: 5, reference: &reference, ids: &ids, rng: &rng, tag: "b")
        #expect(try writer.mirror.round().pushed == 1)
        #expect(try log.maxSequence() == 6)
        let newcomer = try Machine(server, role: role, space: space)
        try MirrorTests.settle([writer.mirror, newcomer.mirror])
        #expect(try newcomer.articles == reference)
        #expect(try newcomer.mirror.verify().isEmpty)
    }
}

extension MirrorRetentionTests {
    /// A store the log was pruned past, whose history was deleted before it pushed its last
    /// change, cannot tell that change from what it missed: its round stops and says so, naming
    /// `--rejoin`; rejoining takes the server's state (the change is dropped, as it says).
    @Test(.tags(.multiProcess)) func aStoreBehindTheHorizonWithoutItsHistoryStopsUntilItRejoins() throws {
        let server = Server()
        let (space, role) = try server.member("rejoin")
        let writer = try Machine(server, role: role, space: space, snapshotEvery: 1)
        let away = try Machine(server, role: role, space: space)
        var reference: [String: String] = [:]
        var ids: [String: ObjectID] = [:]
        var rng = SeededGenerator(seed: 3)
        try Self.write(10, in: writer, live: 10, reference: &reference, ids: &ids, rng: &rng, tag: "a")
        try MirrorTests.settle([writer.mirror, away.mirror])
        var lost: [String: String] = [:]
        var lostIDs: [String: ObjectID] = [:]
        try Self.write(1, in: away, live: 1, reference: &lost, ids: &lostIDs, rng: &rng, tag: "lost")
        for (tool, arguments) in [
            ("storectl", ["reset-consumer", "Mirror"]), ("main-app", ["sync"]), ("history-cleaner", []),
        ] {
            let child = try Child(tool, arguments + ["--group", away.group.path])
            #expect(try child.waitForExit() == 0, "\(tool)")
        }
        try Self.write(10, in: writer, live: 10, reference: &reference, ids: &ids, rng: &rng, tag: "b")
        _ = try writer.mirror.round()
        _ = try writer.mirror.round()
        let pruned = try server.admin.prune(space, goneAfter: 0)
        #expect(pruned.prunedThrough == 20, "\(pruned)")

        let error = #expect(throws: MirrorError.self) { try away.mirror.round() }
        #expect(error?.code == .behindHorizon)
        #expect(
            error?.description.contains("pruned its log through sequence 20") == true, "\(String(describing: error))")
        #expect(error?.description.contains("--rejoin") == true)
        away.mirror.rejoinDiscardingUnpushed = true
        try MirrorTests.settle([away.mirror, writer.mirror])
        #expect(try away.articles == reference)
        #expect(try writer.articles == reference)
        #expect(try away.mirror.verify().isEmpty)
    }

    /// A space made by a build without retention is refused by a mirror, with the command that
    /// brings it up to date; after it, its members mirror and prune works.
    @Test func aSpaceOfAnOlderBuildIsUpgradedByTheAdministrator() throws {
        let server = Server()
        let (space, role) = try server.member("older")
        let admin = try PostgresConnection(try #require(server.database).conninfo)
        let schema = MirrorServer.spacePrefix + space
        for table in ["snapshot_parts", "snapshot_heads", "cursors", "pruned_origins", "pruned_keys"] {
            try admin.execute("DROP TABLE \(schema).\(table)")
        }
        try admin.execute("DELETE FROM \(schema).meta WHERE key = 'retention_layout'")
        let error = #expect(throws: (any Error).self) { _ = try Machine(server, role: role, space: space) }
        #expect("\(error.map { "\($0)" } ?? "")".contains("storectl mirror-admin --upgrade \(space)"))
        // Granting another role brings the space up to date for every member; so does --upgrade.
        try server.admin.grant(space, to: try server.role("older_too"))
        try server.admin.upgrade(space)
        let machine = try Machine(server, role: role, space: space, snapshotEvery: 1)
        var reference: [String: String] = [:]
        var ids: [String: ObjectID] = [:]
        var rng = SeededGenerator(seed: 5)
        try Self.write(3, in: machine, live: 3, reference: &reference, ids: &ids, rng: &rng, tag: "a")
        _ = try machine.mirror.round()
        #expect(try server.admin.prune(space, goneAfter: 0).prunedThrough == 3)
        try Self.write(1, in: machine, live: 3, reference: &reference, ids: &ids, rng: &rng, tag: "b")
        #expect(try machine.mirror.round().pushed == 1)
    }
}

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
}

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
