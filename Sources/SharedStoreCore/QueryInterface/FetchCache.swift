import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// The SQL of recent fetch requests, by shape, kept by a container: a program runs the same
/// requests again and again (a widget's summary, a live query, a page of a list), or the same
/// request with other values (a date range, a prefix as it is typed), and compiling one costs more
/// than running it on a small result. A request of a known ``FetchShape`` only binds its values.
///
/// One lock: a fetch that finds its request (the last one) or its shape takes it once.
/// Bounded: cleared when full.
final class FetchCache: Sendable {
    private struct State {
        var entries: [FetchShape: CompiledQuery] = [:]
        /// The request compiled or found last, with its bindings: compared, not hashed (the
        /// common case is the same request run again).
        var last: (request: FetchRequest, unordered: Bool, query: CompiledQuery)?
    }

    private enum Found {
        case request(CompiledQuery)
        case shape(CompiledQuery)
    }

    private let state = Protected(State())
    /// How many shapes are kept before the cache is cleared.
    private let capacity: Int

    /// An empty cache holding at most `capacity` shapes.
    init(capacity: Int = 256) { self.capacity = capacity }

    /// The compiled form of `request`: the last one when it is the same request; the SQL kept for
    /// its shape with the bindings `bind` makes for its values; else what `compile` makes (kept
    /// for next time; compiled outside the lock, so that other fetches do not wait for it).
    ///
    /// `unordered`: the SQL has no ORDER BY (a fetch that sorts its rows by key itself).
    ///
    /// - Throws: what `compile` or `bind` throws (nothing is kept then).
    func query(
        _ request: FetchRequest, unordered: Bool, compile: () throws -> CompiledQuery,
        bind: () throws -> [SQLValue]
    ) rethrows -> CompiledQuery {
        let shape = FetchShape(request: request, unordered: unordered)
        let found = state.withLock { s -> Found? in
            if let last = s.last, last.unordered == unordered, last.request == request { return .request(last.query) }
            return s.entries[shape].map(Found.shape)
        }
        let compiled: CompiledQuery
        switch found {
        case .request(let known):
            return known
        case .shape(let known):
            compiled = CompiledQuery(entity: known.entity, sql: known.sql, bindings: try bind())
            state.withLock { $0.last = (request, unordered, compiled) }
        case nil:
            compiled = try compile()
            state.withLock { s in
                if s.entries.count >= capacity { s.entries.removeAll(keepingCapacity: true) }
                s.entries[shape] = compiled
                s.last = (request, unordered, compiled)
            }
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
