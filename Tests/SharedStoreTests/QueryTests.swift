import Foundation
import ReadLater
import SharedStore
import Testing

/// Issue 13's queries: to-many predicates and aggregates.
@Suite struct QueryTests {
    static let model: Model = {
        do {
            return try Model([
                Entity(
                    "Shelf", attributes: [Attribute("name", .string)],
                    relationships: [.toMany("books", "Book", inverse: "shelf")]),
                Entity(
                    "Book", attributes: [Attribute("title", .string), Attribute("pages", .integer)],
                    relationships: [
                        .toOne("shelf", "Shelf", inverse: "books"), .toMany("tags", "Tag", inverse: "books"),
                    ]),
                Entity(
                    "Tag", attributes: [Attribute("label", .string)],
                    relationships: [.toMany("books", "Book", inverse: "tags")]),
            ])
        } catch {
            preconditionFailure("\(error)")
        }
    }()

    func library() throws -> (Container, ObjectContext) {
        let container = try TemporaryGroup().open(Self.model)
        let c = container.newContext(author: "A")
        let shelves = try ["long", "short", "empty"].map { try c.insert("Shelf", ["name": .string($0)]) }
        let classic = try c.insert("Tag", ["label": "classic"])
        let books: [(String, Int, Int)] = [("War and Peace", 1200, 0), ("Ulysses", 700, 0), ("Candide", 130, 1)]
        var ids: [ObjectID] = []
        for (title, pages, shelf) in books {
            ids.append(
                try c.insert(
                    "Book", ["title": .string(title), "pages": .integer(Int64(pages))],
                    relationships: ["shelf": shelves[shelf]]))
        }
        let saved = try c.save()
        try c.relate(saved.permanentID(for: ids[0]), "tags", to: saved.permanentID(for: classic))
        try c.relate(saved.permanentID(for: ids[2]), "tags", to: saved.permanentID(for: classic))
        try c.save()
        return (container, c)
    }

    func names(_ c: ObjectContext, _ condition: Condition) throws -> [String] {
        try c.fetch(FetchRequest("Shelf", where: condition, sortedBy: [Key("name").ascending])).compactMap {
            $0["name"].stringValue
        }
    }

    @Test func anyAllNoneAndCountsOverToManyRelationships() throws {
        let (_, c) = try library()
        #expect(try names(c, Key("books").any(Key("pages") > 1000)) == ["long"])
        #expect(try names(c, Key("books").all(Key("pages") > 500)) == ["empty", "long"], "ALL holds for none")
        #expect(try names(c, Key("books").none(Key("pages") > 500)) == ["empty", "short"])
        #expect(try names(c, Key("books").count >= 2) == ["long"])
        #expect(try names(c, Key("books").count == 0) == ["empty"])
        #expect(try names(c, Key("books").any(Key("tags").any(Key("label") == "classic"))) == ["long", "short"])
        let tagged = try c.fetch(FetchRequest("Tag", where: Key("books").count == 2)).count
        #expect(tagged == 1, "through a many-to-many relationship")
        let nested = Key("books").any(Key("shelf.name") == "short" && Key("title").beginsWith("C"))
        #expect(try names(c, nested) == ["short"], "a to-one key path inside")
    }

    @Test func aggregatesWithAndWithoutGroups() throws {
        let (_, c) = try library()
        let all = try c.aggregate("Book", [.count, .sum("pages"), .min("pages"), .max("title"), .average("pages")])
        #expect(all == [AggregateRow(group: [], values: [3, 2030, 130, "War and Peace", .double(2030.0 / 3)])])
        let byShelf = try c.aggregate("Book", [.count, .sum("pages")], groupedBy: ["shelf.name"])
        #expect(byShelf.map(\.group) == [["long"], ["short"]])
        #expect(byShelf.map(\.values) == [[2, 1900], [1, 130]])
        let long = try c.aggregate("Book", [.count], where: Key("pages") > 500)
        #expect(long.first?.values == [2])
        expectStoreError(.invalidArgument) { _ = try c.aggregate("Book", [.sum("title")]) }
    }

    @Test func aLiveQueryOverACountRunsAgainWhenTheRelatedObjectsChange() throws {
        let group = TemporaryGroup()
        let container = try group.open(Self.model)
        let c = container.newContext(author: "A")
        let shelf = try c.insert("Shelf", ["name": "s"])
        let book = try c.insert("Book", ["title": "t", "pages": 1])
        let saved = try c.save()
        let query = try LiveQuery(
            container: container, registry: try TokenRegistry(group: group.path), consumer: "Live",
            request: FetchRequest("Shelf", where: Key("books").count > 0))
        #expect(try query.next()?.objects.isEmpty == true)
        try c.update(saved.permanentID(for: book), [:], relationships: ["shelf": saved.permanentID(for: shelf)])
        try c.save()
        #expect(try query.next()?.objects.count == 1, "a book moved onto the shelf")
    }
}

extension QueryTests {
    @Test func fetchesSeeTheContextsUnsavedChangesUnlessAskedNotTo() throws {
        let (container, c) = try library()
        let shelves = try c.fetch(FetchRequest("Shelf", sortedBy: [Key("name").ascending]))
        let books = try c.fetch(FetchRequest("Book", sortedBy: [Key("title").ascending]))
        let request = FetchRequest("Book", where: Key("pages") > 500, sortedBy: [Key("pages").descending])
        try c.insert("Book", ["title": "Middlemarch", "pages": 880], relationships: ["shelf": shelves[1].id])
        try c.update(books[0].id, ["pages": 40])  // Candide: still short
        try c.update(books[1].id, ["pages": 600])  // Ulysses: 700 -> 600, still long, moves
        try c.delete(books[2].id)  // War and Peace
        try c.insert("Book", ["title": "Pamphlet", "pages": 12])
        let titles = try c.fetch(request).map { $0["title"] }
        #expect(titles == ["Middlemarch", "Ulysses"], "inserted, updated and deleted, in SQL's order")
        #expect(try c.fetch(request).map { $0["pages"] } == [880, 600])
        #expect(try c.count(request) == 2)
        var stored = request
        stored.includesPendingChanges = false
        #expect(try c.fetch(stored).map { $0["title"] } == ["War and Peace", "Ulysses"])
        var window = request
        window.limit = 1
        window.offset = 1
        #expect(try c.fetch(window).map { $0["title"] } == ["Ulysses"])
        let joined = FetchRequest("Book", where: Key("shelf.name") == "long", sortedBy: [Key("title").ascending])
        #expect(try c.fetch(joined).map { $0["title"] } == ["Middlemarch", "Ulysses"], "a to-one key path")
        try c.save()
        #expect(try container.newContext().fetch(request).map { $0["title"] } == titles, "what the save stores")
    }
}
