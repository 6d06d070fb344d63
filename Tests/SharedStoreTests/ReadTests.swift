import Foundation
import ReadLater
import SharedStore
import Testing

/// Issue 11: reads that cost what they return — indexes in the model, fetches that use them,
/// streamed results.
@Suite struct ReadTests {
    @Test func theReadLaterFetchesUseTheirIndexes() throws {
        let container = try TemporaryGroup().open()
        let newestUnread = FetchRequest(
            "Article", where: Key("isRead") == false, sortedBy: [Key("createdAt").descending], limit: 50)
        let plan = try container.queryPlan(newestUnread).joined(separator: " | ")
        #expect(plan.contains("ss_index_Article_isRead_createdAt"), "\(plan)")
        #expect(!plan.contains("TEMP B-TREE"), "the order comes from the index: \(plan)")
        let oldestFirst = try container.queryPlan(FetchRequest("Article", sortedBy: [Key("createdAt").ascending]))
            .joined(separator: " | ")
        #expect(
            oldestFirst.contains("ss_index_Article_createdAt") && !oldestFirst.contains("TEMP B-TREE"), "\(oldestFirst)"
        )
        let newest = try container.queryPlan(FetchRequest("Article", sortedBy: [Key("createdAt").descending], limit: 3))
            .joined(separator: " | ")
        #expect(newest.contains("ss_index_Article_createdAt") && !newest.contains("TEMP B-TREE"), "\(newest)")
    }

    @Test func anIndexANewerModelAddsIsMadeByItsMigration() throws {
        let group = TemporaryGroup()
        let plain = try Model([Entity("Note", attributes: [Attribute("day", .integer)])])
        let indexed = try Model(
            version: 2, [Entity("Note", attributes: [Attribute("day", .integer)], indexes: [Index("day")])])
        let before = try group.open(plain)
        let context = before.newContext(author: "A")
        for day in 0..<20 { try context.insert("Note", ["day": .integer(Int64(day % 7))]) }
        try context.save()
        #expect(!(try before.queryPlan(FetchRequest("Note", where: Key("day") == 3)).joined().contains("ss_index")))
        let after = try group.open(indexed)
        #expect(
            try after.queryPlan(FetchRequest("Note", where: Key("day") == 3)).joined().contains("ss_index_Note_day"))
        #expect(try after.newContext().count(FetchRequest("Note", where: Key("day") == 3)) == 3)
    }

    @Test func aStreamedFetchEqualsTheFetchInOrderAndWindow() throws {
        let container = try TemporaryGroup().open()
        let context = container.newContext(author: "A")
        for i in 0..<30 {
            try context.insert(
                ReadLater.Article(
                    title: "a\(i)", url: "https://r.example/\(i)",
                    createdAt: Date(timeIntervalSince1970: Double(i % 10))))
        }
        try context.save()
        for request in [
            FetchRequest("Article", sortedBy: [Key("createdAt").ascending]),
            FetchRequest("Article", sortedBy: [Key("createdAt").descending], limit: 7, offset: 3),
            FetchRequest("Article", where: Key("title").beginsWith("a1"), sortedBy: [Key("title").ascending]),
        ] {
            var streamed: [ObjectID] = []
            try context.forEach(request) { streamed.append($0.id) }
            #expect(streamed == (try context.fetch(request)).map(\.id))
        }
    }

    @Test func batchInsertTakesToOneRelationships() throws {
        let container = try TemporaryGroup().open()
        let context = container.newContext(author: "A")
        let swift = try context.insert(ReadLater.Category(name: "Swift"))
        let category = try context.save().permanentID(for: swift)
        let row: [String: Value] = [
            "title": "t", "url": "https://b.example", "createdAt": .date(Date()), "isRead": false,
        ]
        let result = try context.batchInsert(
            "Article", [row, row], relationships: [["category": category], ["category": nil]])
        #expect(result.count == 2)
        #expect(try context.object(with: result.objectIDs[0]).relationships["category"] == category)
        #expect(try context.object(with: result.objectIDs[1]).relationships["category"] == nil)
        let token = try #require(result.token)
        let history = try container.fetchHistory(
            HistoryRequest(after: HistoryToken(storeID: container.storeID, value: token.value - 1)))
        // Object by object, and the category whose derived articleCount the batch changed.
        #expect(history.first?.changes.map(\.kind) == [.insert, .insert, .update], "recorded object by object")
        #expect(history.first?.changes.last?.objectID == category)
        let foreign = ObjectID(storeID: UUID(), entity: "Category", primaryKey: 1)
        #expect(throws: StoreError.self) {
            try context.batchInsert("Article", [row], relationships: [["category": foreign]])
        }
        #expect(try context.count(FetchRequest("Article")) == 2, "a bad row rejects the whole batch")
    }
}

extension ReadTests {
    /// A stored zero, empty string or epoch is a value; a NULL is `.null` — through a fetch (rows
    /// sharing one value array), a streamed fetch and a single read alike.
    @Test func zerosAndNullsReadBackAsTheyWereSaved() throws {
        let container = try TemporaryGroup().open(Fixtures.allTypes)
        let c = container.newContext(author: "A")
        let zero: [String: Value] = [
            "s": "", "i": 0, "d": 0.0, "b": false, "t": .date(Date(timeIntervalSince1970: 0)), "bin": .data(Data()),
            "u": .uuid(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))),
        ]
        let none: [String: Value] = ["s": nil, "i": nil, "d": nil, "t": nil, "bin": nil, "u": nil]
        let a = try c.insert("Thing", zero)
        let b = try c.insert("Thing", none)
        let saved = try c.save()
        let request = FetchRequest("Thing", sortedBy: [Key("i").ascending])
        let reader = container.newContext()
        var streamed: [Snapshot] = []
        try reader.forEach(request) { streamed.append($0) }
        for snapshots in [try reader.fetch(request), streamed] {
            let byID = Dictionary(uniqueKeysWithValues: snapshots.map { ($0.id, $0) })
            let za = try #require(byID[saved.permanentID(for: a)])
            let nb = try #require(byID[saved.permanentID(for: b)])
            for (name, value) in zero where name != "bin" { #expect(za[name] == value, "\(name)") }
            #expect(za["bin"] == .data(Data()) || za["bin"] == .null, "an empty blob")
            for name in none.keys { #expect(nb[name] == .null, "\(name) is NULL") }
            let (oa, ob) = (try reader.object(with: za.id), try reader.object(with: nb.id))
            #expect(za == oa && nb == ob, "a fetched row equals the same object read alone")
        }
    }
}
