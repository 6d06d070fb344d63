import Foundation
import ReadLater
import SharedStore
import SharedStoreMirror
import SharedStorePostgres
import Testing

/// Spaces placed on several servers (issue 25): the space directory and moves. Two databases of
/// the test server stand for two servers here (a space is a schema in one database, the directory
/// names a database's connection string); `Scripts/scenarios/19-placement.sh` moves a space between
/// two real servers while machines save.
@Suite(
    .enabled(if: ProcessInfo.processInfo.environment["PGHOST"] != nil, "no PostgreSQL server (PGHOST)"),
    .tags(.postgres))
struct MirrorPlacementTests {
    /// Two databases, a space on the first with a login role granted it, and the directory.
    final class Servers {
        let one: MirrorTests.Database
        let two: MirrorTests.Database
        let role = "placement_\(UUID().uuidString.prefix(8).lowercased())"
        let space = "placed_\(UUID().uuidString.prefix(8).lowercased())"

        init() throws {
            one = try MirrorTests.Database()
            two = try MirrorTests.Database()
            try PostgresConnection().createLoginRole(role)
            try admin(one).create(space)
            try admin(one).grant(space, to: role)
            try directory.place(space, on: one.conninfo)
        }

        deinit {
            _ = try? PostgresConnection().dropDatabase(one.name)
            _ = try? PostgresConnection().dropDatabase(two.name)
            _ = try? PostgresConnection().dropRole(role)
        }

        func admin(_ database: MirrorTests.Database) throws -> MirrorSpaces {
            MirrorSpaces(connection: try PostgresConnection(database.conninfo))
        }

        var directory: MirrorDirectory {
            get throws { MirrorDirectory(connection: try PostgresConnection(one.conninfo)) }
        }

        /// A mirror of `container` on the server the directory names for the space.
        func mirror(_ container: Container, _ group: TemporaryGroup) throws -> Mirror {
            let server = try directory.server(of: space)
            return try Mirror(
                container: container, registry: try TokenRegistry(group: group.path),
                connection: try PostgresConnection("\(server) user=\(role)"), space: space)
        }

        func move(to database: MirrorTests.Database) throws -> MirrorMoveResult {
            let from = try directory.server(of: space) == one.conninfo ? one : two
            return try admin(from).move(
                space, to: try PostgresConnection(database.conninfo), toServer: database.conninfo,
                directory: try directory)
        }
    }

    static func add(_ container: Container, _ title: String) throws {
        let context = container.newContext(author: "MainApp")
        _ = try context.insert(
            "Article",
            ["title": .string(title), "url": .string("https://placement.example/\(title)"), "createdAt": .date(Date())])
        try context.save()
    }

    static func titles(_ container: Container) throws -> [String] {
        try container.newContext().fetch(FetchRequest("Article")).compactMap { $0["title"].stringValue }.sorted()
    }

    /// After a move the old copy refuses uploads (the server does, whatever the client), a mirror
    /// still connected there stops with `spaceMoved`, and the same store mirrors on through the
    /// new server with its cursor: nothing lost or doubled, `--verify` clean, and a newcomer on
    /// the new server gets everything.
    @Test func aMovedSpaceRefusesUploadsAndItsMirrorsFollowTheDirectory() throws {
        let servers = try Servers()
        let group = TemporaryGroup()
        let container = try group.open()
        var mirror: Mirror? = try servers.mirror(container, group)
        try Self.add(container, "before")
        _ = try #require(mirror).round()

        let moved = try servers.move(to: servers.two)
        #expect(moved.transactions == 1 && !moved.resumed)
        try Self.add(container, "after")
        let error = #expect(throws: MirrorError.self) { try #require(mirror).round() }
        #expect(error?.code == .spaceMoved)
        let old = try MirrorServer(
            connection: try PostgresConnection("\(servers.one.conninfo) user=\(servers.role)"), space: servers.space)
        let refused = #expect(throws: PostgresError.self) {
            try old.upload(origin: UUID(), token: 1, author: nil, payload: "{}")
        }
        #expect(refused?.sqlState == MirrorServer.movedState)
        mirror = nil
        do {
            // Pulls from the old, frozen copy (same log id) are refused, not left waiting with lag 1
            // for good (hostile review of issue 25).
            func stale() throws {
                _ = try Mirror(
                    container: container, registry: try TokenRegistry(group: group.path),
                    connection: try PostgresConnection("\(servers.two.conninfo) user=\(servers.role)"),
                    space: servers.space,
                    readConnection: try PostgresConnection("\(servers.one.conninfo) user=\(servers.role)")
                ).round()
            }
            let frozen = #expect(throws: MirrorError.self) { try stale() }
            #expect(frozen?.description.contains("--read-from names a server") == true, "\(String(describing: frozen))")
            // Unmarked, as a standby promoted elsewhere is, it is refused all the same: it takes
            // writes and is not the server uploads go to (a hostile review read two logs' rows
            // under one sequence with lag 0).
            let admin = try PostgresConnection(servers.one.conninfo)
            let meta = MirrorServer.spacePrefix + servers.space + ".meta"
            let mark = try admin.execute("SELECT value FROM \(meta) WHERE key = 'moved_to'").first?[0] ?? nil
            try admin.execute("DELETE FROM \(meta) WHERE key = 'moved_to'")
            let promoted = #expect(throws: MirrorError.self) { try stale() }
            #expect(promoted?.description.contains("that is no standby") == true, "\(String(describing: promoted))")
            try admin.execute("INSERT INTO \(meta)(key, value) VALUES ('moved_to', $1)", [mark])
        }
        let again = try servers.mirror(container, group)
        let round = try again.round()
        #expect(round.pushed == 1 && round.pulled == 0 && round.lag == 0)
        #expect(try again.verify().isEmpty)
        let newcomerGroup = TemporaryGroup()
        let newcomer = try newcomerGroup.open()
        try MirrorTests.settle([again, try servers.mirror(newcomer, newcomerGroup)])
        #expect(try Self.titles(newcomer) == ["after", "before"])
        let rows = try PostgresConnection(servers.two.conninfo).execute(
            "SELECT count(*) FROM \(MirrorServer.spacePrefix + servers.space).transactions")
        #expect(rows.first?[0] == "2")
    }

    /// A move that stopped after marking the old copy (the directory not changed yet) is finished
    /// by running it again; a move back goes to the server that holds the old, marked copy.
    @Test func aMoveIsFinishedByRunningItAgainAndMayGoBack() throws {
        let servers = try Servers()
        let group = TemporaryGroup()
        let container = try group.open()
        try Self.add(container, "one")
        _ = try servers.mirror(container, group).round()
        _ = try servers.move(to: servers.two)
        // A round there: its cursor is reported on the new server, under its role, and moves with it.
        _ = try servers.mirror(container, group).round()
        try servers.directory.place(servers.space, on: servers.one.conninfo)
        let resumed = try servers.admin(servers.one).move(
            servers.space, to: try PostgresConnection(servers.two.conninfo), toServer: servers.two.conninfo,
            directory: try servers.directory)
        #expect(resumed.resumed)
        #expect(try servers.directory.server(of: servers.space) == servers.two.conninfo)
        let back = try servers.move(to: servers.one)
        #expect(back.transactions == 1 && !back.resumed)
        try Self.add(container, "two")
        let mirror = try servers.mirror(container, group)
        #expect(try mirror.round().pushed == 1)
        #expect(try mirror.verify().isEmpty)
        #expect(try servers.directory.list().first { $0.space == servers.space }?.epoch == 5)
        let roles = try PostgresConnection(servers.one.conninfo).execute(
            "SELECT DISTINCT role FROM \(MirrorServer.spacePrefix + servers.space).cursors")
        #expect(roles.map { $0[0] } == [servers.role], "cursor rows keep the role that reported them")
    }

    /// A target that holds another space of the same name is refused before anything is marked:
    /// the space stays where it is and takes uploads. A server string with a password is refused
    /// by the directory (every role reads it).
    @Test func aMoveOntoAnotherSpaceOfTheSameNameIsRefusedAndNothingMoves() throws {
        let servers = try Servers()
        // The server the space is on, however written, is no target: a move onto itself deleted it.
        for written in [servers.one.conninfo, "postgresql:///\(servers.one.name)"] {
            let same = #expect(throws: PostgresError.self) {
                try servers.admin(servers.one).move(
                    servers.space, to: try PostgresConnection(written), toServer: written,
                    directory: try servers.directory)
            }
            #expect(same?.message.contains("nothing to move") == true, "\(String(describing: same))")
        }
        try servers.admin(servers.two).create(servers.space)
        let error = #expect(throws: PostgresError.self) { try servers.move(to: servers.two) }
        #expect(error?.sqlState == "42P06")
        let group = TemporaryGroup()
        let container = try group.open()
        try Self.add(container, "stays")
        #expect(try servers.mirror(container, group).round().pushed == 1)
        let secret = #expect(throws: PostgresError.self) {
            try servers.directory.place(servers.space, on: "\(servers.two.conninfo) password=hunter2")
        }
        #expect(secret?.message.contains("must not hold a password") == true)
        let missing = #expect(throws: PostgresError.self) { try servers.directory.server(of: "nowhere") }
        #expect(missing?.message.contains("has no space 'nowhere'") == true)
    }
}
