import Foundation
import ReadLater
import SharedStore
import Testing

/// Live queries (issue 11): results that follow the store, with diffs, decided from history.
@Suite struct LiveQueryTests {
    func helper(_ args: String...) throws -> Child { try Child("sharedstore-helper", args) }

    func fresh(_ container: Container, _ request: FetchRequest) throws -> [String] {
        try container.newContext().fetch(request).map { "\($0.id)@\($0.version)" }
    }

    @Test(.tags(.multiProcess), arguments: [1, 2, 3])
    func diffsAppliedToTheFirstResultAlwaysEqualAFreshFetch(seed: Int) throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let registry = try TokenRegistry(group: group.path)
        let request = FetchRequest(
            "Article", where: Key("isRead") == false || Key("category.label") == "Keep",
            sortedBy: [Key("title").ascending], limit: 12, offset: 1)
        let query = try LiveQuery(container: container, registry: registry, consumer: "Live", request: request)
        let writer = try group.open().newContext(author: "Writer")
        writer.mergePolicy = .storeTrump
        var result = try #require(try query.next()).objects
        var random = TestRandom(state: UInt64(seed))
        var delivered = 0
        var reloads = 0
        for step in 0..<60 {
            try randomChange(step, &random, writer, group)
            if step == 30 {
                // The live consumer falls behind and is evicted while its history is cleaned.
                try registry.advance("Other", to: try container.currentToken())
                _ = try HistoryCleaner.clean(container: container, registry: registry, evictAfter: 0)
            }
            if let change = try query.next() {
                delivered += 1
                if change.reloaded { reloads += 1 }
                result = change.diff.apply(to: result, new: change.objects)
                #expect(result.map(\.id) == change.objects.map(\.id), "step \(step): the diff rebuilds the result")
            }
            #expect(
                result.map { "\($0.id)@\($0.version)" } == (try fresh(container, request)), "seed \(seed) step \(step)")
        }
    }

    private func randomChange(_ step: Int, _ random: inout TestRandom, _ writer: ObjectContext, _ group: TemporaryGroup)
        throws
    {
        let articles = try writer.fetch(FetchRequest("Article"))
        writer.rollback()
        let pick = { (r: inout TestRandom) in articles.isEmpty ? nil : articles[r.next(articles.count)].id }
        switch random.next(8) {
        case 0, 1:
            let rows: [[String: Value]] = (0..<(1 + random.next(3))).map { i in
                [
                    "title": .string("t\(random.next(40))"), "url": .string("https://l.example/\(step)/\(i)"),
                    "createdAt": .date(Date()), "isRead": .bool(random.next(2) == 0),
                ]
            }
            try writer.batchInsert("Article", rows)
        case 2:
            if let id = pick(&random) { try writer.update(id, ["isRead": .bool(random.next(2) == 0)]) }
        case 3:
            if let id = pick(&random) { try writer.update(id, ["title": .string("u\(random.next(40))")]) }
        case 4:
            if let id = pick(&random) { try writer.delete(id) }
        case 5:
            let name = random.next(2) == 0 ? "Keep" : "Other"
            let category = try writer.insert(ReadLater.Category(name: name))
            if let id = pick(&random) { try writer.update(id, [:], relationships: ["category": category]) }
        case 6:
            try writer.batchUpdate(
                "Article", where: Key("title").beginsWith("t\(random.next(4))"), set: ["isRead": true])
        default:
            // Another process's save.
            if let id = pick(&random) {
                #expect(
                    try helper("set-title", "--group", group.path, "--id", id.description, "--title", "h\(step)")
                        .waitForExit() == 0)
            }
        }
        if writer.hasChanges { try writer.save() }
    }

    @Test func irrelevantTransactionsDoNotRunTheQueryAgain() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let registry = try TokenRegistry(group: group.path)
        let writer = try group.open().newContext(author: "Writer")
        let unread = try writer.insert(ReadLater.Article(title: "unread", url: "https://i.example/1"))
        let read = try writer.insert(ReadLater.Article(title: "read", url: "https://i.example/2", isRead: true))
        let saved = try writer.save()
        let request = FetchRequest("Article", where: Key("isRead") == false, sortedBy: [Key("createdAt").descending])
        let query = try LiveQuery(container: container, registry: registry, consumer: "Live", request: request)
        #expect(try query.next()?.objects.count == 1)
        #expect(query.runs == 1)

        try writer.insert(ReadLater.Category(name: "Elsewhere"))  // another entity
        try writer.save()
        try writer.update(saved.permanentID(for: read), ["title": .string("still read")])  // not read by the query
        try writer.save()
        #expect(try query.next() == nil)
        #expect(query.runs == 1, "no re-run for changes the query cannot see")

        try writer.update(saved.permanentID(for: unread), ["title": .string("shown")])  // an object in the result
        try writer.save()
        let change = try #require(try query.next())
        #expect(change.diff.updated == [0] && query.runs == 2)
        try writer.update(saved.permanentID(for: read), ["isRead": .bool(false)])  // a property the query reads
        try writer.save()
        #expect(try query.next()?.diff.inserted.count == 1)
        #expect(query.runs == 3)
    }

    @Test(.tags(.multiProcess)) func resultsArriveAsAnAsyncSequenceFromAnotherProcess() async throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let registry = try TokenRegistry(group: group.path)
        let query = try LiveQuery(
            container: container, registry: registry, consumer: "Live",
            request: FetchRequest("Article", sortedBy: [Key("createdAt").ascending]))
        var iterator = query.results(pollInterval: 5).makeAsyncIterator()
        #expect(try await iterator.next()?.objects.isEmpty == true)
        let writer = try helper("write", "--group", group.path, "--author", "Far", "--count", "2")
        #expect(try writer.waitForExit() == 0)
        var seen = 0
        while seen < 2, let result = try await iterator.next() { seen = result.objects.count }
        #expect(seen == 2)
    }

    /// A UI model on the main actor follows a live query under Swift 6 strict concurrency: it
    /// applies each diff to what it shows and ends up with what a fresh fetch returns.
    @MainActor @Test(.tags(.multiProcess), .timeLimit(.minutes(1)))
    func aMainActorModelFollowsALiveQuery() async throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let query = try LiveQuery(
            container: container, registry: try TokenRegistry(group: group.path), consumer: "Screen",
            request: FetchRequest("Article", sortedBy: [Key("createdAt").ascending]))
        let model = UnreadListModel()
        #expect(try helper("write", "--group", group.path, "--author", "Far", "--count", "1").waitForExit() == 0)
        async let followed: Void = model.follow(query, until: 3)
        #expect(try helper("write", "--group", group.path, "--author", "Far", "--count", "2").waitForExit() == 0)
        try await followed
        #expect(model.rows == (try container.newContext().fetch(query.request)).map(\.id))
        #expect(model.changes >= 1)
    }
}

/// What a SwiftUI list model would do with a live query: main-actor state, changed by diffs.
@MainActor final class UnreadListModel {
    private(set) var rows: [ObjectID] = []
    private(set) var changes = 0
    private var shown: [Snapshot] = []

    func follow(_ query: LiveQuery<Snapshot>, until count: Int) async throws {
        for try await result in query.results(pollInterval: 0.2) {
            shown = result.diff.apply(to: shown, new: result.objects)
            rows = shown.map(\.id)
            changes += 1
            if rows.count >= count { return }
        }
    }
}
