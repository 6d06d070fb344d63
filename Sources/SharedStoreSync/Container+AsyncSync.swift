import Foundation
import SharedStoreCore

extension Container {
    /// Syncs consumer `consumer` without blocking the caller's executor: merges the history
    /// other authors saved after its token — handing each transaction to `each`, on a thread of
    /// the store's own — and advances its token. Loads no object: a program reads what it shows
    /// through queries (``read(_:)``) or a ``LiveQuery``.
    ///
    /// - Throws: like ``ViewContext/sync(batchSize:_:)``: ``StoreError`` when the store or the
    ///   registry cannot be read, or what `each` throws.
    public func sync(
        consumer: String, registry: TokenRegistry,
        _ each: @escaping @Sendable (HistoryTransaction) throws -> Void = { _ in }
    ) async throws -> SyncResult {
        try await offStore {
            let view = try ViewContext(container: self, registry: registry, consumer: consumer, entities: [])
            return try view.sync(each)
        }
    }
}

/// Runs `body` on a dispatch queue of the sync layer's own and resumes the caller with its result.
private let syncQueue = DispatchQueue(label: "sharedstore.sync", qos: .userInitiated, attributes: .concurrent)

private func offStore<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        syncQueue.async { continuation.resume(with: Result { try body() }) }
    }
}
