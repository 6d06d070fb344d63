import Foundation
import ReadLater
import SharedStore
import Testing

/// A change observer whose store fails for good says so: its stream ends with the error instead
/// of waiting in silence for ever (issue 21). Real processes and files, events with deadlines.
@Suite struct ObserverFailureTests {
    /// How a stream ended: with an error, or normally (`nil`: stopped, here by the deadline).
    enum Ending: Sendable {
        case error(any Error)
        case finished
    }

    /// Iterates `stream` until it ends; stops `observer` (which ends the stream normally) when
    /// `deadline` seconds pass first.
    func ending(of stream: AsyncThrowingStream<HistoryToken, any Error>, _ observer: ChangeObserver, deadline: Double)
        async -> Ending
    {
        let watchdog = Task {
            try await Task.sleep(for: .seconds(deadline))
            observer.stop()
        }
        defer { watchdog.cancel() }
        do {
            for try await _ in stream {}
            return .finished
        } catch {
            return .error(error)
        }
    }

    /// The code of the store error the stream ended with (nil: it did not end with one).
    func code(_ ending: Ending) -> StoreError.Code? {
        guard case .error(let error) = ending else { return nil }
        return (error as? StoreError)?.code
    }

    @Test(.tags(.multiProcess)) func theStreamEndsWithModelOutdatedWhenAnotherProcessMigratesTheStore() async throws {
        let group = TemporaryGroup()
        let old = try group.open(try ReadLater.model(version: 1))
        let observer = try ChangeObserver(container: old, pollInterval: 0.2)
        let stream = observer.changes()
        // The newest app's share-extension migrates the store, then saves (and signals).
        let share = try Child(
            "share-extension", ["share", "--group", group.path, "--url", "https://o.example/1", "--title", "newer"])
        #expect(try share.waitForExit() == 0)
        let ending = await ending(of: stream, observer, deadline: 30)
        #expect(code(ending) == .modelOutdated, "\(ending)")
        // A stream asked for afterwards ends at once with the same error.
        let later = await self.ending(of: observer.changes(), observer, deadline: 30)
        #expect(code(later) == .modelOutdated, "\(later)")
        #expect(throws: StoreError.self) { _ = try observer.next(timeout: 0) }
    }

    @Test(.tags(.multiProcess)) func theStreamEndsWithAFileErrorWhenTheGroupDirectoryIsRemoved() async throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let observer = try ChangeObserver(container: container, pollInterval: 0.2)
        let stream = observer.changes()
        // Another process's save reaches the stream first: the observer works.
        let share = try Child(
            "share-extension", ["share", "--group", group.path, "--url", "https://o.example/2", "--title", "one"])
        #expect(try share.waitForExit() == 0)
        var iterator = stream.makeAsyncIterator()
        #expect(try await iterator.next() != nil)
        try FileManager.default.removeItem(atPath: group.path)
        let ending = await ending(of: stream, observer, deadline: 30)
        #expect(code(ending) == .fileAccess, "\(ending)")
        if case .error(let error as StoreError) = ending { #expect(error.message.contains("was removed")) }
    }

    /// Found by review: a callback user learned nothing when the store failed (the callbacks were
    /// dropped in silence). `onFailure` hears the error, once; one registered later, at once.
    @Test func aCallbackUserHearsTheFailureOnce() throws {
        let group = TemporaryGroup()
        let observer = try ChangeObserver(container: try group.open(), pollInterval: 0.2)
        let heard = Protected<[String]>([])
        let done = DispatchSemaphore(value: 0)
        observer.onChange({ _ in }) { error in
            heard.withLock { $0.append("\(error)") }
            done.signal()
        }
        try FileManager.default.removeItem(atPath: group.path)
        #expect(done.wait(timeout: .now() + 30) == .success, "onFailure was not called within 30 s")
        #expect(heard.withLock { $0.count } == 1)
        #expect((observer.failure as? StoreError)?.code == .fileAccess, "\(String(describing: observer.failure))")
        let late = DispatchSemaphore(value: 0)
        observer.onChange({ _ in }) { _ in late.signal() }
        #expect(late.wait(timeout: .now()) == .success, "a late onFailure is called at once")
    }

    @Test func aStoppedObserverEndsItsStreamWithoutAnError() async throws {
        let group = TemporaryGroup()
        let observer = try ChangeObserver(container: try group.open(), pollInterval: 0.2)
        let stream = observer.changes()
        observer.stop()
        let ending = await ending(of: stream, observer, deadline: 30)
        guard case .finished = ending else {
            Issue.record("a stopped observer's stream ended with \(ending)")
            return
        }
    }
}
