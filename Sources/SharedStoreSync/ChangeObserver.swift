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
/// ``onChange(_:onFailure:)``. When the store fails for good — another process migrated it to a newer
/// model (`.modelOutdated`), its group directory was removed — `next(timeout:)` throws the
/// error, every stream ends with it, and callbacks are no longer called: an observer never goes
/// silent while its store is gone.
///
/// For example:
/// ```swift
/// let observer = try ChangeObserver(container: container)
/// for try await token in observer.changes() { try view.sync() }
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
        /// What ended the observation when the store failed (the streams ended with it).
        var failure: (any Error)?
        var continuations: [UUID: AsyncThrowingStream<HistoryToken, any Error>.Continuation] = [:]
        var callbacks: [UUID: @Sendable (HistoryToken) -> Void] = [:]
        var failureCallbacks: [UUID: @Sendable (any Error) -> Void] = [:]
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
    /// first or the observer is stopped. Not to be mixed with ``changes()`` or ``onChange(_:onFailure:)``.
    ///
    /// - Throws: what reading the store throws: `.modelOutdated` once another process migrated
    ///   it, `.fileAccess` once its group directory or store file was removed.
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
        let continuations = state.withLock { s -> [AsyncThrowingStream<HistoryToken, any Error>.Continuation] in
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

    /// A sequence of "store changed" events, each carrying the current token: endless until
    /// ``stop()`` ends it, or until the store fails for good, which ends it with the error.
    ///
    /// - Throws: (while iterating) `.modelOutdated` once another process migrated the store,
    ///   `.fileAccess` once its group directory or store file was removed, or what else reading
    ///   the store threw that waiting cannot mend (a busy store is tried again at the next wake).
    public func changes() -> AsyncThrowingStream<HistoryToken, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(
            of: HistoryToken.self, throwing: (any Error).self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        let (stopped, failure) = state.withLock { s -> (Bool, (any Error)?) in
            if !s.stopped { s.continuations[id] = continuation }
            return (s.stopped, s.failure)
        }
        if stopped { continuation.finish(throwing: failure) } else { startThread() }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    /// Calls `body` on a background thread after each change, until ``stop()`` or until the store
    /// fails for good; then `onFailure`, once, with what ended it (`.modelOutdated`, a removed
    /// group, …; also ``failure``). Registered after such a failure, `onFailure` is called at once.
    public func onChange(
        _ body: @escaping @Sendable (HistoryToken) -> Void, onFailure: (@Sendable (any Error) -> Void)? = nil
    ) {
        let failed = state.withLock { s -> (any Error)? in
            if s.stopped { return s.failure }
            let id = UUID()
            s.callbacks[id] = body
            if let onFailure { s.failureCallbacks[id] = onFailure }
            return nil
        }
        if let failed {
            onFailure?(failed)
            return
        }
        startThread()
    }

    /// What ended the observation when the store failed for good (nil: it did not).
    public var failure: (any Error)? { state.withLock { $0.failure } }

    /// The current token when it moved since the last report.
    private func check() throws -> HistoryToken? {
        try Self.check(container, state)
    }

    private static func check(_ container: Container, _ state: Protected<State>) throws -> HistoryToken? {
        try checkStoreFile(container)
        let token = try container.currentToken()
        return state.withLock { s in
            guard token.value > s.last else { return nil }
            s.last = token.value
            return token
        }
    }

    /// Fails when the store's file is gone (its group directory removed, say): the open
    /// connections would go on reading the unlinked file, and no save would ever signal again.
    private static func checkStoreFile(_ container: Container) throws {
        guard !container.options.inMemory else { return }
        var st = stat()
        guard lstat(container.storePath, &st) != 0, errno == ENOENT else { return }
        throw StoreError(
            .fileAccess,
            "the store \(TextSafety.visible(container.storePath)) was removed while this process observed it "
                + "(its group directory is gone?); open the group again")
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
                do {
                    if let token = try Self.check(container, state) { Self.report(token, state) }
                } catch let error as StoreError where error.code == .busy {
                    // Locked past the busy timeout: the next wake-up tries again.
                } catch {
                    Self.fail(error, state)
                    break
                }
                if watch.wait(timeout: interval) == .stopped { break }
            }
        }
        thread.name = "SharedStore.ChangeObserver"
        thread.start()
    }

    /// Hands `token` to every stream and callback.
    private static func report(_ token: HistoryToken, _ state: Protected<State>) {
        let (continuations, callbacks) = state.withLock { (Array($0.continuations.values), Array($0.callbacks.values)) }
        continuations.forEach { $0.yield(token) }
        callbacks.forEach { $0(token) }
    }

    /// Ends the observation after the store failed: every stream ends with `error`, callbacks
    /// are dropped after their `onFailure` heard it, a later ``changes()`` ends with it at once.
    private static func fail(_ error: any Error, _ state: Protected<State>) {
        let (continuations, failureCallbacks) = state.withLock { s in
            s.stopped = true
            s.failure = error
            defer {
                s.continuations.removeAll()
                s.callbacks.removeAll()
                s.failureCallbacks.removeAll()
            }
            return (Array(s.continuations.values), Array(s.failureCallbacks.values))
        }
        continuations.forEach { $0.finish(throwing: error) }
        failureCallbacks.forEach { $0(error) }
    }
}
