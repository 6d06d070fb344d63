import Foundation
import Observation
import ReadLater
import SharedStore
import Testing

/// Issue 23, point 5: live queries of records, and an `@Observable` model that follows one.
@Suite(.tags(.multiProcess)) struct LiveRecordsTests {
    typealias Article = ReadLater.Article

    func write(_ group: TemporaryGroup, _ count: Int) throws {
        let writer = try Child(
            "sharedstore-helper", ["write", "--group", group.path, "--author", "Far", "--count", "\(count)"])
        #expect(try writer.waitForExit() == 0)
    }

    @Test func aLiveQueryDeliversRecordsAndDiffs() async throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let query = try LiveQuery(
            container: container, registry: try TokenRegistry(group: group.path), consumer: "Typed",
            request: FetchRequest("Article", sortedBy: [Key("createdAt").ascending]))
        var iterator = query.records(Article.self, pollInterval: 5).makeAsyncIterator()
        #expect(try await iterator.next()?.records.isEmpty == true)
        try write(group, 2)
        var last: LiveRecords<Article>?
        while (last?.records.count ?? 0) < 2, let result = try await iterator.next() { last = result }
        let records = try #require(last).records
        #expect(records.map(\.title) == ["Far-0", "Far-1"])
        #expect(records.map(\.id) == (try container.newContext().fetch(query.request)).map(\.id))
        // A live record updated elsewhere writes only what it changed.
        var first = records[0]
        first.isRead = true
        let changed = first
        try await container.write(author: "App") { try $0.update(changed) }
        #expect(try container.newContext().object(with: try #require(first.id))["isRead"] == true)
    }

    /// A `@MainActor` model observed through Observation follows the store under strict
    /// concurrency: each change of its records is seen by `withObservationTracking`.
    @MainActor @Test(.timeLimit(.minutes(1))) func anObservableModelFollowsTheStore() async throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let query = try LiveQuery(
            container: container, registry: try TokenRegistry(group: group.path), consumer: "Observed",
            request: FetchRequest("Article", sortedBy: [Key("createdAt").ascending]))
        let model = LiveRecordsModel(query, as: Article.self, pollInterval: 0.2)
        defer { model.stop() }
        try write(group, 1)
        // Waits for changes the way a view does: Observation calls back, then the value is read.
        while model.records.count < 1 {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                withObservationTracking {
                    _ = model.records
                } onChange: {
                    done.resume()
                }
            }
        }
        try write(group, 2)
        while model.records.count < 3 {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                withObservationTracking {
                    _ = model.records
                } onChange: {
                    done.resume()
                }
            }
        }
        #expect(model.records.map(\.title) == ["Far-0", "Far-0", "Far-1"])
        #expect(model.error == nil && !model.diff.inserted.isEmpty)
        #expect(model.records.map(\.id) == (try container.newContext().fetch(query.request)).map(\.id))
    }
}
