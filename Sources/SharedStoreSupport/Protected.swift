import Foundation

/// A value shared between threads behind a lock, in a class so that closures (a thread's body,
/// a callback) can hold it.
///
/// An `NSLock` (a pthread mutex) rather than `Synchronization.Mutex`: on Linux the latter waits
/// on a futex directly, which ThreadSanitizer cannot see, so `Scripts/sanitize.sh` reported
/// races on values it protects (false ones, but they would hide a true one).
package final class Protected<Value>: @unchecked Sendable {
    private let lock = NSLock()
    /// Reached only under `lock`, which already makes each access exclusive: Swift's run-time
    /// exclusivity check (about 75 instructions) is skipped.
    @exclusivity(unchecked) private var value: Value

    /// A lock around `value`.
    package init(_ value: Value) { self.value = value }

    /// Runs `body` with the value while holding the lock, and returns what it returns; the lock is
    /// released when `body` throws too. `body` must not call `withLock` on the same instance (the lock
    /// is not recursive).
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
