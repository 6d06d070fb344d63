import Foundation
import ReadLater
import SharedStore
import Testing

/// Issue 23, point 2: keys the compiler checks (key paths of records), typed batches.
@Suite struct TypedKeyTests {
    typealias Article = ReadLater.Records.Article
    typealias Category = ReadLater.Records.Category

    /// A record type defined outside the record's file: its synthesized CodingKeys are private,
    /// a key path is not.
    struct Outside: Record {
        static let entityName = "Outside"
        var id: ObjectID?
        var flag: Bool
        var other: Bool
        var computed: Int { 1 }
        var nested: Nested
        struct Nested: Codable, Sendable { var x: Int }
        enum CodingKeys: String, CodingKey {
            case id
            case flag = "stored_flag"
            case other = "stored_other"
            case nested
        }
    }

    /// Five booleans, each coded under another name.
    struct Flags: Record {
        static let entityName = "Flags"
        var id: ObjectID?
        var a: Bool, b: Bool, c: Bool, d: Bool, e: Bool
        enum CodingKeys: String, CodingKey { case id, a = "fa", b = "fb", c = "fc", d = "fd", e = "fe" }
    }

    @Test func aHookSetsOnlyItsOwnEntitysValuesThroughKeyPaths() throws {
        let container = try TemporaryGroup().open()
        try container.register("Category", EntityHooks(willSave: { draft in try draft.set(\Article.title, "x") }))
        let context = container.newContext(author: "T")
        _ = try context.insert(Category(name: "Swift"))
        #expect {
            try context.save()
        } throws: { error in
            "\(error)".contains("a hook sets its own entity's values")
        }
    }

    @Test func manyRenamedBooleansAreToldApart() {
        #expect(
            [Key(\Flags.a), Key(\Flags.b), Key(\Flags.c), Key(\Flags.d), Key(\Flags.e)].map(\.path)
                == ["fa", "fb", "fc", "fd", "fe"])
    }

    @Test func aKeyPathNamesTheStoredPropertyItsCodingKeySays() {
        #expect(Key(\Article.title).path == "title")
        #expect(Key(\Article.createdAt).path == "createdAt")
        #expect(Key(\Category.name).path == "label")
        #expect(Key(\Article.category, \Category.name).path == "category.label")
        #expect(SortKey.descending(\Article.createdAt) == Key("createdAt").descending)
        // Two Bools renamed by their coding keys: each probe gives them another pattern of values.
        #expect(Key(\Outside.flag).path == "stored_flag" && Key(\Outside.other).path == "stored_other")
        #expect(Key(\Outside.computed).path.contains("not one stored, coded property"))
        #expect(Key(\Outside.nested.x).path.contains("not one stored, coded property"))
        #expect(Key(\Outside.nested).path == "nested")
    }

    @Test func typedConditionsFetchWhatStringKeysFetch() throws {
        let container = try TemporaryGroup().open()
        let context = container.newContext(author: "Typed")
        let swift = try context.insert(Category(name: "Swift"))
        let saved = try context.save()
        let category = saved.permanentID(for: swift)
        let day: TimeInterval = 86_400
        let base = Date(timeIntervalSince1970: 1_700_000_000)
        var articles: [Article] = []
        for n in 0..<20 {
            var a = Article(
                title: "Título \(n)", url: "https://t.example/\(n)", createdAt: base + Double(n) * day,
                isRead: n % 3 == 0, note: n % 2 == 0 ? nil : "note \(n)", category: n < 5 ? category : nil)
            a.tags = ["t\(n % 4)"]
            articles.append(a)
        }
        let result = try context.batchInsert(articles)
        #expect(result.count == 20 && result.objectIDs.count == 20)
        let pairs: [(Condition, Condition)] = [
            (\Article.isRead == false, Key("isRead") == false),
            (\Article.note == nil, Key("note") == Value.null),
            (\Article.note != nil, Key("note") != Value.null),
            (\Article.createdAt >= base + 10 * day, Key("createdAt") >= base + 10 * day),
            (\Article.createdAt < base + 3 * day, Key("createdAt") < base + 3 * day),
            (\Article.category == category, Key("category") == category),
            (\Article.category != category, !(Key("category") == category)),
            (\Article.category == nil, Key("category") == Value.null),
            (\Article.title == "Título 3", Key("title") == "Título 3"),
            (
                Key(\Article.createdAt).between(base + day, base + 4 * day),
                Key("createdAt").between(.date(base + day), .date(base + 4 * day))
            ),
            (Key(\Article.title).among(["Título 1", "Título 2"]), Key("title").among(["Título 1", "Título 2"])),
            (Key(\Article.searchTitle).beginsWith("titulo 1"), Key("searchTitle").beginsWith("titulo 1")),
            (Key(\Article.category, \Category.name) == "Swift", Key("category.label") == "Swift"),
        ]
        for (typed, untyped) in pairs {
            let a = try context.fetch(Article.self, where: typed, sortedBy: [.ascending(\Article.createdAt)])
            let b = try context.fetch(Article.self, where: untyped, sortedBy: [Key("createdAt").ascending])
            #expect(a.map(\.id) == b.map(\.id), "\(typed)")
        }
        #expect(try context.count(Article.self, where: \Article.category != category) == 15)
        #expect(try context.count(Article.self, where: \Article.category == nil) == 15)
        let newest = try context.fetch(Article.self, sortedBy: [.descending(\Article.createdAt)], limit: 1)
        #expect(newest.first?.title == "Título 19" && newest.first?.searchTitle == "titulo 19")
        #expect(newest.first?.tags == ["t3"])
        // A key path that names no stored property fails the fetch, naming it.
        #expect {
            try context.fetch(Article.self, where: Key(\Outside.computed) == 1)
        } throws: { error in
            (error as? StoreError)?.code == .unknownProperty && "\(error)".contains("Outside")
        }
    }

    @Test func aTypedBatchWritesWhatAnUntypedOneWritesAndNamesTheBadRecord() throws {
        let container = try TemporaryGroup().open()
        let context = container.newContext(author: "Typed")
        let at = Date(timeIntervalSince1970: 1_700_000_000)
        try context.batchInsert([Article(title: "A", url: "https://a.example", createdAt: at)])
        try context.batchInsert("Article", [["title": "B", "url": "https://b.example", "createdAt": .date(at)]])
        let rows = try context.fetch(FetchRequest("Article", sortedBy: [Key(\Article.title).ascending]))
        #expect(rows.count == 2)
        let names = rows[0].attributeNames.filter { $0 != "title" && $0 != "url" && $0 != "searchTitle" }
        for name in names { #expect(rows[0][name] == rows[1][name], "\(name)") }
        #expect {
            try context.batchInsert([
                Article(title: "C", url: "https://c.example"), Article(title: "", url: "https://d.example"),
            ])
        } throws: { error in
            (error as? StoreError)?.validation?.object == "Article (batch row 2)"
        }
        #expect(try context.count(Article.self) == 2)
        // Inside a streamed batch, with a relationship to an object the batch made.
        try context.batch { b in
            let swift = try b.insert(Category(name: "Swift"))
            _ = try b.insert(Article(title: "E", url: "https://e.example", category: swift))
        }
        #expect(try context.count(Article.self, where: Key(\Article.category, \Category.name) == "Swift") == 1)
    }
}
