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

    /// An article with a nested value, which has no column: its encoding fails after its title.
    struct Unstorable: Record {
        static let entityName = "Article"
        var id: ObjectID?
        var title: String
        var nested: Outside.Nested
    }

    /// An article that writes a note and a key of no attribute when `bad`.
    struct Partial: Record {
        static let entityName = "Article"
        var id: ObjectID?
        var title: String
        var bad: Bool
        enum CodingKeys: String, CodingKey { case id, title, url, createdAt, note, nonexistent }
        init(title: String, bad: Bool) {
            self.title = title
            self.bad = bad
        }
        init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            id = try c.decodeIfPresent(ObjectID.self, forKey: .id)
            title = try c.decode(String.self, forKey: .title)
            bad = false
        }
        func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(title, forKey: .title)
            try c.encode("https://partial.example/\(title)", forKey: .url)
            try c.encode(Date(timeIntervalSince1970: 1_700_000_000), forKey: .createdAt)
            guard bad else { return }
            try c.encode("leaked", forKey: .note)
            try c.encode(1, forKey: .nonexistent)
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

    /// The records of a streamed batch take turns in one encoder: nothing one of them set (a
    /// note, tags, a category) reaches the next, whatever order they come in, and a bad one
    /// leaves nothing behind for the batch after it.
    @Test func recordsOfOneBatchEncodeNothingOfEachOther() throws {
        let container = try TemporaryGroup().open()
        let context = container.newContext(author: "Typed")
        let at = Date(timeIntervalSince1970: 1_700_000_000)
        var ids: [ObjectID] = []
        try context.batch { b in
            let swift = try b.insert(Category(name: "Swift"))
            for i in 0..<12 {
                let full = i % 3 == 0
                ids.append(
                    try b.insert(
                        Article(
                            title: "T\(i)", url: "https://t.example/\(i)", createdAt: at, isRead: full,
                            note: full ? "n\(i)" : nil, tags: full ? ["t"] : nil, category: full ? swift : nil)))
            }
        }
        let records = try ids.map { try context.record(Article.self, with: $0) }
        for (i, r) in records.enumerated() {
            let full = i % 3 == 0
            #expect(r.isRead == full && (r.note != nil) == full && (r.tags != nil) == full, "T\(i)")
            #expect((r.category != nil) == full, "T\(i)")
        }
        // A bad record (an empty title) fails the batch, naming it; the next batch's records
        // carry nothing of it.
        #expect {
            try context.batch { b in
                _ = try b.insert(Article(title: "", url: "https://bad.example", note: "bad", tags: ["bad"]))
            }
        } throws: { error in
            (error as? StoreError)?.validation?.object == "Article (batch object 1)"
        }
        try context.batch { b in
            // A record refused by its encoding (a property of no column) in the middle of a batch
            // the caller goes on with: the records after it carry nothing of it.
            _ = try b.insert(Article(title: "Before", url: "https://before.example", note: "kept"))
            #expect(throws: StoreError.self) { try b.insert(Unstorable(title: "x", nested: .init(x: 1))) }
            _ = try b.insert(Article(title: "After", url: "https://after.example"))
            // One whose encoding wrote a note, then a key the entity does not have, is refused;
            // the next of its type carries neither.
            #expect(throws: StoreError.self) { try b.insert(Partial(title: "Bad", bad: true)) }
            _ = try b.insert(Partial(title: "Good", bad: false))
        }
        let good = try context.fetch(Article.self, where: \Article.title == "Good")
        #expect(good.count == 1 && good.first?.note == nil)
        #expect(try context.count(Article.self, where: \Article.title == "Bad") == 0)
        let after = try context.fetch(Article.self, where: \Article.title == "After")
        #expect(after.count == 1 && after.first?.note == nil && after.first?.tags == nil)
    }
}
