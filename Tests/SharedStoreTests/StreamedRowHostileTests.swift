import Foundation
import ReadLater
import SharedStore
import SharedStoreSQLite
import SharedStoreSupport
import Synchronization
import Testing

/// From a hostile review of `forEachRow`, `StreamedRow` and the streamed `main-app list`: what a
/// foreign writer can leave in every column (bytes that are not UTF-8, blobs, NUL, C1 and bidi
/// controls, 300 KB texts, numbers out of range, garbage global ids and versions, dangling
/// categories) reads and writes as the snapshots say; requests, pins and errors behave as
/// `forEach`'s.
@Suite struct StreamedRowHostileTests {
    typealias Article = ReadLater.Records.Article

    /// A store of 16 articles (some with a category), then `plant` run on a raw connection.
    static func hostileStore(_ plant: (SQLiteConnection, [Int64], String) throws -> Void) throws -> (
        TemporaryGroup, Container
    ) {
        let group = TemporaryGroup()
        let container = try group.open()
        let context = container.newContext(author: "T")
        let nameKey = ReadLater.categoryName(container.model)
        let category = try context.insert("Category", [nameKey: "c"])
        var ids: [ObjectID] = []
        for i in 0..<16 {
            let id = try context.insert(
                "Article",
                [
                    "title": .string("title \(i)"), "url": .string("https://example.com/\(i)"),
                    "isRead": .bool(i % 2 == 0), "createdAt": .date(Date(timeIntervalSince1970: Double(i) * 1e6)),
                ])
            if i % 3 != 0 { try context.set("category", of: id, to: category) }
            ids.append(id)
        }
        let saved = try context.save()
        let keys = ids.map { saved.permanentID(for: $0).primaryKey }
        let raw = try SQLiteConnection(path: group.storePath, busyTimeoutMilliseconds: 1000)
        try plant(raw, keys, nameKey)
        return (group, container)
    }

    static let hostileTexts = [
        "CAST(X'C0AF' AS TEXT)", "CAST(X'EDA080' AS TEXT)", "CAST(X'F8888080' AS TEXT)", "CAST(X'61F0' AS TEXT)",
        "X'00FF10'", "X''", "zeroblob(3)", "CAST(X'C29F' AS TEXT)", "CAST(X'E281A7E280AF' AS TEXT)",
        "1e999", "-9223372036854775808", "CAST(X'7F7F7F7F7F7F7F7F7F' AS TEXT)",
        "printf('%.*c', 300000, 'a') || CAST(X'E2' AS TEXT)",
        "'12345678' || char(0) || 'x'", "NULL", "printf('%.*c', 17, '\"')",
    ]

    static func plantAll(_ raw: SQLiteConnection, _ keys: [Int64], _ nameKey: String) throws {
        for (k, text) in hostileTexts.enumerated() {
            try raw.execute(
                "UPDATE \"Article\" SET \"title\" = \(text), \"url\" = \(text), \"note\" = \(text), \"tags\" = \(text) "
                    + "WHERE Z_PK = \(keys[k])"
            )
        }
        let numbers = ["'yes'", "X'01'", "1e999", "-1e999", "NULL", "9223372036854775807", "'1e3'", "''"]
        for (k, v) in numbers.enumerated() {
            try raw.execute(
                "UPDATE \"Article\" SET \"isRead\" = \(v), \"createdAt\" = \(v) WHERE Z_PK = \(keys[k + 4])")
        }
        // Global ids: text, short blob, integer, NULL, 16-byte blob, long blob.
        let gids = [
            "'garbage'", "X'0102'", "42", "NULL", "X'00112233445566778899AABBCCDDEEFF'", "zeroblob(100)", "1.5",
        ]
        for (k, v) in gids.enumerated() {
            try raw.execute("UPDATE \"Article\" SET \"Z_GID\" = \(v) WHERE Z_PK = \(keys[k])")
        }
        // Version as text; category pointing at nothing, at text, at a real.
        try raw.execute("UPDATE \"Article\" SET \"Z_OPT\" = 'v' WHERE Z_PK = \(keys[1])")
        try raw.execute("PRAGMA foreign_keys = OFF")
        try raw.execute("UPDATE \"Article\" SET \"category\" = 999 WHERE Z_PK = \(keys[2])")
        try raw.execute("UPDATE \"Article\" SET \"category\" = 'abc' WHERE Z_PK = \(keys[4])")
        try raw.execute("UPDATE \"Article\" SET \"category\" = 1.9 WHERE Z_PK = \(keys[5])")
        try raw.execute("UPDATE \"Category\" SET \"\(nameKey)\" = CAST(X'63E280A864FF00' AS TEXT)")
    }

    /// Every read of every streamed row equals its snapshot's, on hostile bytes in every column.
    @Test func hostileColumnsReadAsSnapshots() throws {
        let (_, container) = try Self.hostileStore(Self.plantAll)
        let request = FetchRequest("Article", sortedBy: [Key("createdAt").ascending])
        let entity = try #require(container.model.entity(named: "Article"))
        let seen = try StreamedRowTests.expectRowsMatchSnapshots(container, request) { row, s in
            // Writing each text attribute from the row equals writing the snapshot's value.
            for a in entity.attributes {
                var fromRow: [UInt8] = []
                var fromSnapshot: [UInt8] = []
                JSONObjectWriter.append(to: &fromRow) { $0.field("v", row, a.name) }
                JSONObjectWriter.append(to: &fromSnapshot) { $0.field("v", s[a.name]) }
                #expect(fromRow == fromSnapshot, "\(a.name) of \(s.id)")
                #expect((try? JSONSerialization.jsonObject(with: Data(fromRow))) != nil, "\(a.name) of \(s.id)")
            }
        }
        #expect(seen == 16)
    }

    /// The streamed list and the JSONValue list are byte-equal, and every line is JSON.
    @Test func hostileListsAgree() throws {
        let (_, container) = try Self.hostileStore(Self.plantAll)
        for (limit, offset, unread, search) in [
            (nil, 0, false, nil), (3, 2, false, nil), (nil, 0, true, nil), (nil, 0, false, "tit"), (0, 0, false, nil),
            (5, 100, false, nil),
        ] as [(Int?, Int, Bool, String?)] {
            var streamed: [UInt8] = []
            try ReadLater.listArticleObjects(
                container.newContext(), unreadOnly: unread, search: search, limit: limit, offset: offset
            ) {
                JSONObjectWriter.append(to: &streamed, $0)
                streamed.append(0x0A)
            }
            var values: [UInt8] = []
            try ReadLater.listArticles(
                container.newContext(), unreadOnly: unread, search: search, limit: limit, offset: offset
            ) {
                $0.write(to: &values)
                values.append(0x0A)
            }
            #expect(streamed == values)
            for line in String(decoding: streamed, as: UTF8.self).split(separator: "\n") {
                #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil, "\(line.prefix(200))")
                #expect(!line.contains("\u{2028}") && !line.contains("\u{85}"))
            }
        }
    }

    /// Same ids, same order, same awakeFromFetch calls as forEach for many request shapes.
    @Test func requestSemanticsMatchForEach() throws {
        let group = TemporaryGroup()
        let container = try group.open(ReadLater.Records.model)
        defer { withExtendedLifetime(group) {} }
        let context = container.newContext(author: "T")
        for i in 0..<40 {
            try context.insert(
                Article(
                    title: "t\(i % 7)", url: "https://a.example/\(i)",
                    createdAt: Date(timeIntervalSince1970: Double(i % 5)), isRead: i % 3 == 0))
        }
        try context.save()
        let counter = Counter()
        try container.register("Article", EntityHooks(awakeFromFetch: { _ in counter.add() }))
        let requests: [FetchRequest] = [
            FetchRequest(Article.self),
            FetchRequest(
                Article.self, where: \Article.isRead == false,
                sortedBy: [.descending(\Article.title), .ascending(\Article.createdAt)]),
            FetchRequest(Article.self, sortedBy: [.ascending(\Article.title)], limit: 5, offset: 3),
            FetchRequest(Article.self, limit: 0),
            FetchRequest(Article.self, limit: 10, offset: 1000),
            FetchRequest(
                Article.self, where: \Article.title == "t3" || \Article.isRead == true,
                sortedBy: [.descending(\Article.createdAt)], limit: 4),
        ]
        for r in requests {
            var a: [ObjectID] = []
            counter.reset()
            try container.newContext().forEach(r) { a.append($0.id) }
            let awakeA = counter.value
            var b: [ObjectID] = []
            counter.reset()
            try container.newContext().forEachRow(r) { b.append($0.id) }
            #expect(a == b)
            #expect(awakeA == counter.value && counter.value == b.count)
        }
    }

    /// A pinned context streams its pinned snapshot, as forEach does.
    @Test func pinnedContextStreamsItsSnapshot() throws {
        let group = TemporaryGroup()
        let container = try group.open(ReadLater.Records.model)
        defer { withExtendedLifetime(group) {} }
        let w = container.newContext(author: "T")
        for i in 0..<5 { try w.insert(Article(title: "t\(i)", url: "https://a.example/\(i)")) }
        try w.save()
        let pinned = container.newContext()
        try pinned.pin()
        defer { pinned.unpin() }
        for i in 5..<9 { try w.insert(Article(title: "t\(i)", url: "https://a.example/\(i)")) }
        try w.save()
        var a = 0
        var b = 0
        try pinned.forEach(FetchRequest(Article.self)) { _ in a += 1 }
        try pinned.forEachRow(FetchRequest(Article.self)) { _ in b += 1 }
        #expect(a == 5 && b == 5)
    }

    /// Throwing midway stops the stream and leaves the reader usable.
    @Test func throwingMidwayLeavesReaderUsable() throws {
        struct Stop: Error {}
        let group = TemporaryGroup()
        let container = try group.open(ReadLater.Records.model)
        defer { withExtendedLifetime(group) {} }
        let w = container.newContext(author: "T")
        for i in 0..<10 { try w.insert(Article(title: "t\(i)", url: "https://a.example/\(i)")) }
        try w.save()
        let r = container.newContext()
        var n = 0
        #expect(throws: Stop.self) {
            try r.forEachRow(FetchRequest(Article.self)) { _ in
                n += 1
                if n == 3 { throw Stop() }
            }
        }
        #expect(n == 3)
        var m = 0
        try r.forEachRow(FetchRequest(Article.self)) { _ in m += 1 }
        #expect(m == 10)
        #expect(try r.count(FetchRequest(Article.self)) == 10)
        try w.insert(Article(title: "x", url: "https://a.example/x"))
        try w.save()
        #expect(try r.fetch(FetchRequest(Article.self)).count == 11)
        // Pinned too.
        try r.pin()
        defer { r.unpin() }
        n = 0
        #expect(throws: Stop.self) {
            try r.forEachRow(FetchRequest(Article.self)) { _ in
                n += 1
                if n == 2 { throw Stop() }
            }
        }
        m = 0
        try r.forEachRow(FetchRequest(Article.self)) { _ in m += 1 }
        #expect(m == 11)
    }

    /// An unknown entity, attribute or condition throws, as forEach does.
    @Test func badRequestsThrow() throws {
        let group = TemporaryGroup()
        let container = try group.open(ReadLater.Records.model)
        defer { withExtendedLifetime(group) {} }
        let r = container.newContext()
        #expect(throws: (any Error).self) { try r.forEachRow(FetchRequest("NoSuchEntity")) { _ in } }
        #expect(throws: (any Error).self) {
            try r.forEachRow(FetchRequest("Article", where: Key("nope") == 1)) { _ in }
        }
        #expect(throws: (any Error).self) {
            try r.forEachRow(FetchRequest("Article", sortedBy: [Key("nope").ascending])) { _ in }
        }
        #expect(throws: (any Error).self) {
            try r.forEachRow(FetchRequest("Article", where: Key("category.nope") == 1)) { _ in }
        }
        // Reader still fine.
        var n = 0
        try r.forEachRow(FetchRequest("Article")) { _ in n += 1 }
        #expect(n == 0)
    }

    final class Counter: Sendable {
        private let n = Mutex(0)
        func add() { n.withLock { $0 += 1 } }
        func reset() { n.withLock { $0 = 0 } }
        var value: Int { n.withLock { $0 } }
    }
}
