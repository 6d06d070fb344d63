import Foundation
import ReadLater
import SharedStore
import SharedStoreMirror
import SharedStorePostgres
import Testing

@testable import SharedStoreCore

/// A store that met a collision in another order than the server's (its own unpushed rename
/// around remote changes) takes the state the server's log gives it once it settles (issue 19:
/// renames onto colliding names).
struct MirrorReconcileTests {
    typealias Machine = MirrorTests.Machine
    typealias Database = MirrorTests.Database

    /// Renames the category named `from` on `m` to `to`, in the app (not pushed).
    static func rename(_ m: Machine, _ from: String, to: String) throws {
        let container = try #require(m.container)
        let label = ReadLater.categoryName(container.model)
        let context = container.newContext(author: "MainApp")
        let found = try #require(try context.fetch(FetchRequest("Category", where: Key(label) == .string(from))).first)
        try context.update(found.id, [label: .string(to)])
        try context.save()
    }

    /// Every category of `m`: name → the titles of its articles.
    static func categories(_ m: Machine) throws -> [String: [String]] {
        let context = try #require(m.container).newContext()
        let label = ReadLater.categoryName(context.container.model)
        var out: [String: [String]] = [:]
        let names = Dictionary(
            uniqueKeysWithValues: try context.fetch(FetchRequest("Category")).map {
                ($0.id, $0[label].stringValue ?? "")
            })
        for name in names.values { out[name] = [] }
        for a in try context.fetch(FetchRequest("Article")) {
            if let c = a.relationships["category"], let name = names[c] {
                out[name, default: []].append(a["title"].stringValue ?? "")
            }
        }
        return out.mapValues { $0.sorted() }
    }

    /// A renames X to "Rust" and has not pushed; meanwhile B renames X to "Swift" and C, which
    /// had not seen that, makes a new category "Swift". In the server's order C's category
    /// collides with X and the two become one; on A, where X is "Rust", nothing collides (C's
    /// merge, pushed when C meets the collision, makes them one on A too). A met those changes
    /// around its own: once settled it replays the log and takes its state (`reconciled`), and
    /// every store ends with one category "Rust" holding both articles.
    @Test(
        .enabled(if: ProcessInfo.processInfo.environment["PGHOST"] != nil, "no PostgreSQL server (PGHOST)"),
        .tags(.postgres, .multiProcess))
    func aRenameHereAroundAnotherMachinesCollisionEndsAsTheLogSays() throws {
        let db = try Database()
        let (a, b, c) = (Machine(db), Machine(db), Machine(db))
        _ = try MirrorDivergenceTests.share(a, "first", category: "Go")
        let (ma, mb, mc) = (try a.mirror(), try b.mirror(), try c.mirror())
        try MirrorTests.settle([ma, mb, mc])
        try Self.rename(a, "Go", to: "Rust")
        try Self.rename(b, "Go", to: "Swift")
        _ = try mb.push()
        _ = try MirrorDivergenceTests.share(c, "second", category: "Swift")
        _ = try mc.push()
        _ = try ma.pull()
        var reconciled = 0
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            var quiet = true
            for m in [ma, mb, mc] {
                let r = try m.round()
                reconciled += r.reconciled
                if r.pushed + r.pulled > 0 || r.lag != 0 || r.reconciled > 0 { quiet = false }
            }
            if quiet { break }
        }
        #expect(reconciled > 0, "A met the collision in another order and took the log's state")
        let states = try [a, b, c].map(Self.categories)
        #expect(states[0] == ["Rust": ["first", "second"]], "\(states)")
        for s in states.dropFirst() { #expect(s == states[0]) }
        for m in [ma, mb, mc] {
            let differences = try m.verify()
            #expect(differences.isEmpty, "mirror --verify: \(differences.map(\.json.serialized))")
        }
        #expect(try a.list() == b.list() && b.list() == c.list())
    }

    /// The reconciliation itself, on one store: objects the log does not have go, two that swap
    /// names take them in place (the one that waits for the other is made again under its global
    /// id), articles follow, and aliases become the log's.
    @Test func aStoreTakesTheLogsStateSwapsIncluded() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        try container.prepareMirroring()
        let label = ReadLater.categoryName(container.model)
        let context = container.newContext(author: "MainApp")
        let go = try context.insert("Category", [label: .string("Go")])
        let rust = try context.insert("Category", [label: .string("Rust")])
        let extra = try context.insert("Category", [label: .string("Extra")])
        let article = try context.insert(
            "Article", ["title": "t", "url": "https://t.example", "createdAt": .date(Date())],
            relationships: ["category": go])
        let saved = try context.save()
        let reader = container.newContext()
        let gid = { (id: ObjectID) throws -> UUID in try reader.globalID(of: saved.permanentID(for: id)) }
        let (gGo, gRust, gExtra, gArticle) = (try gid(go), try gid(rust), try gid(extra), try gid(article))
        var log = try container.mirrorExportEverything().objects
        // The log: the two names swapped, the article in the other category, Extra merged away.
        log[gGo]?.values[label] = .string("Rust")
        log[gRust]?.values[label] = .string("Go")
        log[gArticle]?.toOne["category"] = gRust
        log[gExtra] = nil
        let newest = try container.currentToken().value
        let result = try #require(
            try container.mirrorReconcile(
                to: log, aliases: [gExtra: gRust], unpushedAfter: newest, author: Mirror.author,
                contextName: Mirror.contextName))
        #expect(result.left == 0)
        #expect(result.written == 4)
        let now = try container.mirrorExportEverything().objects
        #expect(now.mapValues(MirrorState.init) == log.mapValues(MirrorState.init))
        #expect(try container.mirrorAliases() == [gExtra: gRust])
        // The history of it is the mirror's: nothing to push.
        #expect(try container.historyCount(after: newest, excludingAuthor: Mirror.author) == 0)
        let checks = StoreVerifier.verify(container: container, registry: try TokenRegistry(group: group.path))
        #expect(checks.filter { !$0.ok }.isEmpty, "\(checks.filter { !$0.ok }.map(\.name))")
    }

    /// A store with a change not pushed yet is not settled: nothing is written.
    @Test func aStoreWithAnUnpushedChangeIsLeftAlone() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        try container.prepareMirroring()
        let label = ReadLater.categoryName(container.model)
        let context = container.newContext(author: "MainApp")
        _ = try context.insert("Category", [label: .string("Go")])
        try context.save()
        let before = try container.currentToken()
        #expect(
            try container.mirrorReconcile(
                to: [:], aliases: [:], unpushedAfter: 0, author: Mirror.author, contextName: Mirror.contextName) == nil)
        #expect(try container.currentToken() == before)
        #expect(try container.mirrorExportEverything().objects.count == 1)
    }
}
