import Foundation
import ReadLater
import SharedStore
import Testing

/// A thread that asks for a store connection it already holds (a read inside the body of a
/// stream, a write from inside a save's hook) gets `.invalidArgument` at once, where it used to
/// wait for itself forever; the connection is free again afterwards. Each case runs on a thread
/// of its own, waited for with a deadline: a regression fails the test, it does not hang the run.
@Suite struct ReentryTests {
    typealias Article = ReadLater.Records.Article

    static func store(_ options: Container.Options = Container.Options()) throws -> (TemporaryGroup, Container) {
        let group = TemporaryGroup()
        let container = try group.open(ReadLater.Records.model, options: options)
        let context = container.newContext(author: "T")
        for i in 0..<3 { try context.insert(Article(title: "t\(i)", url: "https://r.example/\(i)")) }
        try context.save()
        return (group, container)
    }

    /// Runs `body` on a thread of its own; nil when it did not end within 20 s.
    static func withDeadline(_ body: @escaping @Sendable () -> String) -> String? {
        let done = DispatchSemaphore(value: 0)
        let result = Box()
        Thread {
            result.set(body())
            done.signal()
        }.start()
        guard done.wait(timeout: .now() + 20) == .success else { return nil }
        return result.get()
    }

    final class Box: @unchecked Sendable {
        private let lock = NSLock()
        private var value = ""
        func set(_ v: String) { lock.withLock { value = v } }
        func get() -> String { lock.withLock { value } }
    }

    /// What `body` threw: its code, or "none".
    static func outcome(_ body: () throws -> Void) -> String {
        do {
            try body()
            return "none"
        } catch let e as StoreError {
            return "\(e.code)"
        } catch {
            return "\(error)"
        }
    }

    /// Runs `body` on a thread of its own and expects it to fail with `.invalidArgument`; false
    /// when it gave no answer within 20 s (its thread still holds the connection: nothing more
    /// can be asked of the container).
    static func failsAtOnce(_ what: String, _ body: @escaping @Sendable () throws -> Void) -> Bool {
        guard let result = withDeadline({ outcome(body) }) else {
            Issue.record("\(what): no answer within 20 s, it waits for itself")
            return false
        }
        #expect(result == "invalidArgument", "\(what): \(result)")
        return true
    }

    @Test(arguments: ["fetch in forEachRow", "count in forEach", "forEachRow in forEachRow", "pinned nested"])
    func aReadInsideAStreamFailsAtOnce(_ shape: String) throws {
        let (group, container) = try Self.store()
        let request = FetchRequest(Article.self)
        let answered = Self.failsAtOnce(shape) {
            let context = container.newContext()
            switch shape {
            case "fetch in forEachRow":
                try context.forEachRow(request) { _ in _ = try container.newContext().fetch(Article.self) }
            case "count in forEach":
                try context.forEach(request) { _ in _ = try context.count(request) }
            case "forEachRow in forEachRow":
                try context.forEachRow(request) { _ in try context.forEachRow(request) { _ in } }
            default:
                try context.pin()
                try context.forEachRow(request) { _ in try context.forEachRow(request) { _ in } }
            }
        }
        guard answered else { return }
        // The connection is free again.
        #expect(try container.newContext().count(request) == 3)
        _ = group
    }

    @Test func aWriteInsideAStreamOfAnInMemoryStoreFailsAtOnce() throws {
        var options = Container.Options()
        options.inMemory = true
        let (group, container) = try Self.store(options)
        let answered = Self.failsAtOnce("a write inside a stream") {
            try container.newContext().forEachRow(FetchRequest(Article.self)) { _ in
                let writer = container.newContext(author: "W")
                try writer.insert(Article(title: "inside", url: "https://r.example/inside"))
                try writer.save()
            }
        }
        guard answered else { return }
        #expect(try container.newContext().count(FetchRequest(Article.self)) == 3)
        _ = group
    }

    @Test func aSaveFromInsideASaveHookFailsTheOuterSave() throws {
        let (group, container) = try Self.store()
        try container.register(
            "Article",
            EntityHooks(willSave: { draft in
                guard draft["title"] == "outer" else { return }
                let inner = container.newContext(author: "Inner")
                try inner.insert(Article(title: "inner", url: "https://r.example/inner"))
                try inner.save()
            }))
        let answered = Self.failsAtOnce("a save from a save's hook") {
            let outer = container.newContext(author: "Outer")
            try outer.insert(Article(title: "outer", url: "https://r.example/outer"))
            try outer.save()
        }
        guard answered else { return }
        // Nothing of either save is stored, and the writer is free again.
        #expect(try container.newContext().count(FetchRequest(Article.self)) == 3)
        let after = container.newContext(author: "After")
        try after.insert(Article(title: "after", url: "https://r.example/after"))
        try after.save()
        #expect(try container.newContext().count(FetchRequest(Article.self)) == 4)
        _ = group
    }
}
