import Foundation
import ReadLater
import SharedStore
import Testing

/// Issue 13's concurrency chapter: async entry points that never block the caller's executor,
/// and the DAO pattern (an actor owning the container; Sendable snapshots and ids cross it).
@Suite struct AsyncTests {
    /// The README's DAO: contexts stay inside the actor's calls, snapshots and ids come out.
    actor ArticleStore {
        let container: Container
        init(container: Container) { self.container = container }

        func add(title: String, url: String) async throws -> ObjectID {
            try await container.write(author: "DAO") { context in
                try context.insert(ReadLater.Article(title: title, url: url))
            }
        }

        func unread() async throws -> [Snapshot] {
            try await container.read { context in
                try context.fetch(
                    FetchRequest("Article", where: Key("isRead") == false, sortedBy: [Key("title").ascending]))
            }
        }

        func markRead(_ id: ObjectID) async throws {
            try await container.write(author: "DAO") { context in try context.update(id, ["isRead": true]) }
        }
    }

    @MainActor final class Screen {
        var titles: [String] = []
        func show(_ snapshots: [Snapshot]) { titles = snapshots.compactMap { $0["title"].stringValue } }
    }

    @Test @MainActor func aMainActorScreenUsesAnActorDAOWithoutBlocking() async throws {
        let group = TemporaryGroup()
        let store = ArticleStore(container: try group.open())
        let a = try await store.add(title: "async", url: "https://a.example/1")
        _ = try await store.add(title: "await", url: "https://a.example/2")
        #expect(!a.isTemporary, "write returns the saved id")
        try await store.markRead(a)
        let screen = Screen()
        screen.show(try await store.unread())
        #expect(screen.titles == ["await"])
        // Many writers at once, none of them on the main actor's executor.
        try await withThrowingTaskGroup(of: ObjectID.self) { tasks in
            for i in 0..<8 { tasks.addTask { try await store.add(title: "t\(i)", url: "https://a.example/t\(i)") } }
            for try await _ in tasks {}
        }
        #expect(try await store.unread().count == 9)
    }

    @Test func asyncHistoryAndSyncOfAConsumer() async throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let registry = try TokenRegistry(group: group.path)
        _ = try await container.write(author: "Share") { context in
            try context.insert(ReadLater.Article(title: "h", url: "https://h.example"))
        }
        let history = try await container.history(HistoryRequest())
        #expect(history.count == 1)
        let first = try await container.sync(consumer: "Reader", registry: registry)
        #expect(first.reloaded && first.token == history.last?.token)
        _ = try await container.write(author: "Share") { context in
            try context.insert(ReadLater.Article(title: "i", url: "https://i.example"))
        }
        let second = try await container.sync(consumer: "Reader", registry: registry)
        #expect(second.transactions == 1 && !second.reloaded)
    }
}
