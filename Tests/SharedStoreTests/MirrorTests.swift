import Foundation
import ReadLater
import SharedStore
import SharedStoreMirror
import SharedStorePostgres
import Testing

/// The mirror (issue 14) against a real PostgreSQL server (`Scripts/test.sh` starts one), each
/// test in a database of its own. "Machines" are group directories; writes go through the
/// targets as processes.
@Suite(
    .enabled(if: ProcessInfo.processInfo.environment["PGHOST"] != nil, "no PostgreSQL server (PGHOST)"),
    .tags(.postgres))
struct MirrorTests {
    /// A database of its own on the test server, dropped at the end.
    final class Database {
        let name = "sharedstore_mirror_\(UUID().uuidString.prefix(8).lowercased())"
        init() throws { try PostgresConnection().createDatabase(name) }
        deinit { _ = try? PostgresConnection().dropDatabase(name) }
        var conninfo: String { "dbname=\(name)" }
        var environment: [String: String] { ["PGDATABASE": name] }
    }

    /// One machine: its group directory, its store, its mirror.
    final class Machine {
        let group = TemporaryGroup()
        let database: Database
        init(_ database: Database) { self.database = database }
        lazy var container: Container? = try? group.open()

        func mirror() throws -> Mirror {
            let container = try #require(self.container)
            return try Mirror(
                container: container, registry: try TokenRegistry(group: group.path),
                connection: try PostgresConnection(database.conninfo))
        }

        func run(_ tool: String, _ arguments: [String]) throws -> [String] {
            let child = try Child(
                tool, arguments + ["--group", group.path, "--json"], environment: database.environment)
            #expect(try child.waitForExit() == 0, "\(tool) \(arguments)")
            return child.lines
        }

        /// `main-app list --json`, by global id, without the local ids.
        func list() throws -> [String: String] {
            var out: [String: String] = [:]
            for line in try run("main-app", ["list"]) {
                var fields = json(line)
                let gid = fields["gid"] as? String ?? "?"
                fields["id"] = nil
                out[gid] = String(
                    data: try JSONSerialization.data(withJSONObject: fields, options: .sortedKeys), encoding: .utf8)
            }
            return out
        }
    }

    /// Rounds of every mirror until a full pass moves nothing and reports no lag.
    static func settle(_ mirrors: [Mirror]) throws {
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            var quiet = true
            for m in mirrors {
                let r = try m.round()
                if r.pushed + r.pulled > 0 || r.lag != 0 { quiet = false }
            }
            if quiet { return }
        }
        Issue.record("the mirrors did not settle within 60 s")
    }

    /// Waits until every machine lists the same `count` articles by global id, at most 60 s.
    static func converge(_ machines: [Machine], count: Int, followers: [Child] = []) throws -> [[String: String]] {
        let deadline = Date().addingTimeInterval(60)
        while true {
            let lists = try machines.map { try $0.list() }
            if lists[0].count == count && lists.allSatisfy({ $0 == lists[0] }) { return lists }
            if Date() > deadline {
                let said = followers.map { $0.lines.suffix(5).joined(separator: " | ") }.joined(separator: " || ")
                Issue.record(
                    "the machines did not converge on \(count) articles: \(lists.map(\.count)); mirrors: \(said)")
                return lists
            }
        }
    }

    /// Two and three machines, each with `storectl mirror --follow`, writing at once through the
    /// targets — shares, then updates and deletes of objects another machine made.
    @Test(.tags(.multiProcess), arguments: [2, 3])
    func machinesWritingAtOnceWithMirrorsFollowingConverge(count: Int) throws {
        let db = try Database()
        let machines = (0..<count).map { _ in Machine(db) }
        let followers = try machines.map { m in
            try Child(
                "storectl", ["mirror", "--follow", "--group", m.group.path, "--json"], environment: db.environment)
        }
        defer { followers.forEach { kill($0.process.processIdentifier, SIGTERM) } }
        var writers: [Child] = []
        for (i, m) in machines.enumerated() {
            for k in 0..<6 {
                writers.append(
                    try Child(
                        "share-extension",
                        [
                            "share", "--group", m.group.path, "--url", "https://m\(i).example/\(k)", "--title",
                            "m\(i) k\(k)", "--category", ["Swift", "Go", "Rust"][k % 3],
                        ]))
            }
        }
        for w in writers { #expect(try w.waitForExit() == 0) }
        _ = try Self.converge(machines, count: 6 * count, followers: followers)
        // Updates and deletes, on the last machine, of objects the first made.
        let last = machines[count - 1]
        let fromFirst = try last.run("main-app", ["list"]).filter { $0.contains("\"m0 k") }.map {
            json($0)["id"] as? String ?? ""
        }
        try #require(fromFirst.count >= 2)
        _ = try last.run("main-app", ["mark-read", fromFirst[0]])
        _ = try last.run("main-app", ["delete", fromFirst[1]])
        let lists = try Self.converge(machines, count: 6 * count - 1, followers: followers)
        #expect(lists[0].values.filter { $0.contains("\"isRead\":true") }.count == 1)
        // One category per name on every machine, however many machines made it.
        for m in machines {
            let categories = try #require(m.container).newContext().fetch(FetchRequest("Category"))
            #expect(categories.count == 3)
        }
        for f in followers {
            kill(f.process.processIdentifier, SIGTERM)
            #expect(try f.waitForExit() == 0)
        }
    }

    @Test(.tags(.multiProcess)) func collidingUniqueCategoriesBecomeOneEverywhereTheSameOne() throws {
        let db = try Database()
        let (a, b) = (Machine(db), Machine(db))
        _ = try a.run(
            "share-extension", ["share", "--url", "https://a.example", "--title", "from a", "--category", "Swift"])
        _ = try b.run(
            "share-extension", ["share", "--url", "https://b.example", "--title", "from b", "--category", "Swift"])
        let gidOf = { (m: Machine) throws -> UUID in
            let context = try #require(m.container).newContext()
            let category = try #require(try context.fetch(FetchRequest("Category")).first)
            return try context.globalID(of: category.id)
        }
        let (ga, gb) = (try gidOf(a), try gidOf(b))
        try Self.settle([try a.mirror(), try b.mirror()])
        let winner = ga.uuidString.lowercased() < gb.uuidString.lowercased() ? ga : gb
        for m in [a, b] {
            let context = try #require(m.container).newContext()
            #expect(try context.fetch(FetchRequest("Category")).count == 1)
            #expect(try gidOf(m) == winner, "the smaller global id stays, on every machine")
            let articles = try context.fetch(FetchRequest("Article"))
            #expect(articles.count == 2 && articles.allSatisfy { $0.relationships["category"] != nil })
        }
        #expect(try a.list() == b.list())
    }

    /// A category renamed on one machine to the name another machine gave a new one: they
    /// become one category everywhere (the smaller global id), with every article on it.
    @Test(.tags(.multiProcess), arguments: [true, false])
    func aRenameOntoAnotherMachinesNewCategoryMergesThemTheSameEverywhere(renamePushedLast: Bool) throws {
        let db = try Database()
        let (a, b) = (Machine(db), Machine(db))
        _ = try a.run("share-extension", ["share", "--url", "https://a.example", "--title", "a", "--category", "Go"])
        let (ma, mb) = (try a.mirror(), try b.mirror())
        try Self.settle([ma, mb])
        _ = try b.run(
            "share-extension", ["share", "--url", "https://b.example", "--title", "b", "--category", "Swift"])
        let container = try #require(a.container)
        let label = ReadLater.categoryName(container.model)
        let context = container.newContext(author: "MainApp")
        let go = try #require(try context.fetch(FetchRequest("Category", where: Key(label) == "Go")).first)
        try context.update(go.id, [label: .string("Swift")])
        try context.save()
        let bContext = try #require(b.container).newContext()
        let swiftOnB = try #require(try bContext.fetch(FetchRequest("Category", where: Key(label) == "Swift")).first)
        let gids = [try context.globalID(of: go.id), try bContext.globalID(of: swiftOnB.id)]
        for m in renamePushedLast ? [mb, ma] : [ma, mb] { _ = try m.push() }
        try Self.settle([ma, mb])
        let winner = gids.min { $0.uuidString.lowercased() < $1.uuidString.lowercased() }
        for m in [a, b] {
            let c = try #require(m.container).newContext()
            let categories = try c.fetch(FetchRequest("Category"))
            #expect(categories.count == 1 && categories.first?[label] == .string("Swift"))
            let stayed = try categories.first.map { try c.globalID(of: $0.id) }
            #expect(stayed == winner)
        }
        let (la, lb) = (try a.list(), try b.list())
        #expect(la == lb && la.count == 2)
        #expect(la.values.allSatisfy { $0.contains("\"category\":\"Swift\"") })
        let checks = StoreVerifier.verify(
            container: try #require(a.container), registry: try TokenRegistry(group: a.group.path))
        let failed = checks.filter { !$0.ok }.map(\.name)
        #expect(failed.isEmpty, "storectl verify: \(failed)")
    }

    /// Many-to-many links travel with the side that owns them, whichever side a save changed.
    @Test func manyToManyLinksConvergeWhicheverSideChangedThem() throws {
        let db = try Database()
        let model = try Model([
            Entity(
                "Post", attributes: [Attribute("title", .string)],
                relationships: [.toMany("topics", "Topic", inverse: "posts")]),
            Entity(
                "Topic", attributes: [Attribute("name", .string)],
                relationships: [.toMany("posts", "Post", inverse: "topics")], uniquenessConstraints: [["name"]]),
        ])
        let (ga, gb) = (TemporaryGroup(), TemporaryGroup())
        let (a, b) = (try ga.open(model), try gb.open(model))
        let mirror = { (c: Container, g: TemporaryGroup) in
            try Mirror(
                container: c, registry: try TokenRegistry(group: g.path),
                connection: try PostgresConnection(db.conninfo))
        }
        let (ma, mb) = (try mirror(a, ga), try mirror(b, gb))
        let ca = a.newContext(author: "A")
        let post = try ca.insert("Post", ["title": "p"])
        let topics = try ["swift", "sqlite", "lmdb"].map { try ca.insert("Topic", ["name": .string($0)]) }
        try ca.relate(post, "topics", to: topics[0])
        try ca.relate(topics[1], "posts", to: post)  // from the other side
        let saved = try ca.save()
        try Self.settle([ma, mb])
        /// Each post's title with its topics' names, as a store holds them.
        func links(_ c: Container) throws -> [String: [String]] {
            let context = c.newContext()
            var out: [String: [String]] = [:]
            for p in try context.fetch(FetchRequest("Post")) {
                out[p["title"].stringValue ?? ""] = try context.related("topics", of: p.id).map {
                    try context.object(with: $0)["name"].stringValue ?? ""
                }.sorted()
            }
            return out
        }
        #expect(try links(b) == ["p": ["sqlite", "swift"]])
        // B breaks one link from the topic's side and makes another.
        let cb = b.newContext(author: "B")
        let postOnB = try #require(try cb.fetch(FetchRequest("Post")).first).id
        let swiftOnB = try #require(try cb.fetch(FetchRequest("Topic", where: Key("name") == "swift")).first).id
        let lmdbOnB = try #require(try cb.fetch(FetchRequest("Topic", where: Key("name") == "lmdb")).first).id
        try cb.unrelate(swiftOnB, "posts", from: postOnB)
        try cb.relate(postOnB, "topics", to: lmdbOnB)
        try cb.save()
        try Self.settle([ma, mb])
        #expect(try links(a) == ["p": ["lmdb", "sqlite"]])
        #expect(try links(a) == links(b))
        _ = saved
    }

    /// A delete on one machine and an update of the same object on another: the later in the
    /// server's order wins. Delete pushed last: gone everywhere; update pushed last: the object
    /// is back everywhere, with the update, under the same global id.
    @Test(.tags(.multiProcess), arguments: [true, false])
    func aDeleteAndAnUpdateOfOneObjectEndTheSameEverywhere(deletePushedLast: Bool) throws {
        let db = try Database()
        let (a, b) = (Machine(db), Machine(db))
        _ = try a.run("share-extension", ["share", "--url", "https://x.example", "--title", "x"])
        let (ma, mb) = (try a.mirror(), try b.mirror())
        try Self.settle([ma, mb])
        let idA = try #require(json(try a.run("main-app", ["list"])[0])["id"] as? String)
        let idB = try #require(json(try b.run("main-app", ["list"])[0])["id"] as? String)
        _ = try a.run("main-app", ["delete", idA])
        _ = try b.run("main-app", ["mark-read", idB])
        for m in deletePushedLast ? [mb, ma] : [ma, mb] { _ = try m.push() }
        try Self.settle([ma, mb])
        let (la, lb) = (try a.list(), try b.list())
        #expect(la == lb)
        #expect(la.count == (deletePushedLast ? 0 : 1))
        if !deletePushedLast { #expect(la.values.first?.contains("\"isRead\":true") == true) }
    }

    @Test(.tags(.multiProcess)) func theCleanerKeepsWhatALaggingMirrorHasNotPushed() throws {
        let db = try Database()
        let (a, b) = (Machine(db), Machine(db))
        let ma = try a.mirror()
        _ = try a.run("share-extension", ["share", "--url", "https://1.example", "--title", "one"])
        _ = try ma.round()
        for i in 2...6 {
            _ = try a.run("share-extension", ["share", "--url", "https://\(i).example", "--title", "\(i)"])
        }
        // main-app merges everything; the mirror is behind; the cleaner runs.
        _ = try a.run("main-app", ["sync"])
        _ = try a.run("history-cleaner", [])
        let retained = try #require(a.container).historyCount()
        #expect(retained >= 5, "the cleaner deleted history the mirror had not pushed")
        try Self.settle([ma, try b.mirror()])
        #expect(try b.list().count == 6)
        _ = try a.run("history-cleaner", [])
        #expect(try #require(a.container).historyCount() <= 1, "once pushed, it can go")
    }

    /// A store mirrored for the first time after its history was cleaned, and a mirror whose
    /// token was reset (its history gone): each uploads every object as it is now.
    @Test(.tags(.multiProcess)) func historyCleanedBeforeItWasPushedIsMadeUpByUploadingEveryObject() throws {
        let db = try Database()
        let (a, b) = (Machine(db), Machine(db))
        for i in 0..<5 {
            _ = try a.run(
                "share-extension",
                ["share", "--url", "https://\(i).example", "--title", "\(i)", "--category", "C\(i % 2)"])
        }
        _ = try a.run("main-app", ["sync"])
        _ = try a.run("history-cleaner", [])
        #expect(try #require(a.container).historyCount() <= 1)
        let ma = try a.mirror()
        try Self.settle([ma, try b.mirror()])
        #expect(try b.list() == a.list() && a.list().count == 5)
        #expect(try b.list().values.allSatisfy { $0.contains("\"category\":\"C") }, "a category was lost")
        // The mirror loses its place, and the history goes: the next push uploads everything.
        _ = try a.run("storectl", ["reset-consumer", "Mirror"])
        _ = try a.run(
            "main-app", ["mark-read", try #require(json(try a.run("main-app", ["list"])[2])["id"] as? String)])
        _ = try a.run("main-app", ["sync"])
        _ = try a.run("history-cleaner", [])
        try Self.settle([ma, try b.mirror()])
        #expect(try b.list() == a.list())
        #expect(try b.list().values.filter { $0.contains("\"isRead\":true") }.count == 1)
    }

    /// A store that only uploads still moves its pull cursor (every `cursorStride` rows of its
    /// own), so that a restarted mirror reads back a bounded number of its own uploads.
    @Test(.tags(.multiProcess)) func aStoreThatOnlyUploadsMovesItsCursorAndStillConverges() throws {
        let db = try Database()
        let (a, b) = (Machine(db), Machine(db))
        let container = try #require(a.container)
        try Fixtures.saveArticles(container.newContext(author: "A"), count: 120)
        let ma = try a.mirror()
        ma.batchSize = 25
        ma.cursorStride = 50
        _ = try ma.round()
        #expect(try container.mirrorValue(MirrorKeys.pullCursor) ?? 0 >= 50)
        // A restart, an update from the other machine: both still end equal.
        let mb = try b.mirror()
        try Self.settle([mb])
        let id = try #require(json(try b.run("main-app", ["list"])[7])["id"] as? String)
        _ = try b.run("main-app", ["mark-read", id])
        try Self.settle([try a.mirror(), mb])
        #expect(try a.list() == b.list() && a.list().count == 120)
    }

    /// `storectl mirror --follow` processes killed with SIGKILL at random moments while the
    /// targets write: after a restart, every share is on both machines once.
    @Test(.tags(.multiProcess)) func mirrorsKilledAtRandomLoseAndDoubleNothing() throws {
        let db = try Database()
        let (a, b) = (Machine(db), Machine(db))
        var random = SystemRandomNumberGenerator()
        var shares = 0
        for round in 0..<6 {
            let followers = try [a, b].map { m in
                try Child(
                    "storectl", ["mirror", "--follow", "--group", m.group.path, "--json"], environment: db.environment)
            }
            // Each prints its first round when it is up.
            for f in followers { try f.waitForLine { _ in true } }
            for (i, m) in [a, b].enumerated() {
                for k in 0..<4 {
                    _ = try m.run(
                        "share-extension",
                        ["share", "--url", "https://\(i).example/\(round)/\(k)", "--title", "\(i)-\(round)-\(k)"])
                    shares += 1
                }
            }
            // Killed after it printed a round that moved something, while a random number of new
            // shares on either machine keep both mirrors pushing and pulling: at a random point.
            let pick = Int.random(in: 0...1, using: &random)
            let victim = followers[pick]
            try victim.waitForLine { json($0)["pushed"] as? Int ?? 0 > 0 || json($0)["pulled"] as? Int ?? 0 > 0 }
            let late = try (0..<Int.random(in: 0...3, using: &random)).map { k in
                try Child(
                    "share-extension",
                    [
                        "share", "--group", [a, b][(pick + k) % 2].group.path, "--url",
                        "https://late.example/\(round)/\(k)", "--title", "late-\(round)-\(k)",
                    ])
            }
            victim.kill9()
            for l in late { #expect(try l.waitForExit() == 0) }
            shares += late.count
            for f in followers where f !== victim {
                kill(f.process.processIdentifier, SIGTERM)
                #expect(try f.waitForExit() == 0)
            }
        }
        try Self.settle([try a.mirror(), try b.mirror()])
        let (la, lb) = (try a.list(), try b.list())
        #expect(la.count == shares && la == lb)
        let titles = la.values.map { json($0)["title"] as? String ?? "" }
        #expect(Set(titles).count == shares, "an article is doubled")
    }
}
