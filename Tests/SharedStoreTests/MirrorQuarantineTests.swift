import Foundation
import ReadLater
import SharedStore
import SharedStoreMirror
import SharedStorePostgres
import SharedStoreSQLite
import Testing

@testable import SharedStoreCore

/// Rows that cannot be applied, from whatever source, are quarantined and reported; nothing
/// wedges, traps or wraps (issue 19, reproductions 5 to 8).
@Suite(
    .enabled(if: ProcessInfo.processInfo.environment["PGHOST"] != nil, "no PostgreSQL server (PGHOST)"),
    .tags(.postgres))
struct MirrorQuarantineTests {
    typealias Machine = MirrorTests.Machine
    typealias Database = MirrorTests.Database

    /// Writes a row on the server as another program would (no mirror involved).
    static func plant(_ db: Database, sequence: Int64? = nil, payload: String, token: Int64 = 1) throws -> Int64 {
        let c = try PostgresConnection(db.conninfo)
        let rows = try c.execute(
            """
            INSERT INTO sharedstore_mirror.transactions(sequence, origin, token, author, payload)
            VALUES (coalesce($1::bigint, (SELECT coalesce(max(sequence), 0) + 1 FROM sharedstore_mirror.transactions)),
                    $2::uuid, $3, 'Hostile', $4) RETURNING sequence
            """, [sequence.map(String.init), UUID().uuidString.lowercased(), String(token), payload])
        return try #require(rows.first?[0].flatMap { Int64($0) })
    }

    static func categoryPayload(model: Int, gid: UUID = UUID(), entity: String = "Category", values: String) -> String {
        #"{"v":1,"model":\#(model),"changes":[{"k":"u","e":"\#(entity)","g":"\#(gid.uuidString.lowercased())","a":"#
            + values + #","r":{}}]}"#
    }

    /// Reproduction 5: a payload of an older model is read through the renames since; rows that
    /// cannot be applied (malformed, a value the model refuses, a model number that would
    /// wrap) are quarantined, pulls go on past them, every round and `storectl verify` report
    /// them, and `--retry-quarantined` applies a mended row.
    @Test(.tags(.multiProcess)) func badRowsAreQuarantinedAndTheRestIsApplied() throws {
        let db = try Database()
        let (a, b) = (Machine(db), Machine(db))
        var mb: Mirror? = try b.mirror()
        _ = try mb?.round()
        // A machine on model 1 (Category.name, later renamed label) shares a category.
        let old = TemporaryGroup()
        let v1 = try old.open(try ReadLater.model(version: 1))
        let context = v1.newContext(author: "Old")
        let swift = try context.insert("Category", ["name": "Swift"])
        _ = try context.insert(
            "Article", ["title": "old", "url": "https://old.example", "createdAt": .date(Date())],
            relationships: ["category": swift])
        try context.save()
        _ = try Mirror(
            container: v1, registry: try TokenRegistry(group: old.path), connection: try PostgresConnection(db.conninfo)
        ).round()
        let hostile = [
            try Self.plant(db, payload: "not json"),
            try Self.plant(db, payload: Self.categoryPayload(model: 1, values: #"{"name":null}"#)),
            try Self.plant(db, payload: #"{"v":1,"model":1e20,"changes":[]}"#),
            // A merge that does not say into what.
            try Self.plant(
                db,
                payload: #"{"v":1,"model":3,"changes":[{"k":"m","e":"Category","g":"\#(GlobalID.text(UUID()))"}]}"#
            ),
        ]
        _ = try Self.share(a, "after-the-bad-rows")
        _ = try a.mirror().round()
        let round = try #require(try mb?.round())
        #expect(round.quarantined.compactMap(\.sequence) == hostile)
        let titles = Set(try b.list().values.compactMap { json($0)["title"] as? String })
        #expect(titles == ["old", "after-the-bad-rows"], "the pull stopped at a bad row")
        let label = try #require(b.container).newContext().fetch(FetchRequest("Category")).first?["label"]
        #expect(label == .string("Swift"), "model 1's name is model 3's label")
        // The command line says so, and fails, as does verify (one mirror per store at a time).
        mb = nil
        let cli = try Child(
            "storectl", ["mirror", "--group", b.group.path, "--json"], environment: db.environment)
        #expect(try cli.waitForExit() == 1)
        #expect(cli.lines.last?.contains("\"quarantined\":[{\"sequence\":\(hostile[0])") == true)
        let verify = try Child("storectl", ["verify", "--group", b.group.path, "--json"])
        #expect(try verify.waitForExit() == 1)
        #expect(verify.lines.contains { $0.contains("\"check\":\"mirror-quarantine\",\"ok\":false") })
        // Mended on the server, the rows apply again; removed, they are forgotten.
        let c = try PostgresConnection(db.conninfo)
        try c.execute(
            "UPDATE sharedstore_mirror.transactions SET payload = $1 WHERE sequence = $2",
            [Self.categoryPayload(model: 3, values: #"{"label":["s","Mended"]}"#), String(hostile[1])])
        try c.execute("DELETE FROM sharedstore_mirror.transactions WHERE sequence = $1", [String(hostile[0])])
        let again = try b.mirror()
        #expect(try again.retryQuarantined() == 1)
        #expect(try again.round().quarantined.compactMap(\.sequence) == [hostile[2], hostile[3]])
        let names = try #require(b.container).newContext().fetch(FetchRequest("Category")).map(\.["label"])
        #expect(Set(names) == [.string("Swift"), .string("Mended")])
    }

    /// Large rows (a member's, or one legitimate transaction of a million changes) are read a
    /// byte budget at a time, one row at least, never a whole batch of them at once. A row past
    /// this machine's row limit (`--max-row-mb`) is quarantined unread, naming its size, and the
    /// pull goes on past it; once the limit allows it, `--retry-quarantined` applies it.
    @Test(.tags(.multiProcess)) func largeRowsAreReadABudgetAtATimeAndRowsPastTheLimitUnread() throws {
        let db = try Database()
        let (a, b) = (Machine(db), Machine(db))
        _ = try b.mirror().round()
        // Three valid rows of 10 MiB each (a key the payload's reader ignores pads them).
        let pad = String(repeating: "x", count: 10 << 20)
        let big = try (1...3).map { n in
            try Self.plant(
                db,
                payload: #"{"v":1,"model":3,"pad":"\#(pad)","changes":[{"k":"u","e":"Category","g":""#
                    + GlobalID.text(UUID()) + #"","a":{"label":["s","big-\#(n)"]},"r":{}}]}"#
            )
        }
        _ = try Self.share(a, "after-the-big-rows")
        _ = try a.mirror().round()
        // One read stops where the payloads reach the budget (16 MiB: two rows), and says more follow.
        let server = try MirrorServer(connection: try PostgresConnection(db.conninfo))
        let first = try server.pull(after: big[0] - 1, for: UUID(), limit: 500)
        #expect(first.transactions.map(\.sequence) == Array(big[0...1]))
        #expect(first.read == 500, "cut by the budget, the read says more follow")
        // A machine allowing 8 MiB a row quarantines them unread, naming their size, and goes on.
        let limited = try Child(
            "storectl", ["mirror", "--group", b.group.path, "--json", "--max-row-mb", "8"], environment: db.environment)
        #expect(try limited.waitForExit() == 1)
        let said = limited.lines.joined(separator: "\n")
        #expect(said.contains("past this machine's row limit of 8388608"), "\(said.prefix(2000))")
        #expect(said.contains("\"sequence\":\(big[0])") && said.contains("\"sequence\":\(big[2])"))
        let titles = Set(try b.list().values.compactMap { json($0)["title"] as? String })
        #expect(titles == ["after-the-big-rows"], "the pull stopped at a row past the limit")
        // Allowed (the default: an eighth of this machine's memory), they are read and applied.
        let allowed = try Child(
            "storectl", ["mirror", "--group", b.group.path, "--json", "--retry-quarantined"],
            environment: db.environment)
        #expect(try allowed.waitForExit() == 0, "\(allowed.lines.joined(separator: "\n").prefix(2000))")
        let labels = try #require(b.container).newContext().fetch(FetchRequest("Category")).map(\.["label"])
        #expect(Set(labels) == [.string("big-1"), .string("big-2"), .string("big-3")])
        // A relative --group is mirrored as any other (it was taken for a store in memory).
        let url = URL(fileURLWithPath: b.group.path)
        let relative = try Child(
            "storectl", ["mirror", "--group", url.lastPathComponent, "--json"], environment: db.environment,
            directory: url.deletingLastPathComponent().path)
        #expect(try relative.waitForExit() == 0, "\(relative.lines)")
    }

    static func share(_ m: Machine, _ title: String) throws -> String {
        try MirrorDivergenceTests.share(m, title)
    }

    /// Reproduction 6: a row at the largest sequence neither traps nor wraps: the pull reads
    /// it, and the next upload fails with an error naming the problem.
    @Test(.tags(.multiProcess)) func aRowAtTheLargestSequenceEndsUploadsWithAnError() throws {
        let db = try Database()
        let (a, b) = (Machine(db), Machine(db))
        _ = try a.mirror().round()
        _ = try Self.plant(db, sequence: Int64.max, payload: #"{"v":1,"model":1,"changes":[]}"#)
        _ = try Self.share(a, "x")
        let cli = try Child("storectl", ["mirror", "--group", a.group.path, "--json"], environment: db.environment)
        #expect(try cli.waitForExit() == 1)
        #expect(try b.mirror().round().pulled == 1)
    }

    /// Reproduction 7: a payload that names an Article's global id as a Category is refused
    /// (quarantined): one global id never names two objects; verify checks it.
    @Test(.tags(.multiProcess)) func aGlobalIDNamingAnotherEntityIsRefused() throws {
        let db = try Database()
        let (a, b) = (Machine(db), Machine(db))
        _ = try Self.share(a, "article")
        try MirrorTests.settle([try a.mirror(), try b.mirror()])
        let container = try #require(b.container)
        let context = container.newContext()
        let article = try #require(try context.fetch(FetchRequest("Article")).first)
        let gid = try context.globalID(of: article.id)
        let bad = try Self.plant(db, payload: Self.categoryPayload(model: 3, gid: gid, values: #"{"label":["s","X"]}"#))
        // An article whose category names that article: refused too.
        let article2 =
            #"{"v":1,"model":3,"changes":[{"k":"u","e":"Article","g":"\#(UUID().uuidString.lowercased())","#
            + #""a":{"title":["s","x"],"url":["s","https://x.example"],"createdAt":["t","1"],"isRead":["b",false]},"#
            + #""r":{"category":"\#(gid.uuidString.lowercased())"}}]}"#
        let bad2 = try Self.plant(db, payload: article2)
        #expect(try b.mirror().round().quarantined.compactMap(\.sequence) == [bad, bad2])
        #expect(try context.fetch(FetchRequest("Category")).isEmpty)
        #expect(try container.duplicateGlobalIDs().isEmpty)
        // Two objects made to share an id by a foreign tool: verify names it.
        let c = try SQLiteConnection(path: b.group.storePath, busyTimeoutMilliseconds: 5000)
        try c.execute(
            "INSERT INTO Category(label, articleCount, Z_GID) SELECT 'forged', 0, Z_GID FROM Article LIMIT 1")
        let verify = StoreVerifier.verify(container: container, registry: try TokenRegistry(group: b.group.path))
        let check = try #require(verify.first { $0.name == "global-ids" })
        #expect(!check.ok && check.detail.contains(GlobalID.text(gid)))
    }

    /// A merge row that names an object of another entity, as the object merged away or as the
    /// one it merges into, is quarantined (a hostile review found both applied: a category took
    /// an article's global id, or an alias from the category to the article turned the
    /// category's later rows away), and the category's later rename still arrives.
    @Test(.tags(.multiProcess)) func aMergeNamingAnotherEntitysObjectIsQuarantined() throws {
        let db = try Database()
        let (a, b) = (Machine(db), Machine(db))
        let ca = try #require(a.container)
        let app = ca.newContext(author: "App")
        let swift = try app.insert("Category", ["label": "Swift"])
        _ = try app.insert(
            "Article", ["title": "t", "url": "https://t.example", "createdAt": .date(Date())],
            relationships: ["category": swift])
        try app.save()
        let (ma, mb) = (try a.mirror(), try b.mirror())
        try MirrorTests.settle([ma, mb])
        let context = try #require(b.container).newContext()
        let category = try #require(try context.fetch(FetchRequest("Category")).first)
        let article = try #require(try context.fetch(FetchRequest("Article")).first)
        let (cat, art) = (try context.globalID(of: category.id), try context.globalID(of: article.id))
        func merge(_ entity: String, _ loser: UUID, into winner: UUID) -> String {
            #"{"v":1,"model":3,"changes":[{"k":"m","e":"\#(entity)","g":"\#(GlobalID.text(loser))","#
                + #""w":"\#(GlobalID.text(winner))"}]}"#
        }
        let bad = [
            try Self.plant(db, payload: merge("Category", cat, into: art)),
            try Self.plant(db, payload: merge("Article", cat, into: art)),
        ]
        #expect(try mb.round().quarantined.compactMap(\.sequence) == bad)
        #expect(try #require(b.container).duplicateGlobalIDs().isEmpty)
        let fresh = try #require(b.container).newContext()
        #expect(try fresh.globalID(of: try #require(try fresh.fetch(FetchRequest("Category")).first).id) == cat)
        // A renames the category: B takes it, and nothing else is quarantined.
        let mine = try #require(try app.fetch(FetchRequest("Category")).first)
        try app.update(mine.id, ["label": "Rust"])
        try app.save()
        _ = try ma.round()
        #expect(try mb.round().quarantined.compactMap(\.sequence) == bad)
        let labels = try #require(b.container).newContext().fetch(FetchRequest("Category")).map { $0["label"] }
        #expect(labels == [.string("Rust")])
    }

    /// A row that claims a newer model stops the pull at it, also when another program wrote it
    /// with a false model number (the rows after it may build on it); deleting that row on the
    /// server frees the pull, which goes on with the rows after it.
    @Test(.tags(.multiProcess)) func aRowOfAFalseNewerModelStopsThePullUntilItIsDeleted() throws {
        let db = try Database()
        let (a, b) = (Machine(db), Machine(db))
        let mb = try b.mirror()
        _ = try mb.round()
        let bogus = try Self.plant(db, payload: #"{"v":1,"model":999999,"changes":[]}"#)
        _ = try Self.share(a, "after-the-false-row")
        // (A round of A's would stop at the row too: A only pushes.)
        #expect(try a.mirror().push() == 1)
        #expect(throws: MirrorError.self) { try mb.round() }
        #expect(try b.list().isEmpty, "pulled past a row of a newer model")
        let c = try PostgresConnection(db.conninfo)
        _ = try c.execute("DELETE FROM sharedstore_mirror.transactions WHERE sequence = $1", [String(bogus)])
        let round = try mb.round()
        #expect(round.pulled == 1 && round.quarantined.isEmpty)
        let titles = try b.list().values.compactMap { json($0)["title"] as? String }
        #expect(titles == ["after-the-false-row"])
    }

    /// A row a foreign tool made invalid (`title` NULL) is not uploaded when a save of another
    /// property sends the object up: it is quarantined as a local change, the other machines
    /// keep what they had, and a save that makes it valid sends it up.
    @Test(.tags(.multiProcess)) func anInvalidLocalRowIsNotUploaded() throws {
        let db = try Database()
        let (a, b) = (Machine(db), Machine(db))
        let id = try Self.share(a, "valid")
        let (ma, mb) = (try a.mirror(), try b.mirror())
        try MirrorTests.settle([ma, mb])
        let pk = try #require(Int64(id.split(separator: "/").last ?? ""))
        let c = try SQLiteConnection(path: a.group.storePath, busyTimeoutMilliseconds: 5000)
        try c.execute("UPDATE Article SET title = NULL WHERE Z_PK = \(pk)")
        _ = try a.run("main-app", ["mark-read", id])
        let round = try ma.round()
        #expect(round.quarantined.count == 1 && round.quarantined.first?.sequence == nil)
        #expect(round.quarantined.first?.reason.contains("title is required") == true)
        _ = try mb.round()
        #expect(try b.list().values.first?.contains("\"title\":\"valid\"") == true)
        let container = try #require(a.container)
        let writer = container.newContext(author: "MainApp")
        try writer.update(ObjectID(storeID: container.storeID, entity: "Article", primaryKey: pk), ["title": "mended"])
        try writer.save()
        try MirrorTests.settle([ma, mb])
        #expect(try container.quarantinedMirrorRows().isEmpty)
        #expect(try a.list() == b.list())
        #expect(try b.list().values.first?.contains("\"title\":\"mended\"") == true)
    }

    /// Reproduction 8: a password on the command line is refused however libpq would read it.
    @Test(
        .tags(.multiProcess),
        .tags(.multiProcess),
        arguments: [
            "password = x", "host=/tmp password='x y'", "postgresql://u@localhost/db?pass%77ord=x",
            "postgresql://u:secret@localhost/db", "postgres://u:@localhost/db?password=x",
            "postgresql:///db?sslpassword=x",
        ])
    func aPasswordOnTheCommandLineIsRefused(conninfo: String) throws {
        let group = TemporaryGroup()
        let cli = try Child("storectl", ["mirror", "--group", group.path, "--postgres", conninfo])
        #expect(try cli.waitForExit() == 2)
    }

    /// A `mirror.lock` others can write is refused, with the fix.
    @Test func aMirrorLockOthersCanWriteIsRefused() throws {
        let db = try Database()
        let a = Machine(db)
        _ = try #require(a.container)
        let lock = a.group.path + "/mirror.lock"
        #expect(FileManager.default.createFile(atPath: lock, contents: nil))
        #expect(chmod(lock, 0o666) == 0)
        let error = #expect(throws: MirrorError.self) { try a.mirror() }
        #expect(error?.description.contains("chmod 600") == true)
    }

    /// `storectl mirror --follow` says why a round cannot run: another mirror holds the store
    /// (not "unreachable"), and the line holds no escaped escape.
    @Test(.tags(.multiProcess)) func aFollowerSaysAnotherMirrorHoldsTheStore() throws {
        let db = try Database()
        let a = Machine(db)
        var holder: Mirror? = try a.mirror()
        let follower = try Child(
            "storectl", ["mirror", "--follow", "--group", a.group.path, "--json"], environment: db.environment)
        let line = try follower.waitForLine { $0.contains("\"state\"") }
        #expect(line.contains("another mirror runs on this store") && !line.contains("\\\\n"))
        // The status is in its own field; `server` names a server, as every round's line does.
        #expect(json(line)["state"] as? String == "another mirror runs on this store", "\(line)")
        #expect(json(line)["retry_in"] as? Double != nil)
        #expect((json(line)["server"] as? String).map { $0.hasPrefix("PostgreSQL") } ?? true, "\(line)")
        holder = nil
        try follower.waitForLine { json($0)["lag"] as? Int == 0 }
        kill(follower.process.processIdentifier, SIGTERM)
        #expect(try follower.waitForExit() == 0)
        _ = holder
    }

    /// A `--read-from` server that is down does not stop the uploads (hostile review of issue
    /// 25): a follower pulls from the upload server meanwhile, and its rounds say why.
    @Test(.tags(.multiProcess)) func aFollowerWhoseReadServerIsDownGoesOnUploading() throws {
        let db = try Database()
        let (a, b) = (Machine(db), Machine(db))
        let down = "host=\(a.group.root)/no-server port=5432 connect_timeout=2"
        let follower = try Child(
            "storectl", ["mirror", "--follow", "--group", a.group.path, "--json", "--read-from", down],
            environment: db.environment)
        let first = try follower.waitForLine { json($0)["lag"] != nil }
        #expect((json(first)["read_from_down"] as? String)?.contains("no-server") == true, "\(first)")
        _ = try MirrorDivergenceTests.share(a, "while-the-standby-is-down")
        try follower.waitForLine { ($0.contains("\"pushed\":1")) && json($0)["lag"] as? Int == 0 }
        _ = try b.mirror().round()
        #expect(try b.list().values.contains { $0.contains("while-the-standby-is-down") })
        kill(follower.process.processIdentifier, SIGTERM)
        #expect(try follower.waitForExit() == 0)
    }

    /// A follower of an older model stops (exit 1) once a newer app migrated the store, as the
    /// targets' watchers do, instead of retrying for ever.
    @Test(.tags(.multiProcess)) func anOlderFollowerStopsWhenTheStoreIsMigrated() throws {
        let db = try Database()
        let a = Machine(db)
        let path = a.group.path
        do { _ = try Container(group: path, model: try ReadLater.model(version: 1)) }
        let follower = try Child(
            "storectl", ["mirror", "--follow", "--model-version", "1", "--group", path, "--json"],
            environment: db.environment)
        try follower.waitForLine { json($0)["lag"] != nil }
        #expect(try Child("storectl", ["migrate", "--group", path]).waitForExit() == 0)
        #expect(
            try Child("share-extension", ["share", "--group", path, "--url", "https://n.example", "--title", "n"])
                .waitForExit() == 0)
        #expect(try follower.waitForExit(timeout: 30) == 1)
    }

    /// A row planted under this store's origin at the token its next save takes is not taken
    /// for that save (another timestamp, or none): the save goes up under a fresh key.
    @Test(.tags(.multiProcess)) func aPlantedRowAtTheNextTokenDoesNotSwallowTheNextSave() throws {
        let db = try Database()
        let (a, b) = (Machine(db), Machine(db))
        let (ma, mb) = (try a.mirror(), try b.mirror())
        try MirrorTests.settle([ma, mb])
        let container = try #require(a.container)
        let next = try container.currentToken().value + 1
        let c = try PostgresConnection(db.conninfo)
        try c.execute(
            """
            INSERT INTO sharedstore_mirror.transactions(sequence, origin, token, author, payload)
            SELECT coalesce(max(sequence), 0) + 1, $1::uuid, $2, 'Hostile', '{"v":1,"model":3,"changes":[]}'
            FROM sharedstore_mirror.transactions
            """, [container.storeID.uuidString.lowercased(), String(next)])
        _ = try Self.share(a, "after-the-plant")
        try MirrorTests.settle([ma, mb])
        #expect(try b.list().values.contains { $0.contains("after-the-plant") })
    }

    /// A store whose pull cursor is past the end of the server's log (rows it applied were
    /// removed) says so instead of skipping every new row with lag 0.
    @Test func aCursorPastTheEndOfTheServersLogIsAnError() throws {
        let db = try Database()
        let a = Machine(db)
        let ma = try a.mirror()
        _ = try ma.round()
        let top = try Self.plant(db, sequence: Int64.max, payload: #"{"v":1,"model":3,"changes":[]}"#)
        _ = try ma.round()
        try PostgresConnection(db.conninfo).execute(
            "DELETE FROM sharedstore_mirror.transactions WHERE sequence = $1", [String(top)])
        let error = #expect(throws: MirrorError.self) { try ma.round() }
        #expect(error?.description.contains("before this store's pull cursor") == true)
    }
}
