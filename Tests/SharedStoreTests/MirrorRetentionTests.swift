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
