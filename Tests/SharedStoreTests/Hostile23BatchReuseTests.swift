import Foundation
import ReadLater
import SharedStore
import Testing

/// A hostile review of issue 23's typed batches after two changes: a batch's records encode into
/// the writer's kept row storage, and an update whose context read the whole row checks its
/// version, not the row. Typed records against untyped rows, kept containers, records that throw
/// midway, caught failures, and updates on reads that other writers moved.
@Suite(.timeLimit(.minutes(5))) struct Hostile23BatchReuseTests {
    typealias Article = ReadLater.Records.Article
    typealias Category = ReadLater.Records.Category
    typealias Highlight = ReadLater.Records.Highlight

    static func article(_ k: Int, prefix: String, category: ObjectID?) -> Article {
        var title = "Título \(k)"
        var url = "https://\(prefix).example/\(k)"
        if k == 5 { title = "" }  // minLength 1: caught, the batch goes on
        if k == 7 { url = "not a url" }  // pattern: caught
        return Article(
            title: title, url: url, createdAt: Date(timeIntervalSince1970: Double(k)), isRead: k % 2 == 0,
            note: k % 3 == 0 ? nil : "n\(k)", category: k % 2 == 0 ? category : nil)
    }

    static func untyped(_ a: Article) -> ([String: Value], [String: ObjectID?]) {
        var v: [String: Value] = [
            "title": .string(a.title), "url": .string(a.url), "createdAt": .date(a.createdAt),
            "isRead": .bool(a.isRead),
        ]
        if let note = a.note { v["note"] = .string(note) }
        return (v, a.category.map { ["category": $0] } ?? [:])
    }

    /// Typed records interleaved with untyped and InsertLayout inserts, other record types, and
    /// caught failures, against the same articles inserted untyped: row for row equal.
    @Test func mixedBatchMatchesUntyped() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let context = container.newContext(author: "H")
        try context.insert(Category(name: "c"))
        try context.save()
        let cat = try context.fetchOne(Category.self)!.id!
        var typedErrors: [String] = []
        var untypedErrors: [String] = []
        try context.batch { b in
            let layout = try b.layout(Article.self, [Key(\Article.title), Key(\Article.url), Key(\Article.category)])
            for k in 0..<40 {
                do {
                    let id = try b.insert(Self.article(k, prefix: "t", category: cat))
                    _ = try b.insert(Highlight(text: "h\(k)", article: id))
                } catch let e as StoreError { typedErrors.append(e.message) }
                if k % 4 == 0 { _ = try b.insert("Category", ["label": .string("x\(k)")]) }
                if k % 5 == 0 {
                    _ = try b.insert(
                        layout, values: [.string("L\(k)"), .string("https://l.example/\(k)")], relationships: [cat])
                }
            }
        }
        try context.batch { b in
            for k in 0..<40 {
                let (v, r) = Self.untyped(Self.article(k, prefix: "u", category: cat))
                do { _ = try b.insert("Article", v, relationships: r) } catch let e as StoreError {
                    untypedErrors.append(e.message)
                }
            }
        }
        #expect(typedErrors.count == 2 && untypedErrors.count == 2, "\(typedErrors) \(untypedErrors)")
        #expect(typedErrors.first?.contains("batch object") == true, "\(typedErrors)")
        let fresh = container.newContext()
        let all = try fresh.fetch(Article.self)
        func byK(_ prefix: String) -> [Int: Article] {
            var d: [Int: Article] = [:]
            for a in all where a.url.hasPrefix("https://\(prefix).example/") {
                d[Int(a.url.split(separator: "/").last!)!] = a
            }
            return d
        }
        let t = byK("t")
        let u = byK("u")
        #expect(t.count == 38 && u.count == 38)
        for k in 0..<40 where k != 5 && k != 7 {
            guard var a = t[k], let b = u[k] else {
                Issue.record("missing \(k)")
                continue
            }
            a.id = b.id
            a.url = b.url
            #expect(a == b, "row \(k): typed \(a) untyped \(b)")
        }
        #expect(try fresh.count(Highlight.self) == 38)
        let c = try fresh.record(Category.self, with: cat)
        #expect(c.articleCount == 20 + 8 + 20, "\(String(describing: c.articleCount))")
        let highlights = try fresh.fetch(Highlight.self)
        for h in highlights {
            let a = try fresh.record(Article.self, with: h.article!)
            #expect(a.title == "Título \(h.text.dropFirst())", "\(h.text) -> \(a.title)")
        }
    }

    nonisolated(unsafe) static var stash: KeyedEncodingContainer<Stasher.CodingKeys>?

    struct Stasher: Record {
        static let entityName = "Article"
        var id: ObjectID?
        var title: String
        var url: String
        var createdAt: Date
        var note: String?
        var keep = false
        enum CodingKeys: String, CodingKey { case id, title, url, createdAt, note }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(title, forKey: .title)
            try c.encode(url, forKey: .url)
            try c.encode(createdAt, forKey: .createdAt)
            try c.encodeIfPresent(note, forKey: .note)
            if keep { Hostile23BatchReuseTests.stash = c }
        }
    }

    /// A record keeps its container and writes into it between records, in a hook and after the
    /// batch: no other record gets what it writes.
    @Test func keptContainerWritesNowhere() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        try container.register(
            "Article",
            EntityHooks(willSave: { draft in
                if var s = Hostile23BatchReuseTests.stash { try? s.encode("HOOK", forKey: .note) }
                if draft["title"] == .string("hookfail") { throw StoreError(.validation, "no") }
            }))
        let context = container.newContext(author: "H")
        var failures = 0
        try context.batch { b in
            for k in 0..<12 {
                var r = Stasher(
                    title: k == 6 ? "hookfail" : "t\(k)", url: "https://s.example/\(k)",
                    createdAt: Date(timeIntervalSince1970: 1), note: k % 2 == 0 ? "n\(k)" : nil)
                r.keep = k == 2
                do { _ = try b.insert(r) } catch { failures += 1 }
                if var s = Self.stash { try? s.encode("BETWEEN", forKey: .note) }
                if k == 8 {
                    _ = try b.insert(
                        "Article",
                        ["title": .string("u"), "url": .string("https://s.example/u"), "createdAt": .date(Date())])
                }
            }
        }
        if var s = Self.stash { try? s.encode("AFTER", forKey: .note) }
        Self.stash = nil
        #expect(failures == 1)
        let all = try container.newContext().fetch(Article.self)
        #expect(all.count == 12)
        for a in all where a.title != "u" {
            let k = Int(a.url.split(separator: "/").last!)!
            #expect(a.note == (k % 2 == 0 ? "n\(k)" : nil), "row \(k): note \(String(describing: a.note))")
        }
    }

    /// encode(to:) that throws midway, after writing some values, followed by a record that
    /// leaves those values out: nothing of the failed record stays.
    struct Midway: Record {
        static let entityName = "Article"
        var id: ObjectID?
        var title: String
        var url: String
        var note: String?
        var category: ObjectID?
        var fail = false
        enum CodingKeys: String, CodingKey { case id, title, url, note, category }
        struct Boom: Error {}
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(title, forKey: .title)
            try c.encode(url, forKey: .url)
            try c.encodeIfPresent(note, forKey: .note)
            try c.encodeIfPresent(category, forKey: .category)
            if fail { throw Boom() }
        }
    }

    @Test(arguments: [10, 600]) func midwayThrowLeavesNothing(n: Int) throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let context = container.newContext(author: "H")
        try context.insert(Category(name: "c"))
        try context.save()
        let cat = try context.fetchOne(Category.self)!.id!
        var caught: [String] = []
        try context.batch { b in
            for k in 0..<n {
                let odd = k % 2 == 1
                let r = Midway(
                    title: "t\(k)", url: "https://m.example/\(k)", note: odd ? nil : "leak\(k)",
                    category: odd ? nil : cat, fail: !odd)
                do { _ = try b.insert(r) } catch let e as StoreError { caught.append(e.message) }
            }
        }
        #expect(caught.count == n / 2)
        #expect(caught.first?.contains("Article (batch object 1)") == true, "\(caught.first ?? "")")
        let all = try container.newContext().fetch(Article.self)
        #expect(all.count == n / 2)
        #expect(all.allSatisfy { $0.note == nil && $0.category == nil }, "\(all.prefix(3))")
        #expect(try container.newContext().record(Category.self, with: cat).articleCount == 0)
    }

    /// A unique violation caught in a batch, then the batch goes on; the kept counts and the
    /// derived count agree with the rows.
    @Test func uniqueViolationCaughtThenKeptCounts() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let context = container.newContext(author: "H")
        var caught: [String] = []
        try context.batch { b in
            let c = try b.insert(Category(name: "a"))
            do { _ = try b.insert(Category(name: "a")) } catch let e as StoreError { caught.append(e.message) }
            for k in 0..<6 {
                let a = Article(
                    title: k == 3 ? "" : "t\(k)", url: "https://k.example/\(k)", isRead: k == 1, category: c)
                do { _ = try b.insert(a) } catch let e as StoreError { caught.append(e.message) }
            }
            _ = try b.insert(Category(name: "b"))
        }
        #expect(caught.count == 2, "\(caught)")
        #expect(caught.first?.contains("Category (batch object 2)") == true, "\(caught)")
        let fresh = container.newContext()
        #expect(try fresh.count(Category.self) == 2)
        #expect(try fresh.count(Article.self) == 5)
        #expect(try fresh.count(Article.self, where: \Article.isRead == false) == 4)
        let a = try fresh.fetchOne(Category.self, where: \Category.name == "a")!
        #expect(a.articleCount == 5)
        var txs: [HistoryTransaction] = []
        try container.history(HistoryRequest()) { txs += $0 }
        #expect(txs.last.map { $0.changes.filter { $0.kind == .insert }.count } == 7)
    }

    // MARK: updates after the read-skipping change

    /// A context inserts an article pointing at a category it inserts after it (a reference the
    /// save fixes up without a version bump), then clears the category: the store must follow.
    @Test(arguments: [false, true]) func clearFixedUpReference(categoryFirst: Bool) throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let context = container.newContext(author: "H")
        let catID: ObjectID
        var artID: ObjectID
        if categoryFirst {
            catID = try context.insert(Category(name: "c"))
            artID = try context.insert(Article(title: "a", url: "https://f.example/a", category: catID))
        } else {
            // The article first, its category set after the category is inserted.
            artID = try context.insert(Article(title: "a", url: "https://f.example/a"))
            catID = try context.insert(Category(name: "c"))
            try context.set("category", of: artID, to: catID)
        }
        try context.save()
        let fresh = container.newContext()
        let stored = try fresh.fetchOne(Article.self)!
        #expect(stored.category != nil)
        artID = stored.id!
        // The same context: clear the category and change the title.
        var mine = try context.record(Article.self, with: artID)
        mine.category = nil
        mine.title = "b"
        try context.update(mine)
        try context.save()
        let after = try container.newContext().record(Article.self, with: artID)
        #expect(after.title == "b")
        #expect(after.category == nil, "the category stayed: \(String(describing: after.category))")
        let c = try container.newContext().fetchOne(Category.self)!
        #expect(c.articleCount == 0, "\(String(describing: c.articleCount))")
    }

    /// A context read at version v; another container writes (version v+1): each merge policy
    /// resolves as before (the row is read when the versions differ).
    @Test(arguments: [MergePolicy.error, .storeTrump, .objectTrump, .overwrite])
    func staleReadFromAnotherContainer(policy: MergePolicy) throws {
        let group = TemporaryGroup()
        let one = try group.open(ReadLater.Records.model)
        let two = try group.open(ReadLater.Records.model)
        let a = one.newContext(author: "A")
        try a.insert(Article(title: "t", url: "https://p.example/a", note: "n"))
        try a.save()
        let artID = try a.fetchOne(Article.self)!.id!
        var mine = try a.record(Article.self, with: artID)
        let b = two.newContext(author: "B")
        var theirs = try b.record(Article.self, with: artID)
        theirs.note = "theirs"
        theirs.isRead = true
        try b.update(theirs)
        try b.save()
        a.mergePolicy = policy
        mine.title = "mine"
        try a.update(mine)
        var failed = false
        do { try a.save() } catch { failed = true }
        let after = try one.newContext().record(Article.self, with: artID)
        switch policy {
        case .error:
            #expect(failed && after.title == "t" && after.note == "theirs")
        case .storeTrump:
            #expect(!failed && after.title == "mine" && after.note == "theirs" && after.isRead, "\(after)")
        case .objectTrump:
            #expect(!failed && after.title == "mine" && after.note == "theirs", "\(after)")
        case .overwrite:
            #expect(!failed && after.title == "mine", "\(after)")
        default: break
        }
        #expect(try one.newContext().count(Article.self, where: \Article.isRead == false) == (after.isRead ? 0 : 1))
    }

    /// A category read by one context; another inserts an article into it (the derived count
    /// moves): the first renames it and the count is kept.
    @Test func derivedCountMovedUnderRead() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let a = container.newContext(author: "A")
        try a.insert(Category(name: "c"))
        try a.save()
        var cat = try a.fetchOne(Category.self)!
        let b = container.newContext(author: "B")
        try b.insert(Article(title: "x", url: "https://d.example/x", category: cat.id))
        try b.save()
        a.mergePolicy = .objectTrump
        cat.name = "renamed"
        try a.update(cat)
        try a.save()
        let after = try container.newContext().record(Category.self, with: cat.id!)
        #expect(after.name == "renamed" && after.articleCount == 1, "\(after)")
        // And again, from the same context, twice (its remembered snapshot is the read now).
        var again = try a.record(Category.self, with: cat.id!)
        #expect(again.articleCount == 1, "context's own view: \(again)")
        again.name = "again"
        try a.update(again)
        try a.save()
        let last = try container.newContext().record(Category.self, with: cat.id!)
        #expect(last.name == "again" && last.articleCount == 1, "\(last)")
    }

    /// An update right after the context's own insert, where a hook set values the context did not
    /// give (awakeFromInsert sets createdAt): clearing what the hook set reaches the store.
    @Test func updateAfterHookSetValue() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        try container.register(
            "Article",
            EntityHooks(awakeFromInsert: { draft in
                if draft["note"].isNull { try draft.set("note", .string("from hook")) }
            }))
        let context = container.newContext(author: "H")
        try context.insert(
            "Article", ["title": .string("t"), "url": .string("https://k.example/t"), "createdAt": .date(Date())])
        try context.save()
        let id = try container.newContext().fetchOne(Article.self)!.id!
        #expect(try container.newContext().record(Article.self, with: id).note == "from hook")
        try context.update(id, ["note": .null])
        try context.save()
        let after = try container.newContext().record(Article.self, with: id)
        // awakeFromInsert runs on insert only: the update's null must be stored.
        #expect(after.note == nil, "note: \(String(describing: after.note))")
    }
}
