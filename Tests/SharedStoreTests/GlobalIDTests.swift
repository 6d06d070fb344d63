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

    @Test func idsMadeCloseInTimeSortTogetherAndNeverRepeat() {
        let ids = (0..<10_000).map { _ in GlobalID.bytes(GlobalID.make()) }
        #expect(Set(ids).count == ids.count)
        // The first six bytes are the time in milliseconds: never decreasing.
        let times = ids.map { $0.prefix(6).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
        #expect(zip(times, times.dropFirst()).allSatisfy { $0 <= $1 })
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
