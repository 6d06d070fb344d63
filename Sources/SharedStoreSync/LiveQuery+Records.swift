import Foundation
import Observation
import SharedStoreCore

/// One result of a live query as records: what ``LiveResult`` holds, decoded.
public struct LiveRecords<R: Record>: Sendable {
    /// The objects of the result, as records (each knows what it was read as, so that
    /// ``ObjectContext/update(_:)`` of one writes only what was changed).
    public let records: [R]
    /// How far the previous result became this one (empty for the first).
    public let diff: ResultDiff
    /// The store's token the result is read at (or after).
    public let token: HistoryToken
    /// The query ran again from scratch (its consumer's history had expired).
    public let reloaded: Bool

    /// `result` decoded as records of `R`.
    ///
    /// - Throws: `.validation` naming the first object that cannot be decoded as `R`.
    public init(_ result: LiveResult, as type: R.Type = R.self) throws {
        records = try R.records(from: result.objects)
        diff = result.diff
        token = result.token
        reloaded = result.reloaded
    }
}

extension LiveQuery {
    /// ``next()`` as records of `R` (the request's entity is `R`'s).
    ///
    /// - Throws: like ``next()``; `.validation` for an object `R` cannot decode.
    public func next<R: Record>(as type: R.Type) throws -> LiveRecords<R>? {
        try next().map { try LiveRecords($0, as: type) }
    }

    /// ``results(pollInterval:)`` as records of `R`: the first result, then one per change.
    ///
    /// For example:
    /// ```swift
    /// for try await result in query.records(Article.self) { show(result.records, result.diff) }
    /// ```
    public func records<R: Record>(_ type: R.Type, pollInterval: TimeInterval = 1)
        -> AsyncThrowingStream<LiveRecords<R>, Error>
    {
        let results = results(pollInterval: pollInterval)
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    for try await result in results { continuation.yield(try LiveRecords(result, as: type)) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}

/// A live query's records for a `@MainActor` model or view: an `@Observable` object whose
/// ``records`` follow the store (the first result, then each change, in this process or any
/// other), with the last ``diff`` and the ``error`` that stopped it.
///
/// For example:
/// ```swift
/// @MainActor let unread = LiveRecordsModel(query, as: Article.self)
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

    /// Starts following `query`.
    public init(_ query: LiveQuery, as type: R.Type = R.self, pollInterval: TimeInterval = 1) {
        let stream = query.records(type, pollInterval: pollInterval)
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
