import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// A read connection of its own that holds one snapshot of the store open: what a pinned context
/// reads (Core Data's query generations). The snapshot keeps the WAL from being checkpointed past
/// it while it is held.
final class PinnedRead {
    private let guarded: ConnectionGuard
    private let connection: SQLiteConnection
    /// When the snapshot was taken.
    let since = Date()

    init(_ container: Container) throws {
        guard !container.options.inMemory else {
            throw StoreError(.invalidArgument, "a context of an in-memory store cannot be pinned")
        }
        let path = container.storePath
        let timeout = Int32(min(container.options.busyTimeout, 3600) * 1000)
        connection = try StoreError.wrap(path: path) {
            let c = try SQLiteConnection(path: path, create: false, busyTimeoutMilliseconds: timeout)
            try SchemaSQL.makeQueryOnly(c)
            try SchemaSQL.defineFunctions(c)
            try c.beginPinnedRead()
            return c
        }
        guarded = ConnectionGuard(connection)
    }

    /// Runs `body` on the pinned snapshot.
    func read<T>(_ container: Container, _ body: (TransactionSQL) throws -> T) throws -> T {
        let path = container.storePath
        return try guarded.withConnection { c in
            try StoreError.wrap(path: path) { try body(TransactionSQL(c: c, container: container)) }
        }
    }

    /// Moves the snapshot to the store as it is now (after the context's own save).
    func renew() throws {
        try guarded.withConnection { c in
            c.endRead()
            try StoreError.wrap(path: c.path) { try c.beginPinnedRead() }
        }
    }

    deinit { connection.endRead() }
}

extension ObjectContext {
    /// Pins this context to the store as it is now (Core Data's query generations): every fetch,
    /// count and read of an object sees that one snapshot, across several calls, while other
    /// processes write; its own saves move it to the store as it is after them. ``unpin()`` (or
    /// the context's end) releases it. A pin keeps the WAL from being checkpointed past it: hold
    /// it for a screen's worth of reads, not for hours.
    ///
    /// For example:
    /// ```swift
    /// try context.pin()
    /// let count = try context.count(FetchRequest("Article"))
    /// let page = try context.fetch(FetchRequest("Article", limit: 50))   // the same generation
    /// context.unpin()
    /// ```
    ///
    /// - Throws: `.invalidArgument` for an in-memory store; ``StoreError`` when the store cannot
    ///   be opened for reading.
    public func pin() throws {
        checkOwner()
        guard pinned == nil else { return }
        pinned = try PinnedRead(container)
    }

    /// Releases the snapshot ``pin()`` took: later reads see the store as it is then.
    public func unpin() {
        checkOwner()
        pinned = nil
    }

    /// Whether the context is pinned to one snapshot (``pin()``).
    public var isPinned: Bool { pinned != nil }

    /// Runs `body` in one read of the store: on the pinned snapshot, or a read transaction.
    func readStore<T>(_ body: (TransactionSQL) throws -> T) throws -> T {
        if let pinned { return try pinned.read(container, body) }
        return try container.read(body)
    }

    /// Runs a read of one statement: on the pinned snapshot, or outside a transaction.
    func readStatement<T>(_ body: (TransactionSQL) throws -> T) throws -> T {
        if let pinned { return try pinned.read(container, body) }
        return try container.readOneStatement(body)
    }
}

extension Container {
    /// ``read(_:)`` with the context pinned to one snapshot for the whole of `body` (``ObjectContext/pin()``).
    ///
    /// - Throws: what `body` throws, or what ``ObjectContext/pin()`` throws.
    public func read<T: Sendable>(pinned: Bool, _ body: @escaping @Sendable (ObjectContext) throws -> T) async throws
        -> T
    {
        try await offExecutor {
            let context = self.newContext()
            if pinned { try context.pin() }
            defer { context.unpin() }
            return try body(context)
        }
    }
}
