import Foundation

/// Core Data's `-com.apple.CoreData.ConcurrencyDebug 1` for SharedStore: with
/// `SHAREDSTORE_CONCURRENCY_DEBUG=1` in its environment, a process stops with a message naming
/// the context and the call when a context is used from a thread or task other than the one it
/// was made on (made on the main thread: that thread, whichever main-actor task uses it; made in
/// another task: that task; made outside one: that thread). It catches uses made through
/// `@unchecked Sendable`, `nonisolated(unsafe)` or C callbacks. A context handed whole to another
/// task (a `sending` transfer, which Swift 6 allows) is stopped too: do not run such code with the
/// switch on.
///
/// Off, a context's use costs one test of a constant: the switch is read once per process.
/// Contexts the library confines by a lock of its own (a ``LiveQuery``'s) are not checked.
enum ConcurrencyDebug {
    /// Whether the switch is on (read once).
    static let isOn: Bool = getenv("SHAREDSTORE_CONCURRENCY_DEBUG").map { String(cString: $0) == "1" } ?? false

    /// Where a context may be used: its task, or its thread when it was made outside a task.
    struct Owner: Equatable, CustomStringConvertible {
        let task: Int?
        let thread: UInt

        static var current: Owner {
            let thread = UInt(bitPattern: Int(bitPattern: pthread_self()))
            // On the main thread, the main actor's: any of its tasks may use the context.
            if Thread.isMainThread { return Owner(task: nil, thread: thread) }
            return Owner(task: withUnsafeCurrentTask { $0?.hashValue }, thread: thread)
        }

        /// Whether `other` (where a call runs) may use a context of this owner.
        func admits(_ other: Owner) -> Bool { task.map { $0 == other.task } ?? (thread == other.thread) }

        var description: String {
            task.map { "task \(String($0, radix: 16))" } ?? "thread \(String(thread, radix: 16))"
        }
    }

    /// Stops the process: `context` was used in `call` from `here`, not from `owner`.
    static func trap(_ context: String, _ call: StaticString, owner: Owner, here: Owner) -> Never {
        let message =
            "SHAREDSTORE_CONCURRENCY_DEBUG: context \(context) used in \(call) from \(here), "
            + "but it belongs to \(owner) (a context is confined to the task or thread that made it)\n"
        _ = Array(message.utf8).withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        // The switch asks for this stop, as Core Data's does: the misuse is the caller's bug.
        preconditionFailure(message)
    }
}
