import Foundation
import ReadLater
import SharedStore
import SharedStoreSQLite
import Testing

@testable import SharedStoreCore

/// Global ids (issue 14): every object gets one at insert; history names each change's object by
/// it; a store made before them gets them on open, every row, once.
@Suite struct GlobalIDTests {
    @Test func everyObjectGetsItsOwnGlobalIDThatHistoryShows() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let context = container.newContext(author: "A")
        let start = try container.currentToken()
        let ids = try (0..<50).map { i in try context.insert(Fixtures.article("a\(i)", i)) }
        let saved = try context.save()
        let stored = ids.map { saved.permanentID(for: $0) }
        let gids = try context.globalIDs(of: stored)
        #expect(Set(gids.values).count == 50, "50 objects, 50 distinct global ids")
        for id in stored {
            let gid = try #require(gids[id])
            // A version 7 UUID (RFC 9562): version nibble 7, variant 10.
            #expect(gid.uuid.6 >> 4 == 7 && gid.uuid.8 >> 6 == 2, "\(gid) is not a version 7 UUID")
            #expect(try context.objectID(forGlobalID: gid, entity: "Article") == id)
            #expect(try context.globalID(of: id) == gid)
        }
        try context.update(stored[0], ["isRead": .bool(true)])
        try context.delete(stored[1])
        try context.save()
        let changes = try container.fetchHistory(HistoryRequest(after: start)).flatMap(\.changes)
        #expect(changes.count == 52)
        for change in changes {
            #expect(change.globalID == gids[change.objectID], "\(change.kind) of \(change.objectID)")
        }
        // And in the JSON of `storectl history` and `main-app list`.
        let json = try #require(changes.last?.json)
        #expect(json.serialized.contains(try #require(gids[stored[1]]).uuidString.lowercased()))
        var listed: [String] = []
        try ReadLater.listArticles(container.newContext()) { line in listed.append(line.serialized) }
        #expect(listed.count == 49)
        let shown = "\"gid\":\"\(try #require(gids[stored[0]]).uuidString.lowercased())\""
        #expect(listed.contains { $0.contains(shown) && $0.contains("\"\(stored[0])\"") })
    }

    @Test func anIDReadsAsFoundationWritesItInLowercase() {
        for id in (0..<1000).map({ _ in UUID() }) + [
            GlobalID.make(), UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)),
            UUID(
                uuid: (0x09, 0x0a, 0x9f, 0xa9, 0xff, 0xf0, 0x0f, 0xaf, 0xfa, 0x90, 0x19, 0x1a, 0xa1, 0x5b, 0xc6, 0xde)),
        ] {
            #expect(GlobalID.text(id) == id.uuidString.lowercased())
        }
    }

    /// An id's text is written in place: every width of key, temporary or not, reads as before.
    @Test func anObjectIDReadsAsItsEntityAndKey() {
        let store = UUID()
        let cases: [(String, Int64, String)] = [
            ("Article", 1, "Article/1"), ("Article", 0, "Article/0"), ("Category", 1_000_000, "Category/1000000"),
            ("Article", -3, "Article/t3"), ("Highlight", Int64.max, "Highlight/9223372036854775807"),
            ("Article", Int64.min, "Article/t9223372036854775808"), ("Ärticle", 42, "Ärticle/42"),
            ("A", 10, "A/10"), ("LongEntityNameBeyondSmallStrings", -100, "LongEntityNameBeyondSmallStrings/t100"),
        ]
        for (entity, key, text) in cases {
            #expect(ObjectID(storeID: store, entity: entity, primaryKey: key).description == text)
        }
    }

    @Test func idsMadeCloseInTimeSortTogetherAndNeverRepeat() {
        let ids = (0..<10_000).map { _ in GlobalID.bytes(GlobalID.make()) }
        #expect(Set(ids).count == ids.count)
        // The first six bytes are the time in milliseconds: never decreasing.
        let times = ids.map { $0.prefix(6).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
        #expect(zip(times, times.dropFirst()).allSatisfy { $0 <= $1 })
    }

    /// History records a change's global id in one byte when it follows the previous one (a
    /// batch of inserts), else in 17: whatever the mix, every id reads back as written.
    @Test(arguments: [1, 2, 3])
    func globalIDsInHistoryReadBackAsWrittenWhateverTheirOrder(seed: Int) throws {
        let model = ReadLater.model
        let numbering = try HistoryNumbering(model: model, catalog: HistoryCatalog(model), path: "test")
        var random = TestRandom(state: UInt64(seed))
        var changes: [RecordedChange] = []
        var runs = InsertRuns()
        var gid = GlobalID.make()
        for pk in 1...300 {
            switch random.next(4) {
            case 0: gid = GlobalID.make()
            case 1: gid = UUID()
            default: gid = GlobalID.successor(of: gid) ?? UUID()
            }
            let entity = random.next(2)
            let id: UUID? = random.next(10) == 0 ? nil : gid
            changes.append(RecordedChange(kind: .insert, entity: entity, primaryKey: Int64(pk), globalID: id))
            if let id { runs.append(entity, Int64(pk), id) }
        }
        let storeID = UUID()
        let decoded = try HistoryCodec.decode(
            HistoryCodec.encode(changes, numbering), model: model, numbering: numbering, storeID: storeID,
            entityFilter: nil)
        #expect(decoded.map(\.globalID) == changes.map(\.globalID))
        #expect(decoded.map(\.objectID.primaryKey) == changes.map(\.primaryKey))
        // Inserts kept as runs encode to the same bytes as the same inserts kept one by one.
        #expect(HistoryCodec.encode(runs, numbering) == HistoryCodec.encode(runs.changes, numbering))
        #expect(runs.changes.compactMap(\.globalID) == changes.compactMap(\.globalID))
    }

    @Test func aStoreMadeBeforeGlobalIDsGetsThemOnOpenKeepingItsHistory() throws {
        let group = TemporaryGroup()
        var before: [HistoryTransaction] = []
        do {
            let container = try group.open()
            let context = container.newContext(author: "A")
            try Fixtures.saveArticles(context, count: 20)
            before = try container.fetchHistory(HistoryRequest())
        }
        // What a format 3 store looked like: no global id column, no index.
        do {
            let c = try SQLiteConnection(path: group.storePath, busyTimeoutMilliseconds: 1000)
            for table in ["Article", "Category"] {
                try c.execute("ALTER TABLE \"\(table)\" DROP COLUMN Z_GID")
            }
            try c.execute("UPDATE ss_meta SET value = '3' WHERE key = 'format'")
        }
        let container = try group.open()
        let context = container.newContext()
        let articles = try context.fetch(FetchRequest("Article"))
        let gids = try context.globalIDs(of: articles.map(\.id))
        #expect(gids.count == 20 && Set(gids.values).count == 20)
        #expect(try container.fetchHistory(HistoryRequest()).map(\.token) == before.map(\.token))
        let c = try SQLiteConnection(path: group.storePath, busyTimeoutMilliseconds: 1000)
        #expect(try c.cached("SELECT value FROM ss_meta WHERE key = 'format'").firstRow { $0.text(0) } == "4")
        // A new save still works, and names its object.
        let writer = container.newContext(author: "B")
        try writer.insert(Fixtures.article("new", 99))
        let token = try #require(try writer.save().token)
        let change = try #require(try container.fetchHistory(HistoryRequest(start: .beginning)).last?.changes.first)
        #expect(change.globalID != nil && container.storeID == token.storeID)
    }
}
