import Synchronization

/// A value shared between threads behind a `Mutex`, in a class so that closures (a thread's
/// body, a callback) can hold it.
public final class Protected<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    public init(_ value: Value) { mutex = Mutex(value) }

    public func withLock<Result: Sendable>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try mutex.withLock { value in try body(&value) }
    }
}
