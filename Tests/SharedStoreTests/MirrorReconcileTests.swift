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
            relationships: ["category": extra])
        let saved = try context.save()
        let reader = container.newContext()
        let gid = { (id: ObjectID) throws -> UUID in try reader.globalID(of: saved.permanentID(for: id)) }
        let (gGo, gRust, gExtra, gArticle) = (try gid(go), try gid(rust), try gid(extra), try gid(article))
        var log = try container.mirrorExportEverything().objects
        // The log: the two names swapped, the article in Rust, Extra merged away into Rust.
        log[gGo]?.values[label] = .string("Rust")
        log[gRust]?.values[label] = .string("Go")
        log[gArticle]?.toOne["category"] = gRust
        log[gExtra] = nil
        let newest = try container.currentToken().value
        let result = try #require(
            try container.mirrorReconcile(
                to: log, known: [gGo, gRust, gExtra, gArticle], aliases: [gExtra: gRust], unpushedAfter: newest,
                author: Mirror.author, contextName: Mirror.contextName))
        #expect(result.left == 0)
        #expect(result.written == 4)
        let now = try container.mirrorExportEverything().objects
        #expect(now.mapValues(MirrorState.init) == log.mapValues(MirrorState.init))
        #expect(try container.mirrorAliases() == [gExtra: gRust])
        #expect(try container.mirrorValue(MirrorKeys.reconcile) == 0)
        // The history of it is the mirror's: nothing to push.
        #expect(try container.historyCount(after: newest, excludingAuthor: Mirror.author) == 0)
        let checks = StoreVerifier.verify(container: container, registry: try TokenRegistry(group: group.path))
        #expect(checks.filter { !$0.ok }.isEmpty, "\(checks.filter { !$0.ok }.map(\.name))")
    }

    /// A store with a change not pushed yet keeps it as it is (it goes up, and comes back as the
    /// log's); so does an object the log never named. Neither is deleted.
    @Test(arguments: ["unpushed", "never named"])
    func whatTheLogCannotSpeakForIsLeftAlone(_ kind: String) throws {
        let group = TemporaryGroup()
        let container = try group.open()
        try container.prepareMirroring()
        let label = ReadLater.categoryName(container.model)
        let context = container.newContext(author: "MainApp")
        let id = try context.insert("Category", [label: .string("Go")])
        let saved = try context.save()
        let gid = try container.newContext().globalID(of: saved.permanentID(for: id))
        let pushedThrough = kind == "unpushed" ? 0 : try container.currentToken().value
        let result = try #require(
            try container.mirrorReconcile(
                to: [:], known: kind == "unpushed" ? [gid] : [], aliases: [:], unpushedAfter: pushedThrough,
                author: Mirror.author, contextName: Mirror.contextName))
        #expect(result.written == 0 && result.left == 1)
        #expect(result.unpushed == (kind == "unpushed" ? 1 : 0))
        // Tried again once the change went up; an object nothing can speak for is not.
        #expect(try container.mirrorValue(MirrorKeys.reconcile) == (kind == "unpushed" ? 1 : 2))
        #expect(try container.mirrorExportEverything().objects.keys.sorted { $0.uuidString < $1.uuidString } == [gid])
    }

    /// History of changes not pushed was deleted (an eviction since the last push): nothing is
    /// written, since nothing could tell those changes apart.
    @Test func historyDeletedPastThePushedTokenLeavesTheStoreAlone() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        try container.prepareMirroring()
        let label = ReadLater.categoryName(container.model)
        let context = container.newContext(author: "MainApp")
        _ = try context.insert("Category", [label: .string("Go")])
        try context.save()
        _ = try container.deleteHistory(through: try container.currentToken())
        let before = try container.currentToken()
        #expect(
            try container.mirrorReconcile(
                to: [:], known: [], aliases: [:], unpushedAfter: 0, author: Mirror.author,
                contextName: Mirror.contextName) == nil)
        #expect(try container.currentToken() == before)
        #expect(try container.mirrorExportEverything().objects.count == 1)
    }

    /// An app may not save as the mirror, nor without history, on a mirrored store: such a save
    /// would never go up, and the mirror puts the log's state over it. Elsewhere both work.
    @Test func savesTheMirrorCouldNotSendAreRefusedOnAMirroredStore() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let label = ReadLater.categoryName(container.model)
        let before = container.newContext(author: Mirror.author)
        _ = try before.insert("Category", [label: .string("Before")])
        try before.save()
        // A process without history that saved before the store was mirrored: its connection
        // knows the schema from before, and its next save must still see the mirror's tables.
        var options = Container.Options()
        options.historyTracking = false
        let untracked = try group.open(options: options)
        let quiet = untracked.newContext(author: "MainApp")
        _ = try quiet.insert("Category", [label: .string("Early")])
        try quiet.save()
        try container.prepareMirroring()
        let context = container.newContext(author: Mirror.author)
        _ = try context.insert("Category", [label: .string("Go")])
        #expect {
            try context.save()
        } throws: { error in
            (error as? StoreError)?.code == .invalidArgument
                && "\(error)".contains("author 'Mirror' is the mirror's own")
        }
        _ = try quiet.insert("Category", [label: .string("Rust")])
        #expect {
            try quiet.save()
        } throws: { error in
            (error as? StoreError)?.code == .invalidArgument && "\(error)".contains("history tracking is off")
        }
        #expect(try container.mirrorExportEverything().objects.count == 2)
    }

    /// The connection that saved without history makes the store mirrored itself: what it
    /// remembered of the schema (no mirror) goes with the tables it made, and its next save
    /// without history is refused; one whose making was rolled back is not.
    @Test func aSaveWithoutHistoryIsRefusedOnceTheSameConnectionMirrored() throws {
        let group = TemporaryGroup()
        var options = Container.Options()
        options.historyTracking = false
        let untracked = try group.open(options: options)
        let label = ReadLater.categoryName(untracked.model)
        let quiet = untracked.newContext(author: "MainApp")
        _ = try quiet.insert("Category", [label: .string("Early")])
        try quiet.save()
        #expect(throws: StoreError.self) {
            try untracked.write { s in
                try SchemaSQL.createMirrorTables(s.c)
                _ = s.hasMirrorTablesInWrite()
                throw StoreError(.invalidArgument, "rolled back on purpose")
            }
        }
        _ = try quiet.insert("Category", [label: .string("Still")])
        try quiet.save()
        try untracked.prepareMirroring()
        _ = try quiet.insert("Category", [label: .string("Rust")])
        #expect {
            try quiet.save()
        } throws: { error in
            (error as? StoreError)?.code == .invalidArgument && "\(error)".contains("history tracking is off")
        }
    }

    /// A model whose to-many is `deny`: an owner the log merged away goes after its pets moved to
    /// the winner, so the rule finds nothing to refuse.
    @Test func anObjectTheLogDeletedGoesAfterWhatReferredToItMoved() throws {
        let model = try Model([
            Entity(
                "Owner", attributes: [Attribute("name", .string)],
                relationships: [.toMany("pets", "Pet", inverse: "owner", deleteRule: .deny)],
                uniquenessConstraints: [["name"]]),
            Entity(
                "Pet", attributes: [Attribute("name", .string)],
                relationships: [.toOne("owner", "Owner", inverse: "pets", deleteRule: .nullify)]),
        ])
        let group = TemporaryGroup()
        let container = try group.open(model)
        try container.prepareMirroring()
        let context = container.newContext(author: "MainApp")
        let (x, y) = (try context.insert("Owner", ["name": "X"]), try context.insert("Owner", ["name": "Y"]))
        let pet = try context.insert("Pet", ["name": "p"], relationships: ["owner": x])
        let saved = try context.save()
        let reader = container.newContext()
        let gid = { (id: ObjectID) throws -> UUID in try reader.globalID(of: saved.permanentID(for: id)) }
        let (gx, gy, gp) = (try gid(x), try gid(y), try gid(pet))
        var log = try container.mirrorExportEverything().objects
        log[gx] = nil
        log[gp]?.toOne["owner"] = gy
        let result = try #require(
            try container.mirrorReconcile(
                to: log, known: [gx, gy, gp], aliases: [gx: gy], unpushedAfter: try container.currentToken().value,
                author: Mirror.author, contextName: Mirror.contextName))
        #expect(result.left == 0)
        #expect(
            try container.mirrorExportEverything().objects.mapValues(MirrorState.init)
                == log.mapValues(MirrorState.init))
    }

    /// An article whose only unpushed change is its title keeps the category it was filed in
    /// when the log swaps two categories' names or merged its category away: a category an
    /// unpushed object refers to is changed in place, never deleted or made again (a `nullify`
    /// rule took the article's category, and its push carried that everywhere; found by review).
    @Test(arguments: ["swap", "merged away"])
    func aCategoryAnUnpushedObjectRefersToIsNeverDeleted(_ kind: String) throws {
        let group = TemporaryGroup()
        let container = try group.open()
        try container.prepareMirroring()
        let label = ReadLater.categoryName(container.model)
        let context = container.newContext(author: "MainApp")
        let (go, rust) = (
            try context.insert("Category", [label: .string("Go")]),
            try context.insert("Category", [label: .string("Rust")])
        )
        let article = try context.insert(
            "Article", ["title": "a", "url": "https://a.example", "createdAt": .date(Date())],
            relationships: ["category": go])
        let saved = try context.save()
        let reader = container.newContext()
        let gid = { (id: ObjectID) throws -> UUID in try reader.globalID(of: saved.permanentID(for: id)) }
        let (gGo, gRust, gArticle) = (try gid(go), try gid(rust), try gid(article))
        let pushedThrough = try container.currentToken().value
        var log = try container.mirrorExportEverything().objects
        if kind == "swap" {
            log[gGo]?.values[label] = .string("Rust")
            log[gRust]?.values[label] = .string("Go")
        } else {
            log[gGo] = nil
            log[gArticle]?.toOne["category"] = gRust
        }
        // Not pushed yet: a new title only.
        let app = container.newContext(author: "MainApp")
        try app.update(saved.permanentID(for: article), ["title": "a (edited)"])
        try app.save()
        let result = try #require(
            try container.mirrorReconcile(
                to: log, known: [gGo, gRust, gArticle], aliases: kind == "swap" ? [:] : [gGo: gRust],
                unpushedAfter: pushedThrough, author: Mirror.author, contextName: Mirror.contextName))
        let now = try container.mirrorExportEverything().objects
        #expect(now[gArticle]?.toOne["category"] == gGo, "the article keeps its category: \(result)")
        #expect(now[gArticle]?.values["title"] == "a (edited)")
        // What is left waits for the title to go up: tried again then.
        #expect(result.left > 0 && result.left == result.unpushed)
        #expect(try container.mirrorValue(MirrorKeys.reconcile) == 1)
    }
}
