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

    /// `LiveQuery<Article>`: its results are `[Article]` with their diffs, from another process's
    /// writes and the query's own updates; a diff applied to the records shown gives the new
    /// records; a request of another entity is refused by name.
    @Test func aTypedLiveQueryDeliversItsRecordType() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let registry = try TokenRegistry(group: group.path)
        let query = try LiveQuery<Article>(
            container: container, registry: registry,
            request: FetchRequest(
                Article.self, where: \Article.isRead == false, sortedBy: [.ascending(\Article.createdAt)]))
        let first = try #require(try query.next())
        #expect(first.objects.isEmpty && first.records.isEmpty)
        try write(group, 3)
        let second = try #require(try query.next())
        let shown: [Article] = second.diff.apply(to: first.objects, new: second.objects)
        #expect(shown == second.objects && second.objects.map(\.title) == ["Far-0", "Far-1", "Far-2"])
        #expect(second.diff.inserted == [0, 1, 2])
        var read = second.objects[1]
        read.isRead = true
        let marked = read
        let context = container.newContext(author: "App")
        try context.update(marked)
        try context.save()
        let third = try #require(try query.next())
        #expect(third.diff.removed == [1] && third.objects.map(\.title) == ["Far-0", "Far-2"])
        #expect(third.diff.apply(to: shown, new: third.objects) == third.objects)
        #expect(try query.next() == nil, "nothing changed since")
        #expect {
            _ = try LiveQuery<Article>(container: container, registry: registry, request: FetchRequest("Category"))
        } throws: { error in
            (error as? StoreError)?.code == .invalidArgument && "\(error)".contains("not Category")
        }
    }

    /// A `@MainActor` model follows a `LiveQuery<Article>` without naming the type again.
    @MainActor @Test(.timeLimit(.minutes(1))) func anObservableModelFollowsATypedQuery() async throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let query = try LiveQuery<Article>(
            container: container, registry: try TokenRegistry(group: group.path),
            request: FetchRequest(Article.self, sortedBy: [.ascending(\Article.createdAt)]))
        let model = LiveRecordsModel(query, pollInterval: 0.2)
        defer { model.stop() }
        try write(group, 2)
        try await Self.observe(model, until: 2)
        #expect(model.records.map(\.title) == ["Far-0", "Far-1"] && model.error == nil)
    }

    /// Waits until `model` holds `count` records, the way a view does: Observation calls back,
    /// then the value is read (the test's time limit is the deadline).
    @MainActor static func observe(_ model: LiveRecordsModel<Article>, until count: Int) async throws {
        await waitObserving { model.records.count >= count }
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
        try await Self.observe(model, until: 1)
        try write(group, 2)
        try await Self.observe(model, until: 3)
        #expect(model.records.map(\.title) == ["Far-0", "Far-0", "Far-1"])
        #expect(model.error == nil && !model.diff.inserted.isEmpty)
        #expect(model.records.map(\.id) == (try container.newContext().fetch(query.request)).map(\.id))
    }

    /// A live query with no consumer name of its own registers an ephemeral consumer: it holds
    /// history back while its process lives, and once the process is killed the next clean drops
    /// it, so that a dead widget never holds history back. One that goes in a living process
    /// removes its consumer itself.
    @Test func anEphemeralLiveQueryOfADeadProcessHoldsNothingBack() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let registry = try TokenRegistry(group: group.path)
        try write(group, 3)
        let follower = try Child("sharedstore-helper", ["live-query", "--group", group.path])
        let line = try follower.waitForLine("the query's consumer") { $0.contains("consumer") }
        let name = try #require(
            (try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["consumer"] as? String)
        #expect(name.hasPrefix("~LiveQuery@"))
        try write(group, 2)
        try registry.register("Reader")
        try registry.advance("Reader", to: try container.currentToken())
        let alive = try HistoryCleaner.clean(container: container, registry: registry)
        #expect(alive.gone.isEmpty && alive.oldestConsumer == name, "a living process's query holds history back")
        #expect(alive.remaining >= 2)
        follower.kill9()
        _ = try follower.waitForExit()
        let dry = try HistoryCleaner.clean(container: container, registry: registry, dryRun: true)
        let stillThere = try registry.consumer(name) != nil
        #expect(dry.gone == [name] && stillThere, "a dry run drops nothing")
        // With the dead query gone, only the up-to-date reader is left: nothing is held back.
        let after = try HistoryCleaner.clean(container: container, registry: registry)
        #expect(after.gone == [name] && after.remaining == 0 && after.oldestConsumer == "Reader")
        let dropped = try registry.consumer(name) == nil
        #expect(dropped)
        // In this process: the query's consumer goes with the query.
        var query: LiveQuery<Snapshot>? = try LiveQuery(
            container: container, registry: registry, request: FetchRequest("Article"))
        let mine = try #require(query?.consumerName)
        #expect(try registry.consumer(mine) != nil)
        #expect(try HistoryCleaner.clean(container: container, registry: registry).gone.isEmpty, "this process lives")
        query = nil
        #expect(try registry.consumer(mine) == nil)
        // ~ names are the ephemeral consumers': a durable consumer may not take one.
        #expect(throws: StoreError.self) { try registry.register("~Backup@1.2.3") }
    }
}
