import Foundation
import ReadLater
import SharedStore
import Testing

@testable import SharedStoreCore

/// Inserts by position (``InsertLayout``, a batch's records) store what inserts by name do: the
/// same rows, defaults, derived values, hooks' values, counts and history (issue 22's positional
/// rows).
@Suite struct InsertLayoutTests {
    /// Folders counting their links; links with a unique URL, a pattern, defaults, a derived
    /// canonical title, a copy of the folder's name, two to-ones, and a hook that fills a missing
    /// note.
    static func model() throws -> Model {
        try Model(
            [
                Entity(
                    "Folder",
                    attributes: [Attribute("name", .string), Attribute.derived("links", .integer, .count("items"))],
                    relationships: [
                        .toMany("items", "Link", inverse: "folder"), .toMany("others", "Link", inverse: "other"),
                    ]),
                Entity(
                    "Link",
                    attributes: [
                        Attribute("url", .string, pattern: #"https?://\S+"#),
                        Attribute("title", .string, maxLength: 40),
                        Attribute("note", .string, optional: true),
                        Attribute("score", .integer, default: 7),
                        Attribute("seen", .bool, default: false),
                        Attribute("at", .date, optional: true),
                        Attribute.derived("canonical", .string, .canonical("title")),
                        Attribute.derived("folderName", .string, .related("folder", "name")),
                    ],
                    relationships: [
                        .toOne("folder", "Folder", inverse: "items"), .toOne("other", "Folder", inverse: "others"),
                    ],
                    uniquenessConstraints: [["url"]], keptCounts: [KeptCount("all")]),
            ],
            hooks: [
                "Link": EntityHooks(awakeFromInsert: { draft in
                    if draft["note"].isNull && draft["score"] == .integer(7) { try draft.set("note", .string("awake")) }
                })
            ])
    }

    /// A random row: some attributes given (in a random order), some left to their defaults.
    struct Row {
        var values: [(String, Value)]
        var folder: Int?
        var other: Int?
    }

    static func randomRow(_ random: inout TestRandom, _ n: Int) -> Row {
        var values: [(String, Value)] = [
            ("url", .string("https://x.example/\(n)")), ("title", .string(random.word(maxLength: 6) + " T\(n)")),
        ]
        if random.chance(50) { values.append(("note", random.chance(30) ? .null : .string(random.word()))) }
        if random.chance(50) { values.append(("score", .integer(Int64(random.next(10))))) }
        if random.chance(50) { values.append(("seen", .bool(random.chance(50)))) }
        if random.chance(50) { values.append(("at", .date(Date(timeIntervalSince1970: Double(random.next(1000)))))) }
        // A random order: a layout's order is its own.
        for i in values.indices.reversed() { values.swapAt(i, random.next(i + 1)) }
        return Row(
            values: values, folder: random.chance(80) ? random.next(3) : nil,
            other: random.chance(30) ? random.next(3) : nil)
    }

    /// What a store holds, as text: every object's values and relationships, by key.
    static func contents(_ container: Container, _ entities: [String] = ["Folder", "Link"]) throws -> [String] {
        let context = container.newContext(name: "check", author: "Check")
        var lines: [String] = []
        for entity in entities {
            for s in try context.fetch(FetchRequest(entity)) {
                let values = s.attributeNames.sorted().map { "\($0)=\(s[$0])" }
                let rels = s.relationships.keys.sorted().map { "\($0)->\(s.relationships[$0]?.primaryKey ?? -1)" }
                lines.append("\(s.id.entity)/\(s.id.primaryKey) v\(s.version) \(values) \(rels)")
            }
        }
        return lines
    }

    /// What history recorded, without times and global ids.
    static func history(_ container: Container) throws -> [String] {
        var out: [String] = []
        try container.history(HistoryRequest()) { transactions in
            for t in transactions {
                out.append(
                    "\(t.author ?? "-"): "
                        + t.changes.map {
                            "\($0.kind) \($0.objectID.entity)/\($0.objectID.primaryKey) \($0.updatedProperties)"
                        }
                        .joined(separator: ", "))
            }
        }
        return out
    }

    @Test func rowsByPositionStoreWhatRowsByNameDo() throws {
        let seed = UInt64.random(in: 1...UInt64(UInt32.max))
        var random = TestRandom(state: seed)
        let model = try Self.model()
        let (byName, byPosition) = (TemporaryGroup(), TemporaryGroup())
        let stores = [try byName.open(model), try byPosition.open(model)]
        var folders: [[ObjectID]] = []
        for container in stores {
            let context = container.newContext(name: "setup", author: "Setup")
            let temps = try (0..<3).map { try context.insert("Folder", ["name": .string("folder \($0)")]) }
            let saved = try context.save()
            folders.append(temps.map { saved.permanentID(for: $0) })
        }
        for batch in 0..<6 {
            let rows = (0..<random.next(40)).map { Self.randomRow(&random, batch * 100 + $0) }
            try stores[0].newContext(name: "w", author: "Writer").batch { b in
                for row in rows {
                    var relationships: [String: ObjectID?] = ["folder": row.folder.map { folders[0][$0] }]
                    if let other = row.other { relationships["other"] = folders[0][other] }
                    _ = try b.insert("Link", Dictionary(uniqueKeysWithValues: row.values), relationships: relationships)
                }
            }
            try stores[1].newContext(name: "w", author: "Writer").batch { b in
                for row in rows {
                    // One layout per row's shape: the names in the row's own order.
                    let names = row.values.map(\.0)
                    let layout = try b.layout(
                        "Link", attributes: names, relationships: row.other == nil ? ["folder"] : ["other", "folder"])
                    let targets =
                        (row.other == nil ? [] : [folders[1][row.other!]]) + [row.folder.map { folders[1][$0] }]
                    _ = try b.insert(layout, values: row.values.map(\.1), relationships: targets)
                }
            }
        }
        let (a, b) = (try Self.contents(stores[0]), try Self.contents(stores[1]))
        #expect(a.count == b.count, "seed \(seed)")
        for (x, y) in zip(a, b) { #expect(x == y, "seed \(seed)") }
        let (h0, h1) = (try Self.history(stores[0]), try Self.history(stores[1]))
        #expect(h0.count == h1.count, "seed \(seed)")
        for (x, y) in zip(h0, h1) { #expect(x == y, "seed \(seed)") }
        #expect(try stores[1].newContext(name: "c", author: nil).count(FetchRequest("Link")) == a.count - 3)
    }

    @Test func recordsInsertedByPositionStoreWhatRowsByNameDo() throws {
        let seed = UInt64.random(in: 1...UInt64(UInt32.max))
        var random = TestRandom(state: seed)
        let (byName, byRecord) = (TemporaryGroup(), TemporaryGroup())
        let stores = [try byName.open(), try byRecord.open()]
        var categories: [[ObjectID]] = []
        for container in stores {
            let context = container.newContext(name: "setup", author: "Setup")
            let name = ReadLater.categoryName(container.model)
            let temps = try (0..<3).map { try context.insert("Category", [name: .string("c\($0)")]) }
            let saved = try context.save()
            categories.append(temps.map { saved.permanentID(for: $0) })
        }
        // A small batch (by the writer) and a large one (encoded on a second thread).
        for count in [random.next(50) + 1, 600 + random.next(100)] {
            let rows = (0..<count).map { n in
                (
                    title: random.word(maxLength: 5) + " \(n)", url: "https://r.example/\(count)/\(n)",
                    at: Date(timeIntervalSince1970: Double(random.next(100_000))), read: random.chance(50),
                    category: random.chance(70) ? random.next(3) : nil
                )
            }
            try stores[0].newContext(name: "w", author: "Writer").batch { b in
                for r in rows {
                    _ = try b.insert(
                        "Article",
                        [
                            "title": .string(r.title), "url": .string(r.url), "createdAt": .date(r.at),
                            "isRead": .bool(r.read),
                        ], relationships: ["category": r.category.map { categories[0][$0] }])
                }
            }
            let records = rows.map { r in
                ReadLater.Article(
                    title: r.title, url: r.url, createdAt: r.at, isRead: r.read,
                    category: r.category.map { categories[1][$0] })
            }
            try stores[1].newContext(name: "w", author: "Writer").batchInsert(records)
        }
        let entities = ["Category", "Article"]
        #expect(try Self.contents(stores[0], entities) == Self.contents(stores[1], entities), "seed \(seed)")
        #expect(try Self.history(stores[0]) == Self.history(stores[1]), "seed \(seed)")
    }

    @Test func aTypedLayoutSortsItsKeysIntoValuesAndRelationships() throws {
        typealias Article = ReadLater.Article
        let dir = TemporaryGroup()
        let container = try dir.open()
        let context = container.newContext(name: "w", author: "Writer")
        let category = try context.insert("Category", [ReadLater.categoryName(container.model): .string("c")])
        let categoryID = try context.save().permanentID(for: category)
        var id: ObjectID?
        try context.batch { b in
            let layout = try b.layout(
                Article.self, [Key(\Article.category), Key(\Article.url), Key(\Article.title), Key(\Article.isRead)])
            #expect(layout.entityName == "Article")
            #expect(layout.attributeNames == ["url", "title", "isRead"])
            #expect(layout.relationshipNames == ["category"])
            id = try b.insert(
                layout, values: [.string("https://t.example"), .string("Typed"), .bool(true)],
                relationships: [categoryID])
        }
        let article = try context.fetch(FetchRequest("Article")).first
        #expect(article?.id == id)
        #expect(article?["title"] == .string("Typed"))
        #expect(article?["isRead"] == .bool(true))
        #expect(article?.relationships["category"] == categoryID)
        // A hook of the model set what the layout left out.
        #expect(article?["createdAt"].dateValue != nil)
        expectStoreError(.validation, containing: "derived") {
            try context.batch { b in
                _ = try b.layout(ReadLater.Records.Article.self, [Key(\ReadLater.Records.Article.searchTitle)])
            }
        }
    }

    @Test func aLayoutRefusesWhatItCannotPlace() throws {
        let dir = TemporaryGroup()
        let container = try dir.open(try Self.model())
        let context = container.newContext(name: "w", author: "Writer")
        let folder = try context.insert("Folder", ["name": .string("f")])
        let folderID = try context.save().permanentID(for: folder)
        func refuses(_ code: StoreError.Code, _ text: String, _ body: (inout BatchWriter) throws -> Void) {
            expectStoreError(code, containing: text) { try context.batch { b in try body(&b) } }
        }
        refuses(.unknownProperty, "no attribute 'nope'") { b in _ = try b.layout("Link", attributes: ["nope"]) }
        refuses(.validation, "derived") { b in _ = try b.layout("Link", attributes: ["canonical"]) }
        refuses(.unknownProperty, "no to-one relationship 'items'") { b in
            _ = try b.layout("Folder", attributes: [], relationships: ["items"])
        }
        refuses(.invalidArgument, "names 'url' twice") { b in _ = try b.layout("Link", attributes: ["url", "url"]) }
        refuses(.unknownEntity, "Nope") { b in _ = try b.layout("Nope", attributes: []) }
        refuses(.invalidArgument, "takes 2 value(s) and 1 relationship(s), given 1 and 1") { b in
            let layout = try b.layout("Link", attributes: ["url", "title"], relationships: ["folder"])
            _ = try b.insert(layout, values: [.string("https://a.example")], relationships: [folderID])
        }
        // A row that breaks a rule is named by its place, and nothing of its batch is kept.
        refuses(.validation, "Link (batch object 2).url") { b in
            let layout = try b.layout("Link", attributes: ["url", "title"])
            _ = try b.insert(layout, values: [.string("https://a.example"), .string("fine")])
            _ = try b.insert(layout, values: [.string("not a url"), .string("bad")])
        }
        refuses(.objectNotFound, "refers to") { b in
            let layout = try b.layout("Link", attributes: ["url", "title"], relationships: ["folder"])
            let wrong = ObjectID(storeID: folderID.storeID, entity: "Link", primaryKey: folderID.primaryKey)
            _ = try b.insert(layout, values: [.string("https://b.example"), .string("t")], relationships: [wrong])
        }
        refuses(.uniqueness, "url") { b in
            let layout = try b.layout("Link", attributes: ["url", "title"])
            _ = try b.insert(layout, values: [.string("https://c.example"), .string("one")])
            _ = try b.insert(layout, values: [.string("https://c.example"), .string("two")])
        }
        #expect(try context.count(FetchRequest("Link")) == 0)
    }

    @Test func aLayoutOfAnotherModelIsRefusedUnlessItIsTheSame() throws {
        let (one, two, three) = (TemporaryGroup(), TemporaryGroup(), TemporaryGroup())
        let a = try one.open(try Self.model())
        // The same schema, made again: its layouts fit.
        let same = try two.open(try Self.model())
        // Another schema with an entity of the same name, its attributes in another order.
        let other = try three.open(
            try Model([Entity("Link", attributes: [Attribute("title", .string), Attribute("url", .string)])]))
        var sameLayout: InsertLayout?
        var otherLayout: InsertLayout?
        try same.newContext(name: "w", author: "W").batch { b in
            sameLayout = try b.layout("Link", attributes: ["url", "title"])
        }
        try other.newContext(name: "w", author: "W").batch { b in
            otherLayout = try b.layout("Link", attributes: ["url", "title"])
        }
        let context = a.newContext(name: "w", author: "W")
        try context.batch { b in
            _ = try b.insert(try #require(sameLayout), values: [.string("https://s.example"), .string("same")])
        }
        expectStoreError(.invalidArgument, containing: "another model") {
            try context.batch { b in
                _ = try b.insert(try #require(otherLayout), values: [.string("https://o.example"), .string("other")])
            }
        }
        let links = try context.fetch(FetchRequest("Link"))
        #expect(links.map { $0["title"] } == [.string("same")])
        #expect(links.first?["url"] == .string("https://s.example"))
    }
}
