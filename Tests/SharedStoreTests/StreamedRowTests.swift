import Foundation
import ReadLater
import SharedStore
import Synchronization
import Testing

/// `forEachRow` lends each row as a `StreamedRow`: what it reads is what `forEach`'s snapshot of
/// the same row holds, every attribute, target, version and global id; an entity's
/// `awakeFromFetch` still sees each row.
@Suite struct StreamedRowTests {
    typealias Article = ReadLater.Records.Article
    typealias Category = ReadLater.Records.Category

    @Test func aStreamedRowReadsWhatItsSnapshotHolds() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let context = container.newContext(author: "T")
        let category = try context.insert(Category(name: "c"))
        for i in 0..<30 {
            try context.insert(
                Article(
                    title: "t\(i) ünï", url: "https://s.example/\(i)",
                    createdAt: Date(timeIntervalSince1970: Double(i)),
                    isRead: i % 2 == 0, note: i % 3 == 0 ? nil : "note \(i)", tags: i % 5 == 0 ? ["a", "b"] : nil,
                    category: i % 4 == 0 ? nil : category))
        }
        try context.save()
        // A later version for some, so that versions differ from row to row.
        let some = try context.fetch(Article.self).prefix(7)
        for var a in some {
            a.isRead.toggle()
            try context.update(a)
        }
        try context.save()
        let request = FetchRequest(Article.self, sortedBy: [.ascending(\Article.createdAt)])
        let seen = try Self.expectRowsMatchSnapshots(container, request) { row, s in
            #expect(row[\Article.title] == s["title"])
            #expect(row["no such attribute"] == .null && row.target("no such relationship") == nil)
        }
        #expect(seen == 30)
    }

    /// Streams `request` and expects every read of each row (id, version, global id, snapshot,
    /// attributes, to-one targets) to be what `forEachWithGlobalID`'s snapshot of it holds, in the
    /// same order; `more` checks more of each. Returns how many rows were streamed.
    static func expectRowsMatchSnapshots(
        _ container: Container, _ request: FetchRequest, _ more: (borrowing StreamedRow, Snapshot) -> Void
    ) throws -> Int {
        var snapshots: [(Snapshot, UUID?)] = []
        try container.newContext().forEachWithGlobalID(request) { snapshots.append(($0, $1)) }
        let entity = try #require(container.model.entity(named: request.entity))
        var seen = 0
        try container.newContext().forEachRow(request) { row in
            guard seen < snapshots.count else {
                Issue.record("more rows than snapshots")
                return
            }
            let (s, gid) = snapshots[seen]
            seen += 1
            #expect(row.id == s.id && row.version == s.version && row.globalID == gid)
            #expect(row.snapshot == s)
            for a in entity.attributes { #expect(row[a.name] == s[a.name], "\(a.name) of \(s.id)") }
            for r in entity.relationships where !r.isToMany { #expect(row.target(r.name) == s.relationships[r.name]) }
            more(row, s)
        }
        #expect(seen == snapshots.count)
        return seen
    }

    @Test func awakeFromFetchSeesEveryStreamedRow() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let context = container.newContext(author: "T")
        for i in 0..<5 { try context.insert(Article(title: "t\(i)", url: "https://a.example/\(i)")) }
        try context.save()
        let titles = Titles()
        try container.register("Article", EntityHooks(awakeFromFetch: { titles.add($0["title"]) }))
        var streamed: [Value] = []
        try container.newContext().forEachRow(FetchRequest(Article.self, sortedBy: [.ascending(\Article.title)])) {
            streamed.append($0[\Article.title])
        }
        #expect(streamed == (0..<5).map { .string("t\($0)") })
        #expect(titles.all == streamed)
    }

    final class Titles: Sendable {
        private let list = Mutex<[Value]>([])
        func add(_ v: Value) { list.withLock { $0.append(v) } }
        var all: [Value] { list.withLock { $0 } }
    }
}
