import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// The SQL and bindings of recent fetch requests, kept by a container: a program runs the same
/// requests again and again (a widget's summary, a live query, a page of a list), and compiling
/// one costs more than running it on a small result.
///
/// One lock: a fetch that finds its request (the last one, or one in the cache) takes it once.
/// Bounded: cleared when full.
final class FetchCache: Sendable {
    private struct State {
        var entries: [FetchRequest: CompiledQuery] = [:]
        /// The request compiled or found last: compared, not hashed (the common case is the
        /// same request run again).
        var last: (request: FetchRequest, query: CompiledQuery)?
    }

    private let state = Protected(State())
    /// How many requests are kept before the cache is cleared.
    private let capacity: Int

    /// An empty cache holding at most `capacity` requests.
    init(capacity: Int = 256) { self.capacity = capacity }

    /// The compiled form of `request`: the one kept, or what `compile` makes (kept for next time;
    /// compiled outside the lock, so that other fetches do not wait for it).
    ///
    /// - Throws: what `compile` throws (nothing is kept then).
    func query(_ request: FetchRequest, compile: () throws -> CompiledQuery) rethrows -> CompiledQuery {
        let found = state.withLock { s -> CompiledQuery? in
            if let last = s.last, last.request == request { return last.query }
            guard let known = s.entries[request] else { return nil }
            s.last = (request, known)
            return known
        }
        if let found { return found }
        let compiled = try compile()
        state.withLock { s in
            if s.entries.count >= capacity { s.entries.removeAll(keepingCapacity: true) }
            s.entries[request] = compiled
            s.last = (request, compiled)
        }
        return compiled
    }
}

/// A fetch request's SQL and bindings, and its entity's index.
struct CompiledQuery: Sendable {
    let entity: Int
    let sql: String
    let bindings: [SQLValue]
}
