import Dispatch
import Foundation

/// The work of the async entry points runs here, off the Swift concurrency pool: a save or a
/// fetch blocks on SQLite (a lock, a disk flush), which must never hold up the caller's executor.
let storeQueue = DispatchQueue(label: "sharedstore.store", qos: .userInitiated, attributes: .concurrent)

/// Runs `body` on the store queue and resumes the caller with its result.
func offExecutor<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        storeQueue.async { continuation.resume(with: Result { try body() }) }
    }
}

extension Container {
    /// Core Data's `performBackgroundTask`: `body` gets a new context writing as `author`, on a
    /// thread of the store's own; its changes are saved when it returns (one transaction), and
    /// what it returns comes back. The context never leaves the closure (it is not Sendable);
    /// snapshots and ids do.
    ///
    /// For example:
    /// ```swift
    /// let id = try await container.write(author: "MainApp") { context in
    ///     try context.insert("Article", ["title": "Hello", "url": "https://swift.org"])
    /// }
    /// ```
    /// - Returns: what `body` returned, with the temporary ids it holds replaced by the saved ones
    ///   when it is an id, or an array, a set or a dictionary (its values) of ids.
    ///
    /// - Throws: what `body` throws, or what ``ObjectContext/save()`` throws; either way nothing
    ///   is saved.
    public func write<T: Sendable>(
        author: String, name: String? = nil, _ body: @escaping @Sendable (ObjectContext) throws -> T
    ) async throws -> T {
        try await offExecutor {
            let context = self.newContext(name: name, author: author)
            let result = try body(context)
            let saved = try context.save()
            return Self.permanent(result, saved)
        }
    }

    /// `result` with the temporary ids the save replaced made permanent: an id, or the ids of an
    /// array (of ids or optional ids), a set, or a dictionary's values, whatever its keys
    /// (anything else — a tuple, a nested array, a record — comes back as it was).
    static func permanent<T>(_ result: T, _ saved: SaveResult) -> T {
        guard saved.insertedAny else { return result }
        func map(_ id: ObjectID) -> ObjectID { saved.permanentID(for: id) }
        let mapped: Any? =
            switch result {
            case let id as ObjectID: map(id)
            case let ids as [ObjectID]: ids.map(map)
            case let ids as [ObjectID?]: ids.map { $0.map(map) }
            case let ids as Set<ObjectID>: Set(ids.map(map))
            case let ids as [AnyHashable: ObjectID]: ids.mapValues(map)
            default: nil
            }
        return mapped.flatMap { $0 as? T } ?? result
    }

    /// Reads on a thread of the store's own: `body` gets a new context (its changes are not
    /// saved) and what it returns comes back.
    ///
    /// - Throws: what `body` throws (the errors of ``ObjectContext/fetch(_:)`` and the other
    ///   reads).
    public func read<T: Sendable>(_ body: @escaping @Sendable (ObjectContext) throws -> T) async throws -> T {
        try await offExecutor { try body(self.newContext()) }
    }

    /// ``fetchHistory(_:)`` without blocking the caller's executor (another name, so that
    /// async code may still call the blocking one).
    ///
    /// - Throws: like ``fetchHistory(_:)``.
    public func history(_ request: HistoryRequest) async throws -> [HistoryTransaction] {
        try await offExecutor { try self.fetchHistory(request) }
    }
}
