import Foundation
import SharedStore
import Synchronization

/// Signals caught by a handler of the process's own, which only writes the signal's number to a
/// pipe; one thread reads the pipe and calls whoever subscribed (the self-pipe way).
///
/// Why not a dispatch signal source: on Linux a source's handler is installed later, on
/// libdispatch's manager thread, after `resume()` returns. A signal in that window either ended
/// the process, or, where the caller had set the signal to be ignored meanwhile (so that it would
/// not), was dropped: a `storectl mirror --follow` asked to stop right after it started then ran
/// on for good (the mirror's randomized test saw one in about three 15-second runs with a
/// restore). Here the handler is in place when ``subscribe(_:_:)`` returns, and a signal that
/// comes before anyone reads it waits in the pipe.
enum ProcessSignals {
    private struct Subscriber {
        let signals: Set<Int32>
        let handler: @Sendable (Int32) -> Void
    }

    private struct State {
        var readEnd: Int32 = -1
        /// The signals caught so far.
        var caught: Set<Int32> = []
        var subscribers: [Int: Subscriber] = [:]
        var next = 0
    }

    private static let state = Mutex(State())

    /// Calls `handler` (on the signal thread, one signal at a time) for each of `signals` that
    /// arrives from now until the subscription is cancelled.
    ///
    /// - Throws: ``StoreError`` `.storage` when the pipe cannot be made.
    static func subscribe(_ signals: [Int32], _ handler: @escaping @Sendable (Int32) -> Void) throws
        -> SignalSubscription
    {
        try state.withLock { s in
            if s.readEnd < 0 {
                var ends: [Int32] = [0, 0]
                guard pipe(&ends) == 0 else {
                    throw StoreError(.storage, "cannot make a pipe: \(String(cString: strerror(errno)))")
                }
                for fd in ends { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
                // The handler never blocks: a full pipe already wakes the reader.
                _ = fcntl(ends[1], F_SETFL, O_NONBLOCK)
                s.readEnd = ends[0]
                signalWriteEnd = ends[1]
                let readEnd = ends[0]
                Thread {
                    unblock(signals)
                    readSignals(from: readEnd)
                }.start()
            }
            for sig in signals where s.caught.insert(sig).inserted {
                var action = sigaction()
                action.__sigaction_handler.sa_handler = onSignal
                action.sa_flags = SA_RESTART
                sigemptyset(&action.sa_mask)
                sigaction(sig, &action, nil)
            }
            // A process may start with them blocked (a parent's thread that blocked them
            // spawned it): blocked, they would wait for good. Unblocked on this thread, a signal
            // already pending comes now.
            unblock(signals)
            let id = s.next
            s.next += 1
            s.subscribers[id] = Subscriber(signals: Set(signals), handler: handler)
            return SignalSubscription(id: id)
        }
    }

    /// Ends subscription `id`. The handler stays: a second Ctrl-C or SIGTERM while the process
    /// winds down after its loop is caught and ignored, not its death (a review sent one every
    /// millisecond and saw most watchers die by it). Every subscriber ends its process soon
    /// after its loop.
    static func cancel(_ id: Int) {
        _ = state.withLock { s in s.subscribers.removeValue(forKey: id) }
    }

    /// Lets `signals` be delivered to the calling thread.
    private static func unblock(_ signals: [Int32]) {
        var set = sigset_t()
        sigemptyset(&set)
        for sig in signals { sigaddset(&set, sig) }
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }

    private static func readSignals(from fd: Int32) {
        while true {
            var byte: UInt8 = 0
            let n = read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            guard n == 1 else { return }
            let sig = Int32(byte)
            let handlers = state.withLock { s in s.subscribers.values.filter { $0.signals.contains(sig) }.map(\.handler)
            }
            for handler in handlers { handler(sig) }
        }
    }
}

/// The pipe's write end, for the signal handler (set before any handler is installed).
nonisolated(unsafe) private var signalWriteEnd: Int32 = -1

/// The signal handler: one async-signal-safe write of the signal's number.
private func onSignal(_ sig: Int32) {
    let saved = errno
    var byte = UInt8(truncatingIfNeeded: sig)
    _ = write(signalWriteEnd, &byte, 1)
    errno = saved
}

/// A subscription to signals (``ProcessSignals/subscribe(_:_:)``).
public struct SignalSubscription: Sendable {
    let id: Int
    /// Stops calling the subscriber's handler.
    public func cancel() { ProcessSignals.cancel(id) }
}
