import Foundation
import SharedStoreCore
import SharedStoreLMDB
import SharedStoreSupport

/// Learns that the store changed — saves of this process or of any other — within moments:
/// Core Data's `NSPersistentStoreRemoteChange` notification.
///
/// It wakes on the inotify event of the change-signal file, coalesces bursts into one event, and
/// reports the store's current token when it moved. A slow poll of the current token catches
/// what a lost event would miss (`IN_Q_OVERFLOW`, a file system without inotify, a writer that
/// died between its commit and its signal).
///
/// Three forms: blocking ``next(timeout:)``, an AsyncSequence ``changes()``, and a callback
/// ``onChange(_:)``.
///
/// For example:
/// ```swift
/// let observer = try ChangeObserver(container: container)
/// for await token in observer.changes() { try view.sync() }
/// ```
public final class ChangeObserver: Sendable {
    /// The container whose store the observer follows.
    public let container: Container
    /// How often, in seconds, the observer reads the store's current token whatever inotify says.
    public let pollInterval: TimeInterval
    private let watch: ChangeSignalWatch
    private let state = Protected(State())

    private struct State {
        var last: Int64
        var stopped = false
        var threadStarted = false
        var continuations: [UUID: AsyncStream<HistoryToken>.Continuation] = [:]
        var callbacks: [UUID: @Sendable (HistoryToken) -> Void] = [:]
        init(last: Int64) { self.last = last }
        init() { last = 0 }
    }

    /// Starts observing; changes committed after this call are reported.
    ///
    /// - Parameter pollInterval: the safety-net poll, in seconds.
    ///
    /// - Throws: `.invalidArgument` for a poll interval that is not a positive number,
    ///   `.fileAccess` when the process cannot make a pipe (no file descriptors left), and the
    ///   errors of ``Container/currentToken()``. Without inotify, or without the signal file yet,
    ///   the observer does not fail: it polls.
    public init(container: Container, pollInterval: TimeInterval = 1.0) throws {
        guard pollInterval.isFinite, pollInterval > 0 else {
            throw StoreError(.invalidArgument, "poll interval must be a positive number of seconds")
        }
        self.container = container
        self.pollInterval = pollInterval
        self.watch = try ChangeSignalWatch(path: ChangeSignal.path(of: container))
        let current = try container.currentToken().value
        state.withLock { $0.last = current }
    }

    deinit { stop() }

    /// True when inotify carries the signal; false when only the poll does.
    public var usesInotify: Bool { watch.usesInotify }

    /// Waits for the next change and returns the new current token; nil when `timeout` passes
    /// first or the observer is stopped. Not to be mixed with ``changes()`` or ``onChange(_:)``.
    public func next(timeout: TimeInterval) throws -> HistoryToken? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let token = try check() { return token }
            let remaining = deadline.timeIntervalSinceNow
            if remaining <= 0 || state.withLock({ $0.stopped }) { return nil }
            if watch.wait(timeout: min(remaining, pollInterval)) == .stopped { return nil }
        }
    }

    /// Stops observing: ends every stream and wakes a blocked ``next(timeout:)``.
    public func stop() {
        let continuations = state.withLock { s -> [AsyncStream<HistoryToken>.Continuation] in
            s.stopped = true
            defer {
                s.continuations.removeAll()
                s.callbacks.removeAll()
            }
            return Array(s.continuations.values)
        }
        watch.stop()
        continuations.forEach { $0.finish() }
    }

    /// An endless sequence of "store changed" events, each carrying the current token.
    public func changes() -> AsyncStream<HistoryToken> {
        let (stream, continuation) = AsyncStream.makeStream(of: HistoryToken.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        let stopped = state.withLock { s -> Bool in
            if !s.stopped { s.continuations[id] = continuation }
            return s.stopped
        }
        if stopped { continuation.finish() } else { startThread() }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    /// Calls `body` on a background thread after each change, until ``stop()``.
    public func onChange(_ body: @escaping @Sendable (HistoryToken) -> Void) {
        state.withLock { s in if !s.stopped { s.callbacks[UUID()] = body } }
        startThread()
    }

    /// The current token when it moved since the last report.
    private func check() throws -> HistoryToken? {
        try Self.check(container, state)
    }

    private static func check(_ container: Container, _ state: Protected<State>) throws -> HistoryToken? {
        let token = try container.currentToken()
        return state.withLock { s in
            guard token.value > s.last else { return nil }
            s.last = token.value
            return token
        }
    }

    private func startThread() {
        let start = state.withLock { s -> Bool in
            defer { s.threadStarted = true }
            return !s.threadStarted && !s.stopped
        }
        guard start else { return }
        // The thread holds the parts it needs, not the observer: dropping the observer stops it
        // (deinit wakes the wait), as ``stop()`` does.
        let (container, state, watch, interval) = (container, state, watch, pollInterval)
        let thread = Thread {
            while !state.withLock({ $0.stopped }) {
                if let token = try? Self.check(container, state) {
                    let (continuations, callbacks) = state.withLock {
                        (Array($0.continuations.values), Array($0.callbacks.values))
                    }
                    continuations.forEach { $0.yield(token) }
                    callbacks.forEach { $0(token) }
                }
                if watch.wait(timeout: interval) == .stopped { break }
            }
        }
        thread.name = "SharedStore.ChangeObserver"
        thread.start()
    }
}
