import Dispatch
import Foundation
import SharedStore
import Synchronization

extension Invocation {
    /// Runs a target's `watch`: syncs on every change until `--for` seconds, `--count`
    /// transactions, or SIGINT/SIGTERM — whichever comes first — then exits 0 with the token
    /// saved (the view advances it after every merge).
    func watch(
        consumer: String, each: @escaping (HistoryTransaction) throws -> Void,
        afterSync: @escaping (SyncResult, ViewContext) throws -> Void = { _, _ in }
    ) throws {
        let seconds = try arguments.seconds("for", in: 0...31_536_000)
        let count = try arguments.integer("count", in: 1...Int.max)
        // A consumer that loads no object: the watch prints transactions or re-reads a summary.
        let view = try ViewContext(container: container(), registry: registry(), consumer: consumer, entities: [])
        let observer = try ChangeObserver(container: container())
        let stop = StopFlag()
        let sources = stop.setOnTerminationSignals { observer.stop() }
        defer { sources.forEach { $0.cancel() } }
        try view.watch(
            observer: observer, duration: seconds, count: count, shouldStop: { stop.isSet },
            afterSync: { result in
                if let warning = result.registryWarning {
                    FileHandle.standardError.write(Data("warning: \(TextSafety.visible(warning))\n".utf8))
                }
                try afterSync(result, view)
            }, each)
    }
}

/// The watch flags of main-app and widget.
let watchOptions: [Option] = [
    .value("for", "SECONDS", "stop after this many seconds"),
    .value("count", "N", "stop after N merged transactions"),
]

/// Set once by a signal handler, read by the watch loop.
public final class StopFlag: Sendable {
    private let value = Atomic<Bool>(false)
    public init() {}
    public func set() { value.store(true, ordering: .relaxed) }
    public var isSet: Bool { value.load(ordering: .relaxed) }

    /// Sets this flag, then runs `wake` (to end the loop's wait), on SIGINT or SIGTERM from now
    /// on: the process ends its loop and exits 0 instead of dying by the signal. Cancel the
    /// returned sources when the loop is over.
    ///
    /// The sources come first: on Linux a resumed signal source installs its own handler. Setting
    /// the signals to be ignored before that (as on Apple platforms) let a signal that came in
    /// between be dropped, and the process then ran on for good (a follower stopped right after
    /// it started). A signal before the sources are up ends the process by its default action.
    public func setOnTerminationSignals(_ wake: @escaping @Sendable () -> Void) -> [DispatchSourceSignal] {
        let sources = [SIGINT, SIGTERM].map { sig -> DispatchSourceSignal in
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler {
                self.set()
                wake()
            }
            source.resume()
            return source
        }
        // Where a source does not take the signal over itself, its default action must not end
        // the process before the source sees it.
        for sig in [SIGINT, SIGTERM] {
            var action = sigaction()
            if sigaction(sig, nil, &action) == 0, action.__sigaction_handler.sa_handler == nil {
                signal(sig, SIG_IGN)
            }
        }
        return sources
    }
}
