import Foundation
import ReadLater
import SharedStore
import Testing

/// A large typed batch encodes its records on a second thread beside the writer: it must write
/// exactly what a small one (encoded by the writer) writes, in order, name a bad record by its
/// row, write nothing when one fails wherever it is, and never hang.
@Suite(.timeLimit(.minutes(2))) struct TypedBatchPipelineTests {
    typealias Article = ReadLater.Records.Article

    /// A record whose encoding fails for one title (a custom `encode(to:)` that throws).
    struct Picky: Record {
        static let entityName = "Article"
        var id: ObjectID?
        var title: String
        var url: String
        var createdAt: Date
        struct Refused: Error {}
        func encode(to encoder: any Encoder) throws {
            guard title != "refused" else { throw Refused() }
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(title, forKey: .title)
            try c.encode(url, forKey: .url)
            try c.encode(createdAt, forKey: .createdAt)
        }
    }

    func articles(_ n: Int, from start: Int = 0) -> [Article] {
        (start..<start + n).map { k in
            var a = Article(
                title: "t\(k)", url: "https://p.example/\(k)", createdAt: Date(timeIntervalSince1970: Double(k)),
                isRead: k % 3 == 0, note: k % 2 == 0 ? nil : "n\(k)")
            a.tags = k % 5 == 0 ? ["x"] : nil
            return a
        }
    }

    @Test func aLargeBatchWritesWhatSmallOnesWrite() throws {
        let container = try TemporaryGroup().open()
        let context = container.newContext(author: "Typed")
        let large = articles(3001)
        let result = try context.batchInsert(large)
        #expect(result.count == 3001 && result.objectIDs.count == 3001)
        // The same values, 100 at a time (each encoded by the writer).
        for start in stride(from: 0, to: 3001, by: 100) {
            try context.batchInsert(
                articles(min(100, 3001 - start), from: start).map { a in
                    var b = a
                    b.url += "/small"
                    return b
                })
        }
        let stored = try context.fetch(
            Article.self, sortedBy: [.ascending(\Article.createdAt), .ascending(\Article.url)])
        #expect(stored.count == 6002)
        for k in stride(from: 0, to: 6002, by: 2) {
            var small = stored[k + 1]
            small.url = stored[k].url
            small.id = stored[k].id
            #expect(stored[k] == small, "record \(k / 2)")
        }
        let largeIDs = stored.filter { !$0.url.hasSuffix("/small") }.compactMap(\.id)
        #expect(Set(largeIDs) == Set(result.objectIDs))
        for (n, id) in result.objectIDs.enumerated() where n % 250 == 0 {
            #expect(try context.record(Article.self, with: id).title == "t\(n)", "ids in the records' order")
        }
        let last = try #require(try container.fetchHistory(HistoryRequest(authors: ["Typed"])).first)
        #expect(last.changes.count == 3001, "one transaction")
    }

    @Test func aBadRecordAnywhereFailsTheBatchByItsRowAndWritesNothing() throws {
        let container = try TemporaryGroup().open()
        let context = container.newContext(author: "Typed")
        for bad in [0, 2, 700, 1999] {
            var batch = articles(2000)
            batch[bad].title = ""
            #expect {
                try context.batchInsert(batch)
            } throws: { error in
                (error as? StoreError)?.validation?.object == "Article (batch row \(bad + 1))"
            }
        }
        #expect(try context.count(Article.self) == 0)
        // A record whose own encode throws: its error, and nothing written.
        for bad in [1, 1500] {
            var picky = (0..<2000).map {
                Picky(title: "p\($0)", url: "https://q.example/\($0)", createdAt: Date(timeIntervalSince1970: 0))
            }
            picky[bad].title = "refused"
            #expect {
                try context.batchInsert(picky)
            } throws: { error in
                (error as? StoreError)?.validation?.object == "Article (batch row \(bad + 1))"
                    && "\(error)".contains("Refused()")
            }
        }
        #expect(try context.count(Article.self) == 0)
        // A uniqueness failure between two records of one batch, far apart.
        var twice = (0..<1200).map { ReadLater.Records.Category(name: "c\($0)") }
        twice[1100].name = twice[5].name
        #expect {
            try context.batchInsert(twice)
        } throws: { error in
            (error as? StoreError)?.code == .uniqueness
        }
        #expect(try context.count(ReadLater.Records.Category.self) == 0)
        try context.batchInsert(articles(600))
        #expect(try context.count(Article.self) == 600)
    }
}
