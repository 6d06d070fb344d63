import Foundation
import ReadLater
import SharedStore
import Testing

/// Issue 12: model versions and lightweight migration — data, history and tokens survive; what
/// cannot be done is refused before anything is touched; old processes never use a stale schema.
@Suite struct MigrationTests {
    /// Version 1 of a small library model.
    static func v1() throws -> Model {
        try Model([
            Entity(
                "Book",
                attributes: [
                    Attribute("title", .string, preservedInHistory: true), Attribute("pages", .integer, optional: true),
                    Attribute("shelf", .string, optional: true), Attribute("code", .string, optional: true),
                    Attribute("genre", .string, optional: true),
                ],
                relationships: [
                    .toOne("author", "Writer", inverse: "books"), .toMany("tags", "Tag", inverse: "books"),
                    .toOne("series", "Series", inverse: "books"),
                ],
                indexes: [Index("pages")],
                keptCounts: [KeptCount("all"), KeptCount("long", where: Key("pages") > 300)]),
            Entity(
                "Writer", attributes: [Attribute("name", .string)],
                relationships: [.toMany("books", "Book", inverse: "author")]),
            Entity(
                "Tag", attributes: [Attribute("label", .string)],
                relationships: [.toMany("books", "Book", inverse: "tags")]),
            Entity("Note", attributes: [Attribute("text", .string)]),
            Entity(
                "Series", attributes: [Attribute("name", .string)],
                relationships: [.toMany("books", "Book", inverse: "series")]),
        ])
    }

    /// Version 2: every kind of lightweight change at once.
    static func v2(pages: AttributeType = .integer) throws -> Model {
        try Model(
            version: 2,
            [
                Entity(
                    "Saga", attributes: [Attribute("name", .string)],
                    relationships: [.toMany("books", "Book", inverse: "series")], renamedFrom: "Series"),
                Entity(
                    "Review", attributes: [Attribute("stars", .integer)],
                    relationships: [.toOne("book", "Book", inverse: "reviews")]),
                Entity(
                    "Book",
                    attributes: [
                        Attribute("rating", .integer, default: 0), Attribute("note", .string, optional: true),
                        Attribute("kind", .string, optional: true, renamedFrom: "genre"),
                        Attribute("code", .string, default: "none"), Attribute("pages", pages, optional: true),
                        Attribute("title", .string, maxLength: 100, preservedInHistory: true),
                    ],
                    relationships: [
                        .toMany("reviews", "Review", inverse: "book", deleteRule: .cascade),
                        .toOne("series", "Saga", inverse: "books"), .toMany("tags", "Tag", inverse: "books"),
                        .toOne("author", "Writer", inverse: "books"),
                    ],
                    uniquenessConstraints: [["title"]], indexes: [Index("kind")],
                    keptCounts: [KeptCount("all"), KeptCount("coded", where: Key("code") != "none")]),
                Entity(
                    "Tag", attributes: [Attribute("label", .string)],
                    relationships: [.toMany("books", "Book", inverse: "tags")]),
                Entity(
                    "Writer", attributes: [Attribute("name", .string, maxLength: 50)],
                    relationships: [.toMany("books", "Book", inverse: "author")]),
            ])
    }

    /// A v1 store with objects of every entity, links, and history of updates and deletes.
    func populate(_ group: TemporaryGroup) throws -> [String: ObjectID] {
        let container = try group.open(try Self.v1())
        let c = container.newContext(author: "Seed")
        let w = try c.insert("Writer", ["name": "Le Guin"])
        let s = try c.insert("Series", ["name": "Earthsea"])
        let t = try c.insert("Tag", ["label": "classic"])
        var books: [ObjectID] = []
        for (i, title) in ["A Wizard", "The Tombs", "The Farthest Shore", "Tehanu"].enumerated() {
            books.append(
                try c.insert(
                    "Book",
                    [
                        "title": .string(title), "pages": .integer(Int64(200 + 60 * i)), "shelf": "top",
                        "genre": "fantasy", "code": i % 2 == 0 ? .null : .string("c\(i)"),
                    ], relationships: ["author": w, "series": s]))
        }
        _ = try c.insert("Note", ["text": "to remove"])
        let saved = try c.save()
        let ids = books.map { saved.permanentID(for: $0) }
        for id in ids.prefix(2) { try c.relate(id, "tags", to: saved.permanentID(for: t)) }
        try c.update(ids[1], ["genre": "myth", "shelf": "low"])
        try c.save()
        try c.delete(ids[3])
        try c.save()
        return [
            "writer": saved.permanentID(for: w), "series": saved.permanentID(for: s), "tag": saved.permanentID(for: t),
            "book0": ids[0], "book1": ids[1], "book3": ids[3],
        ]
    }

    @Test func everyLightweightChangeKeepsDataHistoryAndTokens() throws {
        let group = TemporaryGroup()
        let ids = try populate(group)
        let before = try group.open(try Self.v1())
        let registry = try TokenRegistry(group: group.path)
        let oldHistory = try before.fetchHistory(HistoryRequest())
        let oldToken = try before.currentToken()
        _ = try registry.advance("Reader", to: oldHistory[1].token)

        let after = try group.open(try Self.v2())
        #expect(after.storeID == before.storeID)
        #expect(try after.currentToken().value == oldToken.value + 1, "one transaction: the migration's")
        let history = try after.fetchHistory(HistoryRequest())
        let migration = try #require(history.last)
        #expect(
            migration.author == "Migration" && migration.contextName == "migration.1-2" && migration.changes.isEmpty)
        #expect(history.count == oldHistory.count + 1)
        // Old records decode under the new names; the removed attribute and entity are dropped.
        let update = history[1].changes.first { $0.kind == .update && $0.objectID.entity == "Book" }
        #expect(
            update?.updatedProperties == ["kind", "tags"],
            "genre shows as kind, shelf is dropped: \(String(describing: update))")
        #expect(!history.flatMap(\.changes).contains { $0.objectID.entity == "Note" || $0.objectID.entity == "Series" })
        #expect(
            history[0].changes.contains {
                $0.objectID == ObjectID(storeID: after.storeID, entity: "Saga", primaryKey: 1)
            })
        let tombstone = history[2].changes.first { $0.kind == .delete }?.tombstone
        #expect(tombstone == ["title": "Tehanu"])
        // The consumer's token still names its transaction: what follows it is there, in order.
        let held = try #require(try registry.consumer("Reader")?.token)
        let tail = try after.fetchHistory(HistoryRequest(after: held))
        #expect(tail.map(\.token) == Array(history.map(\.token).suffix(2)))

        let c = after.newContext(author: "V2")
        let books = try c.fetch(FetchRequest("Book", sortedBy: [Key("title").ascending]))
        #expect(books.map { $0["kind"] } == ["fantasy", "fantasy", "myth"])
        #expect(books.map { $0["code"] } == ["none", "none", "c1"], "NULLs took the default")
        #expect(books.allSatisfy { $0["rating"] == 0 && $0["note"] == .null && !$0.has("shelf") && !$0.has("genre") })
        #expect(
            books.allSatisfy { (b: Snapshot) in
                b.relationships["series"]?.entity == "Saga" && b.relationships["author"] == ids["writer"]
            })
        #expect(try c.related("tags", of: try #require(ids["book0"])).count == 1)
        expectStoreError(.unknownEntity) { _ = try c.fetch(FetchRequest("Note")) }
        #expect(try c.count(FetchRequest("Book", where: Key("code") != "none")) == 1, "a new kept count, counted")
        #expect(try c.count(FetchRequest("Book")) == 3)
        let plan = try after.queryPlan(FetchRequest("Book", where: Key("kind") == "myth")).joined()
        #expect(plan.contains("ss_index_Book_kind"), "\(plan)")
        #expect(!(try after.queryPlan(FetchRequest("Book", where: Key("pages") == 3)).joined().contains("pages")))
        // The new model works: its constraint, its entity, its relationship.
        _ = try c.insert("Book", ["title": "A Wizard"])
        expectStoreError(.uniqueness) { try c.save() }
        c.rollback()
        let review = try c.insert("Review", ["stars": 5], relationships: ["book": ids["book1"]])
        try c.save()
        #expect(try c.fetch(FetchRequest("Review")).count == 1 && review.isTemporary)
        let checks = StoreVerifier.verify(container: after, registry: registry)
        let failed = checks.filter { !$0.ok }
        #expect(failed.isEmpty, "\(failed)")
    }

    @Test func refusedChangesLeaveTheStoreByteForByteUntouched() throws {
        let group = TemporaryGroup()
        _ = try populate(group)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: group.storePath))
        func refused(_ model: Model, _ mentions: String...) {
            do {
                _ = try group.open(model)
                Issue.record("migrated to a model it must refuse")
            } catch let error as StoreError {
                #expect(error.code == .migrationRefused, "\(error)")
                for m in mentions { #expect(error.message.contains(m), "\(error.message) should name \(m)") }
            } catch {
                Issue.record("\(error)")
            }
        }
        refused(try Self.v2(pages: .string), "Book.pages: type integer → string")
        var duplicates = try Self.v2().entities
        duplicates[2].uniquenessConstraints = [["kind"]]
        refused(try Model(version: 2, duplicates), "Book(kind)", "(fantasy) × 2")
        var required = try Self.v2().entities
        required[2].attributes.append(Attribute("isbn", .string))
        refused(try Model(version: 2, required), "Book.isbn is added as required with no default", "3 object(s)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: group.storePath)) == bytes)
        let reopened = try group.open(try Self.v1())
        #expect(try reopened.newContext().count(FetchRequest("Book")) == 3)
    }

    @Test func duplicatesAreResolvedWhenTheAppSaysSo() throws {
        let group = TemporaryGroup()
        let ids = try populate(group)
        var entities = try Self.v2().entities
        entities[2].uniquenessConstraints = [["kind"]]
        let model = try Model(version: 2, entities)
        let plan = try #require(try Container.migrationPlan(group: group.path, model: model, duplicates: .keepNewest))
        #expect(!plan.isRefused && plan.steps.contains { $0.hasPrefix("resolve duplicates of Book(kind)") })
        var options = Container.Options()
        options.duplicatesWhenMigrating = .keepNewest
        let after = try Container(group: group.path, model: model, options: options)
        let c = after.newContext()
        let books = try c.fetch(FetchRequest("Book", sortedBy: [Key("title").ascending])).map { $0["title"] }
        #expect(books == ["The Farthest Shore", "The Tombs"], "the newest fantasy stays")
        let kept = ObjectID(storeID: after.storeID, entity: "Book", primaryKey: 3)
        #expect(try c.related("tags", of: kept) == [try #require(ids["tag"])], "A Wizard's tag moved to it")
        let migration = try #require(try after.fetchHistory(HistoryRequest(authors: ["Migration"])).first)
        #expect(migration.changes.contains { $0.kind == .delete && $0.tombstone == ["title": "A Wizard"] })
        #expect(migration.changes.contains { $0.objectID == ids["tag"] && $0.updatedProperties == ["books"] })
        #expect(try c.count(FetchRequest("Book")) == 2, "the kept count was counted again")
        let failed = StoreVerifier.verify(container: after, registry: try TokenRegistry(group: group.path))
            .filter { !$0.ok }
        #expect(failed.isEmpty, "\(failed)")
    }

    @Test func aCustomStepMakesATypeChange() throws {
        let group = TemporaryGroup()
        _ = try populate(group)
        let step = MigrationStep(version: 2, "pages become doubles") { db in
            try db.execute(#"UPDATE "Book" SET "pages" = "pages" * 1.5 WHERE "pages" IS NOT NULL"#)
        }
        let after = try Container(group: group.path, model: try Self.v2(pages: .double), migrations: [step])
        let pages = try after.newContext().fetch(FetchRequest("Book", sortedBy: [Key("title").ascending]))
            .map { $0["pages"] }
        #expect(pages == [.double(300), .double(480), .double(390)])
    }

    @Test func anOlderModelCannotOpenAMigratedStoreAndARunningOneIsStopped() throws {
        let group = TemporaryGroup()
        let ids = try populate(group)
        let old = try group.open(try Self.v1())
        let oldContext = old.newContext(author: "Old")
        _ = try oldContext.fetch(FetchRequest("Book"))
        _ = try group.open(try Self.v2())
        try oldContext.update(try #require(ids["book0"]), ["shelf": "gone"])
        expectStoreError(.modelOutdated) { try oldContext.save() }
        expectStoreError(.modelOutdated) { _ = try oldContext.fetch(FetchRequest("Book")) }
        expectStoreError(.modelOutdated) { _ = try old.fetchHistory(HistoryRequest()) }
        do {
            _ = try group.open(try Self.v1())
            Issue.record("an older model opened a migrated store")
        } catch let error as StoreError {
            #expect(error.code == .modelNewer)
            #expect(error.message.contains("migrated by a newer version: model 2; update the app"), "\(error.message)")
        }
    }

    @Test func theOrderOfDeclarationsDoesNotMatter() throws {
        let group = TemporaryGroup()
        let ids = try populate(group)
        let reordered = try Model(
            try Self.v1().entities.reversed().map { e in
                var e = e
                e.attributes.reverse()
                e.relationships.reverse()
                return e
            })
        let container = try group.open(reordered)
        let c = container.newContext(author: "Reordered")
        try c.update(try #require(ids["book0"]), ["genre": "epic"])
        try c.save()
        let last = try #require(try group.open(try Self.v1()).fetchHistory(HistoryRequest()).last)
        #expect(last.changes.map(\.updatedProperties) == [["genre"]])
        #expect(try container.fetchHistory(HistoryRequest()).last?.changes.map(\.updatedProperties) == [["genre"]])
    }

    // MARK: - Processes of two versions

    func target(_ name: String, _ args: [String]) throws -> Child { try Child(name, args) }

    @Test(.tags(.multiProcess)) func processesOpeningAV1StoreAtOnceMigrateItOnce() throws {
        let group = TemporaryGroup()
        let seed = try target(
            "share-extension",
            ["share", "--model-version", "1", "--group", group.path, "--url", "https://m.example/0", "--title", "zero"])
        #expect(try seed.waitForExit() == 0)
        let children = try (1...4).map { i in
            try target(
                "share-extension",
                [
                    "share", "--group", group.path, "--url", "https://m.example/\(i)", "--title", "v2 \(i)",
                    "--category", "C",
                ])
        }
        for child in children { #expect(try child.waitForExit() == 0) }
        let container = try group.open()
        let migrations = try container.fetchHistory(HistoryRequest(authors: ["Migration"]))
        #expect(migrations.count == 1, "one migration, whoever opened first")
        #expect(try container.newContext().count(FetchRequest("Article")) == 5)
        let failed = StoreVerifier.verify(container: container, registry: try TokenRegistry(group: group.path))
            .filter { !$0.ok }
        #expect(failed.isEmpty, "\(failed)")
    }

    @Test(.tags(.multiProcess)) func aV1WatcherStopsAtTheMigrationAndAV2RestartCatchesUpWithNoGap() throws {
        let group = TemporaryGroup()
        let v1 = ["--model-version", "1", "--group", group.path]
        #expect(
            try target("share-extension", ["share", "--url", "https://w.example/1", "--title", "one"] + v1)
                .waitForExit() == 0)
        #expect(try target("main-app", ["sync", "--json"] + v1).waitForExit() == 0)
        let watcher = try target("main-app", ["watch", "--json", "--for", "60"] + v1)
        #expect(
            try target("share-extension", ["share", "--url", "https://w.example/2", "--title", "two"] + v1)
                .waitForExit() == 0)
        try watcher.waitForLine { $0.contains("Article/2") }
        let v2 = ["--group", group.path]
        #expect(
            try target("share-extension", ["share", "--url", "https://w.example/3", "--title", "three"] + v2)
                .waitForExit() == 0)
        #expect(try watcher.waitForExit() == 1, "modelOutdated at its next read")
        let sync = try target("main-app", ["sync", "--json"] + v2)
        #expect(try sync.waitForExit() == 0)
        let lines = sync.lines.map(json)
        #expect(lines.dropLast().map { $0["author"] as? String } == ["Migration", "ShareExtension"])
        #expect(lines.last?["expired"] as? Bool == false && lines.last?["reloaded"] as? Bool == false)
    }

    @Test(.tags(.multiProcess)) func aProcessKilledInsideAMigrationLeavesTheOldStore() throws {
        let group = TemporaryGroup()
        let v1 = try group.open(try ReadLater.model(version: 1))
        let context = v1.newContext(author: "Seed")
        try context.batch { batch in
            for i in 0..<2000 {
                _ = try batch.insert(
                    "Article",
                    ["title": .string("a\(i)"), "url": .string("https://k.example/\(i)"), "createdAt": .date(Date())],
                    object: "row \(i)")
            }
        }
        let before = try context.fetch(FetchRequest("Article", sortedBy: [Key("title").ascending]))
        let slow = try target("sharedstore-helper", ["migrate-slowly", "--group", group.path])
        try slow.waitForLine { $0 == "in-migration" }
        slow.kill9()
        _ = try slow.waitForExit()
        #expect(try Container.describeStore(group: group.path)?.version == 1)
        let again = try group.open(try ReadLater.model(version: 1))
        #expect(try again.newContext().fetch(FetchRequest("Article", sortedBy: [Key("title").ascending])) == before)
        let migrated = try group.open()
        #expect(try migrated.newContext().count(FetchRequest("Article")) == 2000)
    }
}
