import Foundation
import Observation
import SharedStoreCore

extension LiveQuery where Element == Snapshot {
    /// A live query delivering snapshots.
    ///
    /// - Parameter consumer: its name in the token registry (its own position, held by nobody
    ///   else: two live queries need two names).
    ///
    /// - Throws: `.unknownEntity` for a request of an entity the model lacks, and the errors of
    ///   ``ViewContext/init(container:registry:consumer:author:entities:)``. The rest of the
    ///   request (key paths, values) is checked by its first run, in ``LiveQuery/next()``.
    public convenience init(container: Container, registry: TokenRegistry, consumer: String, request: FetchRequest)
        throws
    {
        try self.init(container: container, registry: registry, consumer: Optional(consumer), request: request)
    }

    /// A live query of this process alone, with no durable consumer of its own: its position is
    /// an ephemeral consumer (``TokenRegistry/registerEphemeral(_:)``), removed when the query
    /// goes and dropped by the next clean once the process is gone, however it ended — a dead
    /// process never holds history back.
    ///
    /// - Throws: like the query with a consumer name.
    public convenience init(container: Container, registry: TokenRegistry, request: FetchRequest) throws {
        try self.init(container: container, registry: registry, consumer: nil, request: request)
    }

    /// ``LiveQuery/next()`` as records of `R` (the request's entity is `R`'s).
    ///
    /// - Throws: like ``LiveQuery/next()``; `.validation` for an object `R` cannot decode.
    public func next<R: Record>(as type: R.Type) throws -> LiveResult<R>? {
        try next().map { try LiveResult($0, as: type) }
    }

    /// ``LiveQuery/results(pollInterval:)`` as records of `R`: the first result, then one per
    /// change. A `LiveQuery<R>` gives them without naming `R` again.
    ///
    /// For example:
    /// ```swift
    /// for try await result in query.records(Article.self) { show(result.records, result.diff) }
    /// ```
    public func records<R: Record>(_ type: R.Type, pollInterval: TimeInterval = 1)
        -> AsyncThrowingStream<LiveResult<R>, Error>
    {
        let results = results(pollInterval: pollInterval)
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    for try await result in results { continuation.yield(try LiveResult(result, as: type)) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}

extension LiveQuery where Element: Record {
    /// A live query delivering records of `Element` (`request` is of its entity).
    ///
    /// For example:
    /// ```swift
    /// let unread = try LiveQuery<Article>(
    ///     container: container, registry: registry, consumer: "UnreadList",
    ///     request: FetchRequest(Article.self, where: \Article.isRead == false))
    /// ```
    ///
    /// - Throws: `.invalidArgument` for a request of another entity; otherwise like the
    ///   snapshots' query.
    public convenience init(container: Container, registry: TokenRegistry, consumer: String, request: FetchRequest)
        throws
    {
        try self.init(container: container, registry: registry, consumer: Optional(consumer), request: request)
    }

    /// A live query of records with an ephemeral consumer of its own (see the snapshots' query):
    /// a dead process never holds history back.
    ///
    /// - Throws: `.invalidArgument` for a request of another entity; otherwise like the
    ///   snapshots' query.
    public convenience init(container: Container, registry: TokenRegistry, request: FetchRequest) throws {
        try self.init(container: container, registry: registry, consumer: nil, request: request)
    }
}

/// One result of a live query as records of `R`.
public typealias LiveRecords<R: Record> = LiveResult<R>

extension LiveResult where Element: Record {
    /// The records of the result (``LiveResult/objects``).
    public var records: [Element] { objects }

    /// A result of snapshots decoded as records of `Element`.
    ///
    /// - Throws: `.validation` naming the first object that cannot be decoded as `Element`.
    public init(_ result: LiveResult<Snapshot>, as type: Element.Type = Element.self) throws {
        self.init(
            objects: try Element.elements(from: result.objects), diff: result.diff, token: result.token,
            reloaded: result.reloaded)
    }
}

/// A live query's records for a `@MainActor` model or view: an `@Observable` object whose
/// ``records`` follow the store (the first result, then each change, in this process or any
/// other), with the last ``diff`` and the ``error`` that stopped it.
///
/// For example:
/// ```swift
/// @MainActor let unread = LiveRecordsModel(query)   // query: a LiveQuery<Article>
/// // SwiftUI, or withObservationTracking { unread.records } onChange: { … }
/// ```
@MainActor @Observable
public final class LiveRecordsModel<R: Record> {
    /// The records of the latest result (empty before the first).
    public private(set) var records: [R] = []
    /// How the result before became ``records``.
    public private(set) var diff: ResultDiff = .empty
    /// What stopped the query (nil while it follows the store).
    public private(set) var error: (any Error)?
    @ObservationIgnored private var task: Task<Void, Never>?

    /// Starts following `query`, a query of snapshots of `R`'s entity.
    public convenience init(_ query: LiveQuery<Snapshot>, as type: R.Type = R.self, pollInterval: TimeInterval = 1) {
        self.init(stream: query.records(type, pollInterval: pollInterval))
    }

    /// Starts following `query`.
    public convenience init(_ query: LiveQuery<R>, pollInterval: TimeInterval = 1) {
        self.init(stream: query.results(pollInterval: pollInterval))
    }

    private init(stream: AsyncThrowingStream<LiveResult<R>, Error>) {
        task = Task { [weak self] in
            do {
                for try await result in stream {
                    guard let self else { return }
                    self.records = result.records
                    self.diff = result.diff
                }
            } catch {
                self?.error = error
            }
        }
    }

    /// Stops following the store (also when the model goes).
    public func stop() {
        task?.cancel()
        task = nil
    }

    isolated deinit { task?.cancel() }
}
