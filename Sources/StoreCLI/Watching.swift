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
        let signals = try stop.setOnTerminationSignals { observer.stop() }
        defer { signals.cancel() }
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
    /// returned subscription when the loop is over. A signal before this call ends the process by
    /// its default action; one after it is never lost (``ProcessSignals``).
    ///
    /// - Throws: ``StoreError`` `.storage` when the process cannot catch signals (no pipe).
    public func setOnTerminationSignals(_ wake: @escaping @Sendable () -> Void) throws -> SignalSubscription {
        try ProcessSignals.subscribe([SIGINT, SIGTERM]) { _ in
            self.set()
            wake()
        }
    }
}
