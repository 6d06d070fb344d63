import Foundation

/// What one ``ViewContext/sync(batchSize:_:)`` did.
public struct SyncResult: Sendable, Hashable {
    /// Transactions of other authors merged (own transactions are merged but not counted).
    public let transactions: Int
    /// Objects inserted, updated or removed in the view.
    public let changedObjects: Int
    /// The consumer's token after the sync.
    public let token: HistoryToken
    /// The consumer's token had expired, was evicted or belonged to another store: the view was
    /// reloaded in full.
    public let expired: Bool
    /// The view was (re)loaded in full during this sync (first sync, or expired).
    public let reloaded: Bool
    /// The token the full load was read at, when the consumer's position moved to it (a first
    /// sync, or an expired one): transactions through it are in the view without being merged.
    public var reloadedAt: HistoryToken? = nil
}

/// The objects one process shows, kept in sync with the store through persistent history: the
/// view context of a Core Data target plus its history merger and token bookkeeping.
///
/// ``sync(batchSize:_:)`` fetches the history after the consumer's token, merges it, then advances
/// the token in the ``TokenRegistry``. The merge refreshes each touched object from the store,
/// so merging a transaction twice leaves the same view (invariant 5). Transactions of the
/// view's own author are merged (the view must show its own saves too) but not reported.
///
/// For example:
/// ```swift
/// let view = try ViewContext(container: container, registry: registry, consumer: "Widget")
/// try view.sync { transaction in print(transaction.token) }
/// let unread = view.objects(of: "Article").filter { $0["isRead"] == false }
/// ```
public final class ViewContext {
    public let container: Container
    public let registry: TokenRegistry
    public let consumer: String
    public let author: String
    public let entities: [String]
    public private(set) var objects: [ObjectID: Snapshot] = [:]
    public private(set) var token: HistoryToken?
    private var loaded = false

    /// Registers `consumer` in the registry (if it is not yet) and makes an empty view; the first
    /// ``sync(batchSize:_:)`` loads it.
    public init(container: Container, registry: TokenRegistry, consumer: String, author: String? = nil, entities: [String]? = nil) throws {
        for e in entities ?? [] where container.model.entity(named: e) == nil {
            throw StoreError(.unknownEntity, "unknown entity '\(e)' for view \(consumer)")
        }
        self.container = container
        self.registry = registry
        self.consumer = consumer
        self.author = author ?? consumer
        self.entities = entities ?? container.model.entities.map(\.name)
        try registry.register(consumer)
    }

    /// The view's objects of one entity, in id order.
    public func objects(of entity: String) -> [Snapshot] {
        objects.values.filter { $0.id.entity == entity }.sorted { $0.id < $1.id }
    }

    /// Merges everything committed since the consumer's token, then advances the token.
    ///
    /// Order of operations, each step safe against a crash of this process at any point:
    /// 1. read the consumer's token from the registry;
    /// 2. an evicted consumer, a token of another store or one whose history expired reloads
    ///    the view in full and resets the token (the explicit move back); a view not loaded in
    ///    this process yet is loaded in full first, keeping the token;
    /// 3. fetch the history after the token in batches and merge each batch;
    /// 4. only then advance the token in the registry. A crash between 3 and 4 merges the same
    ///    transactions again on restart, harmlessly (idempotent merge).
    ///
    /// - Parameter each: called for every merged transaction of another author, in token order.
    /// - Throws: ``StoreError`` when the store or the registry cannot be read or written.
    @discardableResult
    public func sync(batchSize: Int = 512, _ each: (HistoryTransaction) throws -> Void = { _ in }) throws -> SyncResult {
        let entry = try registry.consumer(consumer)
        var expired = false, reloaded = false
        var reloadedAt: HistoryToken?
        var changed = 0
        var start: HistoryToken
        if let entry, let stored = entry.token, stored.storeID == container.storeID, !entry.isEvicted {
            start = stored
            if !loaded {
                _ = try reload()
                reloaded = true
            }
        } else {
            // Evicted, foreign, or never synced: load in full; the first two are "expired".
            expired = entry?.isEvicted == true || (entry?.token.map { $0.storeID != container.storeID } ?? false)
            start = try reload()
            try registry.reset(consumer, to: start)
            reloaded = true
            reloadedAt = start
        }

        var merged = 0
        var last = start
        do {
            try container.history(HistoryRequest(start: .after(start), batchSize: batchSize)) { batch in
                changed += try merge(batch)
                for t in batch {
                    last = t.token
                    if t.author != author {
                        merged += 1
                        try each(t)
                    }
                }
            }
        } catch let error as StoreError where error.code == .historyExpired || error.code == .foreignToken {
            last = try reload()
            try registry.reset(consumer, to: last)
            token = last
            return SyncResult(transactions: merged, changedObjects: objects.count, token: last, expired: true, reloaded: true, reloadedAt: last)
        }
        // Also with nothing new: the advance records that the consumer is alive (eviction looks
        // at it). A consumer that was just reset to `start` needs no second write.
        if last != start || reloadedAt == nil {
            try registry.advance(consumer, to: last)
        }
        token = last
        return SyncResult(transactions: merged, changedObjects: changed, token: last, expired: expired, reloaded: reloaded, reloadedAt: reloadedAt)
    }

    /// Loads every tracked object and the current token from one consistent read.
    @discardableResult
    public func reload() throws -> HistoryToken {
        let (value, snapshots) = try container.read { c -> (Int64, [Snapshot]) in
            let value = try container.currentTokenValue(c)
            var all: [Snapshot] = []
            for e in entities { all += try container.fetch(FetchRequest(e), c) }
            return (value, all)
        }
        objects = Dictionary(uniqueKeysWithValues: snapshots.map { ($0.id, $0) })
        loaded = true
        let t = HistoryToken(storeID: container.storeID, value: value)
        token = t
        return t
    }

    /// Applies a batch: every touched object of a tracked entity is read again from the store
    /// (or removed when it is gone). Returns how many objects of the view changed.
    private func merge(_ batch: [HistoryTransaction]) throws -> Int {
        var touched = Set<ObjectID>()
        for t in batch {
            for change in t.changes where entities.contains(change.objectID.entity) { touched.insert(change.objectID) }
        }
        guard !touched.isEmpty else { return 0 }
        let fresh = try container.read { c -> [ObjectID: Snapshot?] in
            var out: [ObjectID: Snapshot?] = [:]
            for id in touched {
                out[id] = try container.snapshot(try container.model.entity(id.entity), primaryKey: id.primaryKey, c)
            }
            return out
        }
        var changed = 0
        for (id, snapshot) in fresh {
            if let snapshot {
                if objects[id] != snapshot { objects[id] = snapshot; changed += 1 }
            } else if objects.removeValue(forKey: id) != nil {
                changed += 1
            }
        }
        return changed
    }
}

extension ViewContext {
    /// Syncs now, then after every change `observer` reports, until `duration` seconds pass,
    /// `count` transactions of other authors have been merged, or `shouldStop` says so (checked
    /// after every wake-up; ``ChangeObserver/stop()`` wakes the wait at once).
    ///
    /// - Returns: how many transactions of other authors were merged.
    @discardableResult
    public func watch(observer: ChangeObserver, duration: TimeInterval? = nil, count: Int? = nil,
                      shouldStop: () -> Bool = { false }, afterSync: (SyncResult) throws -> Void = { _ in },
                      _ each: (HistoryTransaction) throws -> Void) throws -> Int {
        let deadline = duration.map { Date().addingTimeInterval($0) }
        var merged = 0
        func done() -> Bool {
            if let count, merged >= count { return true }
            if let deadline, Date() >= deadline { return true }
            return shouldStop()
        }
        func syncOnce() throws {
            let result = try sync { t in
                if let count, merged >= count { return }
                merged += 1
                try each(t)
            }
            try afterSync(result)
        }
        try syncOnce()
        while !done() {
            let wait = deadline.map { max(0, $0.timeIntervalSinceNow) } ?? observer.pollInterval
            if try observer.next(timeout: min(wait, observer.pollInterval)) != nil {
                try syncOnce()
            }
        }
        return merged
    }
}
