import Foundation
import ReadLater
import SharedStore
import Testing

@Suite struct ModelAndFetchTests {
    func memory(_ model: Model = ReadLater.model) throws -> Container {
        var options = Container.Options()
        options.inMemory = true
        return try Container(group: "/unused", model: model, options: options)
    }

    @Test func everyAttributeTypeRoundTrips() throws {
        let group = TemporaryGroup()
        let container = try group.open(Fixtures.allTypes)
        let context = container.newContext(author: "T")
        let date = Date(timeIntervalSince1970: 1_700_000_000.123456)
        let uuid = UUID()
        let values: [String: Value] = [
            "s": "héllo ✓ \u{0}x", "i": .integer(Int64.max / 2), "d": .double(-0.000123456789), "b": false,
            "t": .date(date), "bin": .data(Data([0, 1, 2, 255])), "u": .uuid(uuid), "code": "ABC", "score": 10,
        ]
        let temp = try context.insert("Thing", values)
        let id = try context.save().permanentID(for: temp)
        let reopened = try group.open(Fixtures.allTypes)
        let snapshot = try reopened.newContext().object(with: id)
        for (k, v) in values { #expect(snapshot[k] == v, "\(k)") }
        // Defaults and optionals.
        let otherTemp = try context.insert("Thing", [:])
        let other = try context.save().permanentID(for: otherTemp)
        let defaults = try context.object(with: other)
        #expect(defaults["b"] == true && defaults["s"] == .null && defaults["u"] == .null)
    }

    @Test func validationNamesObjectAttributeAndRule() throws {
        let container = try memory(Fixtures.allTypes)
        let context = container.newContext()
        func failure(_ values: [String: Value]) -> String {
            context.rollback()
            do {
                try context.insert("Thing", values)
                try context.save()
                return "saved"
            } catch let e as StoreError {
                return "\(e.code): \(e.message)"
            } catch { return "\(error)" }
        }
        #expect(failure(["code": "A"]).contains("Thing/t1.code is 1 characters long, at least 2"))
        #expect(failure(["code": "ABCDE"]).contains("at most 4"))
        #expect(failure(["code": "ab"]).contains("does not match the pattern"))
        #expect(failure(["score": 11]).contains("score is 11, at most 10"))
        #expect(failure(["score": -1]).contains("at least 0"))
        #expect(failure(["i": "text"]).contains(".i takes an integer, not \"text\""))
        #expect(failure(["d": .double(.nan)]).hasPrefix("validation"))
        #expect(failure(["t": .date(Date(timeIntervalSince1970: .infinity))]).contains("is not a valid date"))
        expectStoreError(.unknownProperty) { try context.insert("Thing", ["nope": 1]) }
        expectStoreError(.unknownEntity) { try context.insert("Nope", [:]) }
        let readLater = try memory().newContext()
        try readLater.insert("Article", ["url": "https://x.example"])
        expectStoreError(.validation) { try readLater.save() }
    }

    @Test func conditionsCoverEveryOperator() throws {
        let container = try memory()
        let context = container.newContext(author: "T")
        let swift = try context.insert(ReadLater.Category(name: "Swift"))
        let food = try context.insert(ReadLater.Category(name: "Food"))
        let names = ["Café au lait", "CAFE society", "Swift concurrency", "Naïve Bayes", "zebra"]
        var ids: [ObjectID] = []
        for (i, t) in names.enumerated() {
            ids.append(
                try context.insert(
                    ReadLater.Article(
                        title: t, url: "https://x.example/\(i)",
                        createdAt: Date(timeIntervalSince1970: Double(i * 100)),
                        isRead: i.isMultiple(of: 2), category: i < 2 ? food : i == 2 ? swift : nil)))
        }
        try context.save()
        func titles(_ c: Condition, sort: [SortKey] = [Key("title").ascending]) throws -> [String] {
            try context.fetch(ReadLater.Article.self, where: c, sortedBy: sort).map(\.title)
        }
        #expect(
            try titles(Key("title").contains("cafe", .caseInsensitive, .diacriticInsensitive)) == [
                "CAFE society", "Café au lait",
            ])
        #expect(try titles(Key("title").contains("cafe", .caseInsensitive)) == ["CAFE society"])
        #expect(try titles(Key("title").contains("Caf")) == ["Café au lait"])
        #expect(
            try titles(Key("title").beginsWith("naive", .caseInsensitive, .diacriticInsensitive)) == ["Naïve Bayes"])
        #expect(try titles(Key("title").endsWith("RA", .caseInsensitive)) == ["zebra"])
        #expect(try titles(Key("title").like("*con?urrency")) == ["Swift concurrency"])
        #expect(try titles(Key("title").equals("ZEBRA", .caseInsensitive)) == ["zebra"])
        #expect(try titles(Key("title") == "zebra") == ["zebra"])
        #expect(try titles(Key("title") != "zebra").count == 4)
        #expect(
            try titles(Key("createdAt") < .date(Date(timeIntervalSince1970: 150))) == ["CAFE society", "Café au lait"])
        #expect(try titles(Key("createdAt") >= .date(Date(timeIntervalSince1970: 300))) == ["Naïve Bayes", "zebra"])
        #expect(
            try titles(
                Key("createdAt").between(
                    .date(Date(timeIntervalSince1970: 100)), .date(Date(timeIntervalSince1970: 200)))
            ).count == 2)
        #expect(try titles(Key("title").among(["zebra", "nope", "Naïve Bayes"])) == ["Naïve Bayes", "zebra"])
        #expect(try titles(Key("category.label") == "Food") == ["CAFE society", "Café au lait"])
        #expect(try titles(!(Key("category.label") == "Food")) == ["Naïve Bayes", "Swift concurrency", "zebra"])
        #expect(try titles(Key("category") == nil) == ["Naïve Bayes", "zebra"])
        #expect(try titles(Key("isRead") == true && Key("category.label") == "Food") == ["Café au lait"])
        #expect(
            try titles(Key("isRead") == false || Key("title") == "zebra") == ["CAFE society", "Naïve Bayes", "zebra"])
        #expect(
            try titles(.always, sort: [Key("category.label").descending, Key("title").ascending]).first
                == "Swift concurrency")
        let window = try context.fetch(
            FetchRequest("Article", sortedBy: [Key("createdAt").ascending], limit: 2, offset: 1))
        #expect(window.map { $0["title"] } == ["CAFE society", "Swift concurrency"])
        #expect(try context.count(FetchRequest("Article", where: Key("isRead") == true)) == 3)
        // A value that looks like SQL is only ever a value.
        #expect(try titles(Key("title") == "x' OR 1=1 --").isEmpty)
        expectStoreError(.unknownProperty) { _ = try titles(Key("nope") == 1) }
        expectStoreError(.unknownProperty) { _ = try titles(Key("category.nope") == 1) }
        expectStoreError(.validation) { _ = try titles(Key("isRead") == "yes") }
        expectStoreError(.invalidArgument) { _ = try context.fetch(FetchRequest("Article", limit: -1)) }
        #expect(
            try context.related(
                "articles", of: context.fetch(ReadLater.Category.self, where: Key("label") == "Food")[0].id!
            ).count == 2)
    }

    @Test func deleteRulesNullifyCascadeAndDeny() throws {
        let container = try memory(Fixtures.allTypes)
        let context = container.newContext(author: "T")
        let folder = try context.insert("Folder", ["name": "f"])
        let n1 = try context.insert("Note", ["text": "one"], relationships: ["folder": folder])
        _ = try context.insert("Note", ["text": "two"], relationships: ["folder": folder])
        let pin = try context.insert("Pin", ["x": 1], relationships: ["folder": folder])
        let saved = try context.save()
        let f = saved.permanentID(for: folder)

        // deny: the pin holds the folder.
        try context.delete(f)
        expectStoreError(.deleteDenied) { try context.save() }
        context.rollback()
        #expect(try context.count(FetchRequest("Note")) == 2)

        // Deleting a note nullifies nothing stored on the folder side.
        try context.delete(saved.permanentID(for: n1))
        try context.save()
        // Remove the pin, then the folder cascades to the remaining note.
        try context.delete(saved.permanentID(for: pin))
        try context.save()
        try context.delete(f)
        let result = try context.save()
        #expect(result.deletedCount == 2)
        #expect(try context.count(FetchRequest("Note")) == 0)
        let last = try container.fetchHistory(HistoryRequest()).last!
        #expect(Set(last.changes.map { "\($0.kind)" }) == ["delete"])
        #expect(last.changes.contains { $0.tombstone?["text"] == "two" })
    }

    @Test func nullifyUpdatesTheOtherSideAndRecordsIt() throws {
        let container = try memory()
        let context = container.newContext(author: "T")
        let cat = try context.insert(ReadLater.Category(name: "Swift"))
        let a = try context.insert(ReadLater.Article(title: "a", url: "https://a.example", category: cat))
        let saved = try context.save()
        try context.delete(saved.permanentID(for: cat))
        try context.save()
        let article = try context.record(ReadLater.Article.self, with: saved.permanentID(for: a))
        #expect(article.category == nil)
        let last = try container.fetchHistory(HistoryRequest()).last!
        #expect(last.changes.map(\.kind) == [.update, .delete])
        #expect(last.changes[0].updatedProperties == ["category"])
    }

    @Test func manyToManyLinksAreRecordedOnBothSidesAndObeyDeleteRules() throws {
        let container = try memory(Fixtures.allTypes)
        let context = container.newContext(author: "T")
        let post = try context.insert("Post", ["title": "p"])
        let swift = try context.insert("Topic", ["name": "swift"])
        let linux = try context.insert("Topic", ["name": "linux"])
        try context.relate(post, "topics", to: swift)
        try context.relate(post, "topics", to: linux)
        try context.relate(post, "topics", to: swift)  // twice: one link
        let saved = try context.save()
        let (p, s, l) = (saved.permanentID(for: post), saved.permanentID(for: swift), saved.permanentID(for: linux))
        #expect(try context.related("topics", of: p) == [s, l])
        #expect(try context.related("posts", of: s) == [p])
        #expect(
            try container.fetchHistory(HistoryRequest()).last?.changes.map(\.kind) == [.insert, .insert, .insert],
            "inserts absorb the link updates")

        try context.unrelate(p, "topics", from: l)
        try context.unrelate(p, "topics", from: l)
        try context.save()
        let unlink = try #require(try container.fetchHistory(HistoryRequest()).last)
        #expect(
            Set(unlink.changes.map { "\($0.objectID) \($0.updatedProperties)" }) == [
                "\(p) [\"topics\"]", "\(l) [\"posts\"]",
            ])
        #expect(try context.related("posts", of: l).isEmpty)

        // Topic.posts is deny: a linked topic cannot go; Post.topics is nullify: a post can.
        try context.delete(s)
        expectStoreError(.deleteDenied) { try context.save() }
        context.rollback()
        try context.delete(p)
        try context.save()
        #expect(try context.related("posts", of: s).isEmpty)
        #expect(
            try container.fetchHistory(HistoryRequest()).last?.changes.contains {
                $0.objectID == s && $0.updatedProperties == ["posts"]
            } == true)

        // Shelf.books is cascade.
        let shelf = try context.insert("Shelf", ["name": "s"])
        let book = try context.insert("Book", ["title": "b"])
        try context.relate(book, "shelves", to: shelf)
        let ids = try context.save()
        try context.delete(ids.permanentID(for: shelf))
        #expect(try context.save().deletedCount == 2)
        #expect(try context.count(FetchRequest("Book")) == 0)

        expectStoreError(.unknownProperty) { try context.relate(s, "name", to: s) }
        expectStoreError(.validation) { try context.relate(ids.permanentID(for: book), "shelves", to: s) }
        let registryGroup = TemporaryGroup()
        let failed = StoreVerifier.verify(container: container, registry: try TokenRegistry(group: registryGroup.path))
            .filter { !$0.ok }
        #expect(failed.isEmpty, "\(failed)")
    }

    @Test func compoundUniqueness() throws {
        let container = try memory(Fixtures.allTypes)
        let context = container.newContext()
        try context.insert("Seat", ["row": "A", "number": 1])
        try context.insert("Seat", ["row": "A", "number": 2])
        try context.insert("Seat", ["row": "B", "number": 1])
        try context.save()
        try context.insert("Seat", ["row": "A", "number": 2])
        do {
            try context.save()
            Issue.record("duplicate seat saved")
        } catch let e as StoreError {
            #expect(e.code == .uniqueness)
            #expect(e.message.contains("Seat.row, Seat.number"))
        }
        var stored = FetchRequest("Seat")
        stored.includesPendingChanges = false
        #expect(try context.count(stored) == 3, "the store holds what it held")
    }

    @Test func recordsRoundTripAndUpdate() throws {
        let container = try memory()
        let context = container.newContext(author: "T")
        let cat = try context.insert(ReadLater.Category(name: "Swift"))
        var article = ReadLater.Article(
            title: "Hello", url: "https://swift.org", createdAt: Date(timeIntervalSince1970: 5), category: cat)
        let temp = try context.insert(article)
        let saved = try context.save().permanentID(for: temp)
        article = try context.record(ReadLater.Article.self, with: saved)
        #expect(article.id == saved && article.title == "Hello" && article.category?.entity == "Category")
        article.isRead = true
        article.category = nil
        try context.update(article)
        try context.save()
        let again = try context.record(ReadLater.Article.self, with: saved)
        #expect(again.isRead && again.category == nil)
        let history = try container.fetchHistory(HistoryRequest())
        #expect(Set(history.last!.changes[0].updatedProperties) == ["isRead", "category"])
        // Ids print, parse and encode.
        #expect(try container.objectID(parsing: saved.description) == saved)
        #expect(try JSONDecoder().decode(ObjectID.self, from: JSONEncoder().encode(saved)) == saved)
        for bad in [
            "Article", "Article/", "Article/x", "Article/-1", "Article/0", "/1", "Nope/1", "Article/1/2", "Article/+1",
        ] {
            expectStoreError(.malformedID) { _ = try container.objectID(parsing: bad) }
        }
        expectStoreError(.objectNotFound) {
            _ = try context.object(with: ObjectID(storeID: container.storeID, entity: "Article", primaryKey: 999))
        }
        expectStoreError(.objectNotFound) {
            try context.update(
                ObjectID(storeID: container.storeID, entity: "Article", primaryKey: 999), ["isRead": true])
        }
    }

    @Test func invalidModelsAreRejected() {
        expectStoreError(.invalidModel) { _ = try Model([]) }
        expectStoreError(.invalidModel) {
            _ = try Model([Entity("A", attributes: [Attribute("x", .string), Attribute("x", .integer)])])
        }
        expectStoreError(.invalidModel) { _ = try Model([Entity("A b", attributes: [])]) }
        expectStoreError(.invalidModel) {
            _ = try Model([Entity("A", attributes: [], relationships: [.toOne("b", "B", inverse: "a")])])
        }
        expectStoreError(.invalidModel) {
            _ = try Model([Entity("A", attributes: [Attribute("x", .string, pattern: "(")])])
        }
        expectStoreError(.invalidModel) {
            _ = try Model([Entity("A", attributes: [Attribute("x", .string, default: 3)])])
        }
        expectStoreError(.invalidModel) {
            _ = try Model([Entity("A", attributes: [Attribute("x", .string)], uniquenessConstraints: [["y"]])])
        }
        expectStoreError(.invalidModel) {
            _ = try Model([
                Entity("A", attributes: [], relationships: [.toOne("b", "B", inverse: "a")]),
                Entity("B", attributes: [], relationships: [.toOne("a", "A", inverse: "b")]),
            ])
        }
    }
}
