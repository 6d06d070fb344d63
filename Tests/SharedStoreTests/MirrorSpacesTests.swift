import Foundation
import ReadLater
import SharedStore
import SharedStoreMirror
import SharedStorePostgres
import SharedStoreSQLite
import Testing

/// Spaces (issue 25): each a log of its own that PostgreSQL lets only the roles granted it read
/// and write. The mirrors here connect as roles without superuser, made per test (roles belong to
/// the whole server, so every name here is unique to its test).
@Suite(
    .enabled(if: ProcessInfo.processInfo.environment["PGHOST"] != nil, "no PostgreSQL server (PGHOST)"),
    .tags(.postgres))
struct MirrorSpacesTests {
    /// A database of its own, the spaces made in it and the login roles of its "machines";
    /// everything dropped at the end.
    final class Server {
        let database = try? MirrorTests.Database()
        let tag = UUID().uuidString.prefix(8).lowercased()
        private(set) var roles: [String] = []
        private(set) var spaceNames: [String] = []

        var admin: MirrorSpaces {
            get throws { MirrorSpaces(connection: try PostgresConnection(try #require(database).conninfo)) }
        }

        /// A login role (no superuser, no CREATEROLE, no CREATEDB) named `name`_tag.
        func role(_ name: String) throws -> String {
            let role = "\(name)_\(tag)"
            try PostgresConnection(try #require(database).conninfo).execute(
                "CREATE ROLE \(role) LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB")
            roles.append(role)
            return role
        }

        /// Space `name`_tag, made by the administrator.
        func space(_ name: String) throws -> String {
            let space = "\(name)_\(tag)"
            try admin.create(space)
            spaceNames.append(space)
            return space
        }

        /// Space `name`_tag and role `name`_tag, granted it.
        func member(_ name: String) throws -> (space: String, role: String) {
            let (space, role) = (try space(name), try role(name))
            try admin.grant(space, to: role)
            return (space, role)
        }

        /// A connection as `role`.
        func connect(as role: String) throws -> PostgresConnection {
            try PostgresConnection("\(try #require(database).conninfo) user=\(role)")
        }

        deinit {
            guard let admin = try? PostgresConnection() else { return }
            if let database { _ = try? admin.dropDatabase(database.name) }
            // The spaces' roles and the machines' roles are the server's, not the database's.
            for name in spaceNames { _ = try? admin.execute("DROP ROLE IF EXISTS \(MirrorServer.spacePrefix)\(name)") }
            for role in roles { _ = try? admin.execute("DROP ROLE IF EXISTS \(role)") }
        }
    }

    /// One machine: a store and its mirror into `space` as `role`.
    final class Machine {
        let group = TemporaryGroup()
        let container: Container
        let mirror: Mirror

        init(_ server: Server, role: String, space: String) throws {
            container = try group.open()
            mirror = try Mirror(
                container: container, registry: try TokenRegistry(group: group.path),
                connection: try server.connect(as: role), space: space)
        }

        func add(_ title: String) throws {
            let context = container.newContext(author: "MainApp")
            try context.insert(ReadLater.Article(title: title, url: "https://spaces.example/\(UUID().uuidString)"))
            try context.save()
        }

        var titles: [String] {
            get throws {
                try container.newContext().fetch(FetchRequest("Article")).compactMap { $0["title"].stringValue }
                    .sorted()
            }
        }
    }

    static func settle(_ machines: [Machine]) throws {
        try MirrorTests.settle(machines.map(\.mirror))
    }

    @Test func aSpaceIsReadAndWrittenOnlyByTheRolesGrantedIt() throws {
        let server = Server()
        let (a, b) = (try server.space("alice"), try server.space("bob"))
        let (alice, bob) = (try server.role("alice"), try server.role("bob"))
        try server.admin.grant(a, to: alice)
        try server.admin.grant(b, to: bob)
        let laptop = try Machine(server, role: alice, space: a)
        let phone = try Machine(server, role: alice, space: a)
        let bobs = try Machine(server, role: bob, space: b)
        try laptop.add("alice's laptop")
        try phone.add("alice's phone")
        try bobs.add("bob's")
        try Self.settle([laptop, phone, bobs])
        #expect(try laptop.titles == ["alice's laptop", "alice's phone"])
        #expect(try phone.titles == ["alice's laptop", "alice's phone"])
        #expect(try bobs.titles == ["bob's"])
        #expect(try laptop.mirror.verify().isEmpty && bobs.mirror.verify().isEmpty)

        // Bob's role in Alice's space: refused by the server, said with the role, the space and the fix.
        let intruder = TemporaryGroup()
        let error = #expect(throws: MirrorError.self) {
            _ = try Mirror(
                container: try intruder.open(), registry: try TokenRegistry(group: intruder.path),
                connection: try server.connect(as: bob), space: a)
        }
        #expect(error?.code == .accessDenied)
        #expect(error?.reason == .accessDenied(space: a, role: bob))
        #expect(error?.description.contains("role '\(bob)' may not use space '\(a)'") == true)
        #expect(error?.description.contains("storectl mirror-admin --grant \(a) --role \(bob)") == true)
    }

    /// A revoke takes the privileges away from every session of the role at once: there is no
    /// role of the space a session could have switched to. A role that reaches a space through a
    /// group is told so when revoked, not told it worked.
    @Test func aRevokeLeavesNoWayBackAndSaysWhenAGroupGrantsTheSpace() throws {
        let server = Server()
        let space = try server.space("shared")
        let (member, team) = (try server.role("member"), try server.role("team"))
        try server.admin.grant(space, to: member)
        let session = try server.connect(as: member)
        let log = MirrorServer.spacePrefix + space + ".transactions"
        #expect(try session.execute("SELECT count(*) FROM \(log)").first?[0] == "0")
        #expect(throws: PostgresError.self) { try session.execute("SET ROLE \(MirrorServer.spacePrefix + space)") }
        try server.admin.revoke(space, from: member)
        let error = #expect(throws: PostgresError.self) { try session.execute("SELECT count(*) FROM \(log)") }
        #expect(error?.sqlState == "42501")

        try PostgresConnection(try #require(server.database).conninfo).execute("GRANT \(team) TO \(member)")
        try server.admin.grant(space, to: team)
        #expect(try session.execute("SELECT count(*) FROM \(log)").first?[0] == "0")
        let revoke = #expect(throws: PostgresError.self) { try server.admin.revoke(space, from: member) }
        #expect(revoke?.message.contains("as a member of \(team)") == true, "\(revoke?.message ?? "")")
        #expect(try server.admin.list().first { $0.name == space }?.roles == [team])
        #expect(throws: PostgresError.self) { try server.admin.grant(space, to: "pg_read_all_data") }
    }

    /// A member running `mirror-admin --grant` or `--revoke` is refused, naming the owner to
    /// connect as: PostgreSQL only warns when a role that did not make the grants runs them, and
    /// "granted": true with nothing granted was a false success (hostile review of issue 25).
    @Test func onlyTheOwnerChangesASpacesMembers() throws {
        let server = Server()
        let (space, member) = try server.member("owned")
        let (other, outsider) = (try server.role("other"), try server.role("outsider"))
        try server.admin.grant(space, to: other)
        let asMember = MirrorSpaces(connection: try server.connect(as: member))
        let granted = #expect(throws: PostgresError.self) { try asMember.grant(space, to: outsider) }
        #expect(granted?.sqlState == "42501")
        #expect(granted?.message.contains("was not granted space '\(space)'") == true, "\(granted?.message ?? "")")
        #expect(granted?.message.contains("this connection is role '\(member)'") == true)
        let revoked = #expect(throws: PostgresError.self) { try asMember.revoke(space, from: other) }
        #expect(revoked?.message.contains("was not revoked space '\(space)'") == true, "\(revoked?.message ?? "")")
        #expect(try server.admin.list().first { $0.name == space }?.roles.sorted() == [member, other].sorted())
        let log = MirrorServer.spacePrefix + space + ".transactions"
        #expect(throws: PostgresError.self) { try server.connect(as: outsider).execute("SELECT count(*) FROM \(log)") }
        #expect(try server.connect(as: other).execute("SELECT count(*) FROM \(log)").first?[0] == "0")
    }

    /// A store a build without spaces mirrored (it recorded no log) stays with the log outside
    /// any space: joining a space with that cursor would skip the space's rows.
    @Test func aStoreMirroredBeforeLogsWereRecordedDoesNotJoinASpace() throws {
        let server = Server()
        let space = try server.space("later")
        let role = try server.role("old")
        try server.admin.grant(space, to: role)
        let group = TemporaryGroup()
        let container = try group.open()
        let context = container.newContext(author: "MainApp")
        try context.insert(ReadLater.Article(title: "old", url: "https://spaces.example/old"))
        try context.save()
        do {
            let mirror = try Mirror(
                container: container, registry: try TokenRegistry(group: group.path),
                connection: try PostgresConnection(try #require(server.database).conninfo))
            _ = try mirror.round()
        }
        try SQLiteConnection(path: group.path + "/" + Container.storeFileName, busyTimeoutMilliseconds: 1000)
            .execute("DELETE FROM ss_mirror WHERE key = 'server_log_id'")
        let error = #expect(throws: MirrorError.self) {
            _ = try Mirror(
                container: container, registry: try TokenRegistry(group: group.path),
                connection: try server.connect(as: role), space: space)
        }
        #expect(error?.code == .otherLog)
        // Without --space it goes on with its log, and records it.
        _ = try Mirror(
            container: container, registry: try TokenRegistry(group: group.path),
            connection: try PostgresConnection(try #require(server.database).conninfo)
        ).round()
    }

    @Test func aRevokedRoleStopsAtItsNextRoundAndGoesOnWhenGrantedAgain() throws {
        let server = Server()
        let space = try server.space("team")
        let (ann, ben) = (try server.role("ann"), try server.role("ben"))
        try server.admin.grant(space, to: ann)
        try server.admin.grant(space, to: ben)
        let annMachine = try Machine(server, role: ann, space: space)
        let benMachine = try Machine(server, role: ben, space: space)
        try annMachine.add("before")
        try Self.settle([annMachine, benMachine])
        #expect(try benMachine.titles == ["before"])

        try server.admin.revoke(space, from: ben)
        try annMachine.add("after the revoke")
        _ = try annMachine.mirror.round()
        // The same mirror, the same connection: its next round fails, and pulls nothing.
        let error = #expect(throws: MirrorError.self) { _ = try benMachine.mirror.round() }
        #expect(error?.code == .accessDenied)
        #expect(try benMachine.titles == ["before"])
        // A revoked role may not start a mirror either.
        #expect(throws: MirrorError.self) { _ = try Machine(server, role: ben, space: space) }
        // Revoking what was not granted is an error, not a silent success.
        #expect(throws: PostgresError.self) { try server.admin.revoke(space, from: ben) }

        try server.admin.grant(space, to: ben)
        try Self.settle([annMachine, benMachine])
        #expect(try benMachine.titles == ["after the revoke", "before"])
    }

    @Test func forgingAnotherSpacesRowsThroughSQLIsRefusedByTheServer() throws {
        let server = Server()
        let (a, b) = (try server.space("victim"), try server.space("attacker"))
        let (victim, attacker) = (try server.role("victim"), try server.role("attacker"))
        try server.admin.grant(a, to: victim)
        try server.admin.grant(b, to: attacker)
        let machine = try Machine(server, role: victim, space: a)
        try machine.add("private")
        _ = try machine.mirror.round()

        let sql = try server.connect(as: attacker)
        let other = MirrorServer.spacePrefix + a
        let own = MirrorServer.spacePrefix + b
        let statements = [
            "SELECT payload FROM \(other).transactions",
            "SELECT value FROM \(other).meta",
            """
            INSERT INTO \(other).transactions(sequence, origin, token, payload)
            VALUES (1000, '00000000-0000-0000-0000-000000000001', 1, '{}')
            """,
            "UPDATE \(other).transactions SET payload = '{}'",
            "DELETE FROM \(other).transactions",
            "CREATE TABLE \(other).planted(x int)",
            // Its own space's log is append-only: what was uploaded stays as it was.
            "UPDATE \(own).transactions SET payload = '{}'",
            "DELETE FROM \(own).transactions",
            "UPDATE \(own).meta SET value = '1' WHERE key = 'log_id'",
            // Nor can it grant itself another space, or take another space's upload lock.
            "GRANT USAGE ON SCHEMA \(other) TO \(attacker)",
            "SELECT 1 FROM \(other).upload_lock FOR UPDATE",
            // In its own space, a row out of order (one machines that read past it would never see)
            // is refused by the log's trigger (23514, below), as is any change to the lock's table.
            "ALTER TABLE \(own).transactions DISABLE TRIGGER next_in_order",
            "DROP TRIGGER next_in_order ON \(own).transactions",
        ]
        for statement in statements {
            let error = #expect(throws: PostgresError.self, "\(statement)") { try sql.execute(statement) }
            #expect(error?.sqlState == "42501", "\(statement): \(error?.description ?? "")")
        }
        // Granting its own space to another role is not in its power (PostgreSQL only warns).
        _ = try? sql.execute("GRANT SELECT ON \(own).transactions TO \(victim)")
        let admin = try PostgresConnection(try #require(server.database).conninfo)
        #expect(
            try admin.execute("SELECT has_table_privilege($1, $2, 'SELECT')", [victim, own + ".transactions"])
                .first?[0] == "f")
        // Rows out of order in its own space: refused.
        for sequence in ["0", "1000", "9223372036854775807"] {
            let error = #expect(throws: PostgresError.self) {
                try sql.execute(
                    "INSERT INTO \(own).transactions(sequence, origin, token, payload) VALUES ($1, $2, 1, '{}')",
                    [sequence, UUID().uuidString])
            }
            #expect(error?.sqlState == "23514", "sequence \(sequence): \(error?.description ?? "")")
        }
        // A role that is no member holding the lock key the default log uses for this space does
        // not stop the space's uploads (its lock is its own table's row).
        let outsider = try server.connect(as: attacker)
        try outsider.execute("SELECT pg_advisory_lock(hashtext($1 || '.upload'))", [other])
        try machine.add("while an outsider holds the advisory key")
        #expect(try machine.mirror.round().pushed == 1)
        // The victim's space is as it was.
        try Self.settle([machine])
        #expect(try machine.mirror.verify().isEmpty)
        #expect(try machine.titles == ["private", "while an outsider holds the advisory key"])
    }

    @Test func aStoreMirrorsIntoOneLogForGood() throws {
        let server = Server()
        let (a, b) = (try server.space("first"), try server.space("second"))
        let role = try server.role("owner")
        try server.admin.grant(a, to: role)
        try server.admin.grant(b, to: role)
        let group = TemporaryGroup()
        let container = try group.open()
        func mirror(_ space: String?) throws -> Mirror {
            // The log outside any space is made by its first mirror: the administrator's here.
            let connection =
                space == nil
                ? try PostgresConnection(try #require(server.database).conninfo) : try server.connect(as: role)
            return try Mirror(
                container: container, registry: try TokenRegistry(group: group.path), connection: connection,
                space: space)
        }
        do {
            let first = try mirror(a)
            let context = container.newContext(author: "MainApp")
            try context.insert(ReadLater.Article(title: "in the first", url: "https://spaces.example/first"))
            try context.save()
            _ = try first.round()
        }
        for other: String? in [b, nil] {
            let error = #expect(throws: MirrorError.self) { _ = try mirror(other) }
            #expect(error?.code == .otherLog, "\(error?.description ?? "")")
        }
        // A forgotten --space is named, as the administrator or the member, and the refused run
        // makes nothing on the server (it made an empty log outside any space).
        let member = #expect(throws: MirrorError.self) {
            _ = try Mirror(
                container: container, registry: try TokenRegistry(group: group.path),
                connection: try server.connect(as: role))
        }
        #expect(member?.description.contains("run with --space \(a)") == true, "\(member?.description ?? "")")
        let admin = #expect(throws: MirrorError.self) { _ = try mirror(nil) }
        #expect(admin?.description.contains("run with --space \(a)") == true, "\(admin?.description ?? "")")
        let made = try PostgresConnection(try #require(server.database).conninfo).execute(
            "SELECT to_regnamespace($1) IS NOT NULL", [MirrorServer.defaultSchema])
        #expect(made.first?[0] == "f", "a refused run made the log outside any space")
        // The log it was bound to still takes it.
        #expect(try mirror(a).round().lag == 0)
    }

    @Test func spaceNamesAndRolesAreChecked() throws {
        let server = Server()
        let admin = try server.admin
        for bad in ["", "Alice", "1st", "a-b", "a b", "a'b", String(repeating: "a", count: 41), "é"] {
            #expect(throws: PostgresError.self, "\(bad)") { try admin.create(bad) }
        }
        let space = try server.space("checked")
        #expect(throws: PostgresError.self) { try admin.create(space) }
        let error = #expect(throws: PostgresError.self) { try admin.grant(space, to: "no_such_role_\(server.tag)") }
        #expect(error?.message.contains("there is no role") == true)
        #expect(throws: PostgresError.self) { try admin.grant("missing_\(server.tag)", to: "postgres") }
        let role = try server.role("listed")
        try admin.grant(space, to: role)
        #expect(try admin.list().contains(MirrorSpaces.Space(name: space, roles: [role])))
        // A space that does not exist, asked for by a mirror: named as such.
        let missing = #expect(throws: PostgresError.self) {
            _ = try Machine(server, role: role, space: "missing_\(server.tag)")
        }
        #expect(missing?.message.contains("there is no space") == true)
        try admin.delete(space)
        #expect(try !admin.exists(space))
    }

    /// The same through the executables: `storectl mirror-admin` makes, grants, lists and revokes;
    /// `storectl mirror --space` as the machine's role (PGUSER) syncs until it is revoked.
    @Test(.tags(.multiProcess)) func theCommandsMakeGrantAndRevokeSpaces() throws {
        let server = Server()
        let database = try #require(server.database)
        let role = try server.role("cli")
        let space = "cli_\(server.tag)"
        let admin = database.environment
        func storectl(_ arguments: [String], as user: String? = nil) throws -> [String] {
            var environment = admin
            if let user { environment["PGUSER"] = user }
            let child = try Child("storectl", arguments + ["--json"], environment: environment)
            _ = try child.waitForExit()
            return child.lines
        }
        #expect(try storectl(["mirror-admin", "--create-space", space]).first?.contains("\"created\":true") == true)
        defer { _ = try? PostgresConnection().execute("DROP ROLE IF EXISTS \(MirrorServer.spacePrefix)\(space)") }
        #expect(
            try storectl(["mirror-admin", "--grant", space, "--role", role]).first?.contains("\"granted\":true") == true
        )
        let listed = try storectl(["mirror-admin", "--list"])
        #expect(listed.contains("{\"space\":\"\(space)\",\"roles\":[\"\(role)\"]}"), "\(listed)")

        let (one, two) = (TemporaryGroup(), TemporaryGroup())
        _ = try Child("main-app", ["add", "--group", one.path, "--url", "https://cli.example/", "--title", "cli"])
            .waitForExit()
        for group in [one, two] {
            let round = try storectl(["mirror", "--space", space, "--group", group.path], as: role)
            #expect(round.first?.contains("\"lag\":0") == true, "\(round)")
        }
        _ = try storectl(["mirror", "--space", space, "--group", one.path], as: role)
        let listing = try Child("main-app", ["list", "--group", two.path, "--json"])
        _ = try listing.waitForExit()
        #expect(listing.lines.contains { $0.contains("https://cli.example/") }, "\(listing.lines)")

        #expect(
            try storectl(["mirror-admin", "--revoke", space, "--role", role]).first?.contains("\"revoked\":true")
                == true)
        var environment = admin
        environment["PGUSER"] = role
        let denied = Looker("storectl", ["mirror", "--space", space, "--group", two.path], environment: environment)
        let (status, message) = denied.finish()
        #expect(status == 1)
        #expect(message.contains("role '\(role)' may not use space '\(space)'"), "\(message)")
        // Usage mistakes are said as such (exit 2).
        for wrong in [["--grant", space], ["--role", role], ["--create-space", space, "--list"]] {
            let (status, message) = Looker("storectl", ["mirror-admin"] + wrong, environment: admin).finish()
            #expect(status == 2, "\(wrong): \(message)")
        }
        // A name that is no space name, refused before anything connects, says the rule.
        for wrong in [
            ["mirror-admin", "--create-space", "Bad-Name"], ["mirror", "--space", "Bad-Name", "--group", two.path],
        ] {
            let (status, message) = Looker("storectl", wrong, environment: admin).finish()
            #expect(status == 2, "\(wrong): \(message)")
            #expect(message.contains("'Bad-Name' is not a space name: 1 to 40 lowercase"), "\(message)")
            #expect(!message.contains("PostgreSQL"), "\(message)")
        }
        #expect(try storectl(["mirror-admin", "--delete-space", space]).first?.contains("\"deleted\":true") == true)
    }

    /// Many spaces on one server, three machines each, each machine adding a random number of
    /// articles: every space converges to its own articles and nothing of another's.
    /// `SHAREDSTORE_SPACES` sets how many (default 12; `Scripts/stress.sh --mirror` runs 1,000).
    @Test func manySpacesOfThreeMachinesEachConverge() throws {
        let count = Int(ProcessInfo.processInfo.environment["SHAREDSTORE_SPACES"] ?? "") ?? 12
        let seed =
            UInt64(ProcessInfo.processInfo.environment["SHAREDSTORE_SPACES_SEED"] ?? "")
            ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("manySpacesOfThreeMachinesEachConverge: \(count) spaces, seed \(seed) (SHAREDSTORE_SPACES_SEED replays)")
        var random = TestRandom(state: seed)
        let server = Server()
        let role = try server.role("device")
        var expected: [String: [String]] = [:]
        for n in 0..<count {
            let space = try server.space("s\(n)")
            try server.admin.grant(space, to: role)
            // A space's machines live while it is checked (each holds a connection); the
            // server keeps every space's log.
            let machines = try (0..<3).map { _ in try Machine(server, role: role, space: space) }
            var titles: [String] = []
            for (m, machine) in machines.enumerated() {
                for i in 0..<(1 + random.next(3)) {
                    let title = "\(space) m\(m) \(i)"
                    try machine.add(title)
                    titles.append(title)
                }
            }
            try Self.settle(machines)
            for machine in machines {
                #expect(try machine.titles == titles.sorted(), "space \(space), seed \(seed)")
                #expect(try machine.mirror.verify().isEmpty, "space \(space), seed \(seed)")
            }
            expected[space] = titles.sorted()
        }
        // Each space's log holds its own machines' transactions only.
        let admin = try PostgresConnection(try #require(server.database).conninfo)
        for (space, titles) in expected {
            let rows = try admin.execute("SELECT payload FROM \(MirrorServer.spacePrefix)\(space).transactions")
            let text = rows.compactMap { $0[0] }.joined()
            #expect(titles.allSatisfy { text.contains($0) }, "space \(space)")
            let others = expected.keys.filter { $0 != space && text.contains("\($0) m") }
            #expect(others.isEmpty, "space \(space) holds rows of \(others), seed \(seed)")
        }
        #expect(try server.admin.list().filter { expected[$0.name] != nil }.count == count)
    }
}
