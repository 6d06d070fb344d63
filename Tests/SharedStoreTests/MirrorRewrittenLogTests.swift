import Foundation
import ReadLater
import SharedStore
import SharedStoreMirror
import SharedStorePostgres
import Testing

/// A log rewritten under a machine's cursor: a failover that lost rows the machine had pulled,
/// after which other machines' uploads took their sequence numbers (or an old primary took
/// uploads after the failover). Each machine runs as `storectl mirror` processes.
@Suite(
    .enabled(if: ProcessInfo.processInfo.environment["PGHOST"] != nil, "no PostgreSQL server (PGHOST)"),
    .tags(.postgres))
struct MirrorRewrittenLogTests {
    typealias Server = MirrorSpacesTests.Server

    /// One machine: a group directory mirrored by `storectl mirror` processes as `role`.
    struct Machine {
        let group = TemporaryGroup()
        let environment: [String: String]
        let space: String

        init(_ server: Server, role: String, space: String) throws {
            var environment = try #require(server.database).environment
            environment["PGUSER"] = role
            self.environment = environment
            self.space = space
        }

        func storectl(_ arguments: [String]) throws -> (status: Int32, lines: [String]) {
            let child = try Child(
                "storectl", arguments + ["--space", space, "--group", group.path, "--json"], environment: environment)
            return (try child.waitForExit(), child.lines)
        }

        func save(_ title: String) throws {
            let container = try group.open()
            let context = container.newContext(author: "MainApp")
            try context.insert(
                "Article",
                [
                    "title": .string(title), "url": .string("https://rewritten.example/\(title)"),
                    "createdAt": .date(Date()),
                ])
            try context.save()
        }

        var titles: Set<String> {
            get throws {
                Set(try group.open().newContext().fetch(FetchRequest("Article")).compactMap { $0["title"].stringValue })
            }
        }
    }

    /// Hostile review of issue 25 (F1): after an asynchronous failover lost rows B had pulled,
    /// and C's uploads took their numbers, B read on past C's rows with lag 0, and its full
    /// upload (its own uploads were lost too) took them for deletions: C's saves were deleted on
    /// every machine, `--verify` clean. Now B's round refuses, naming the sequence, and sends
    /// nothing; `--rejoin` takes the log's state and sends B's lost saves again; every machine
    /// ends with every save, and `--verify` is clean on each.
    @Test(.tags(.multiProcess)) func aLogRewrittenUnderAMachinesCursorIsRefusedThenRejoined() throws {
        let server = Server()
        let (space, role) = try server.member("rewritten")
        let (a, b, c) = (
            try Machine(server, role: role, space: space), try Machine(server, role: role, space: space),
            try Machine(server, role: role, space: space)
        )
        for (name, m) in [("a", a), ("b", b), ("c", c)] {
            try m.save("X-\(name)")
            #expect(try m.storectl(["mirror"]).status == 0)
        }
        #expect(try b.storectl(["mirror"]).status == 0)
        let admin = try PostgresConnection(try #require(server.database).conninfo)
        let log = try MirrorServer(connection: admin, space: space)
        let kept = try log.maxSequence()
        // Rows only the old primary had: A's five saves, which B pulls, with two saves of its own.
        for i in 0..<5 { try a.save("A\(i)") }
        #expect(try a.storectl(["mirror"]).status == 0)
        for i in 0..<2 { try b.save("B\(i)") }
        #expect(try b.storectl(["mirror"]).status == 0)
        #expect(try b.titles.contains("A4"))
        // The failover: the log ends at `kept` again, and C's ten saves take the numbers past it.
        let schema = MirrorServer.spacePrefix + space
        try admin.execute("DELETE FROM \(schema).transactions WHERE sequence > $1", [String(kept)])
        for i in 0..<10 { try c.save("C\(i)") }
        #expect(try c.storectl(["mirror"]).status == 0)
        #expect(try log.maxSequence() == kept + 10)

        // B refuses, naming the row it pulled, and sends nothing.
        let refused = try b.storectl(["mirror"])
        #expect(refused.status == 1)
        #expect(try log.maxSequence() == kept + 10, "B sent something from a log it did not pull")
        #expect(try b.storectl(["mirror", "--follow", "--for", "5"]).status == 1, "a follower stops at once")
        // So does A: it read its own rows there (a full upload for its lost ones would have
        // compared with C's rows, never applied here, and deleted them).
        #expect(try a.storectl(["mirror"]).status == 1)
        // --rejoin: the log's state, and each one's saves the log lost go up again.
        for m in [a, b] {
            let rejoined = try m.storectl(["mirror", "--rejoin"])
            #expect(rejoined.status == 0, "\(rejoined.lines)")
        }
        for _ in 0..<3 {
            for m in [a, b, c] { _ = try m.storectl(["mirror"]) }
        }
        let all = Set(
            ["X-a", "X-b", "X-c"] + (0..<5).map { "A\($0)" } + (0..<2).map { "B\($0)" } + (0..<10).map { "C\($0)" })
        for (name, m) in [("a", a), ("b", b), ("c", c)] {
            #expect(try m.titles == all, "machine \(name)")
            let verified = try m.storectl(["mirror", "--verify"])
            #expect(verified.status == 0, "machine \(name): \(verified.lines)")
        }
    }
}
