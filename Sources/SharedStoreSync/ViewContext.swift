import Foundation
import SharedStoreCore
import SharedStoreLMDB
import SharedStoreSupport

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
    /// The consumer's position was given up and the view loaded in full (its first sync ever,
    /// expired, evicted, reset, store replaced or restored, registry repaired). A process's first
    /// sync from a valid position reads the view too, but merges on from that position: not a reload.
    public let reloaded: Bool
    /// The token the full load was read at, when the consumer's position moved to it (a first
    /// sync, or an expired one): transactions through it are in the view without being merged.
    public var reloadedAt: HistoryToken? = nil
    /// Set when the merge succeeded but the registry could not record the new position (busy,
    /// damaged, full): the view is right; the next sync merges the same transactions again.
    public var registryWarning: String? = nil
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
    /// The container whose store the view follows.
    public let container: Container
    /// The registry that holds the view's consumer token.
    public let registry: TokenRegistry
    /// The view's consumer name in the registry.
    public let consumer: String
    /// The author whose transactions are this view's own: merged, not reported (the consumer's
    /// name unless given).
    public let author: String
    /// The entities the view holds (every entity of the model unless given).
    public let entities: [String]
    /// The view's objects by id, as of its last sync.
    public private(set) var objects: [ObjectID: Snapshot] = [:]
    /// The position the view has merged through (nil before its first sync).
    public private(set) var token: HistoryToken?
    private var loaded = false
    /// A registry write that failed before the first sync, reported by it.
    private var pendingWarning: String?

    /// Registers `consumer` in the registry (if it is not yet) and makes an empty view; the first
    /// ``sync(batchSize:_:)`` loads it. First checks the store against the registry
    /// (``TokenRegistry/reconcile(_:)``): a store put back to an older copy never hands out a
    /// token again.
    ///
    /// - Throws: `.unknownEntity` for an entity in `entities` that the model lacks,
    ///   `.registryDamaged` for a damaged or lost registry, and the errors of
    ///   ``TokenRegistry/reconcile(_:)``. A registration that fails for another reason (busy, full)
    ///   does not throw: the first sync reports it.
    public init(
        container: Container, registry: TokenRegistry, consumer: String, author: String? = nil,
        entities: [String]? = nil
    ) throws {
        for e in entities ?? [] where container.model.entity(named: e) == nil {
            throw StoreError(.unknownEntity, "unknown entity '\(e)' for view \(consumer)")
        }
        self.container = container
        self.registry = registry
        self.consumer = consumer
        self.author = author ?? consumer
        self.entities = entities ?? container.model.entities.map(\.name)
        try registry.reconcile(container)
        // Registering is a write the view does not depend on (a full disk, a busy registry): the
        // first sync of an unregistered consumer loads in full and registers again.
        do { try registry.register(consumer) } catch let error as StoreError where error.code != .registryDamaged {
            pendingWarning = "\(consumer) could not register in the token registry: \(error.message)"
        }
    }

    /// The view's objects of one entity, in id order.
    public func objects(of entity: String) -> [Snapshot] {
        objects.values.filter { $0.id.entity == entity }.sorted { $0.id < $1.id }
    }

    /// Merges everything committed since the view's position, then advances the consumer's token.
    ///
    /// Order of operations, each step safe against a crash of this process at any point:
    /// 1. read the consumer's entry from the registry;
    /// 2. an evicted consumer, one removed or reset, a token of another store, or a first sync
    ///    after the registry was repaired reloads the view in full and resets the token (the
    ///    explicit move back); a view not loaded in this process yet is loaded in full first,
    ///    then merges after the stored token;
    /// 3. fetch the history after the view's own position in batches and merge each batch. The
    ///    position is the view's own, not the registry's: two processes of one consumer each
    ///    merge every transaction (the registry keeps the highest position, for the cleaner; an
    ///    instance left behind by a clean is told expired and reloads, never skips silently);
    ///    a position lost in a restore, or one whose history was deleted, reloads in full;
    /// 4. only then advance the token in the registry. A crash between 3 and 4 merges the same
    ///    transactions again on restart, harmlessly (idempotent merge).
    ///
    /// - Parameter each: called for every merged transaction of another author, in token order.
    /// - Throws: ``StoreError`` when the store or the registry cannot be read. A registry that
    ///   cannot record the new position is reported in ``SyncResult/registryWarning``.
    @discardableResult
    public func sync(batchSize: Int = 512, _ each: (HistoryTransaction) throws -> Void = { _ in }) throws -> SyncResult
    {
        let (start, expired, reloadedAt, firstWarning) = try startPosition()
        var warning = firstWarning
        let reloaded = reloadedAt != nil
        var changed = 0

        var merged = 0
        var last = start
        do {
            try container.history(HistoryRequest(start: .after(start), batchSize: batchSize)) { batch in
                changed += try merge(batch)
                for t in batch {
                    last = t.token
                    token = last
                    if t.author != author {
                        merged += 1
                        try each(t)
                    }
                }
            }
        } catch let error as StoreError where error.code == .historyExpired || error.code == .foreignToken {
            last = try reload()
            let warning = recordPosition { try registry.reset(consumer, to: last) }
            return SyncResult(
                transactions: merged, changedObjects: objects.count, token: last, expired: true, reloaded: true,
                reloadedAt: last, registryWarning: warning)
        }
        // Also with nothing new: the advance records that the consumer is alive (eviction looks
        // at it). A consumer that was just reset to `start` needs no second write.
        if last != start || reloadedAt == nil {
            warning = recordPosition { try registry.advance(consumer, to: last) } ?? warning
        }
        token = last
        return SyncResult(
            transactions: merged, changedObjects: changed, token: last, expired: expired, reloaded: reloaded,
            reloadedAt: reloadedAt, registryWarning: warning)
    }

    /// Where a sync starts: this process's own position, the consumer's stored token (a first
    /// sync, which reads the view from the store), or a full reload (evicted, foreign, removed,
    /// never synced, or the registry was repaired). `reloadedAt` is set by a reload.
    private func startPosition() throws -> (
        start: HistoryToken, expired: Bool, reloadedAt: HistoryToken?, warning: String?
    ) {
        let entry = try registry.consumer(consumer)
        var warning = pendingWarning
        pendingWarning = nil
        if let entry, let stored = entry.token, stored.storeID == container.storeID, !entry.isEvicted {
            if loaded, let own = token, own.storeID == container.storeID {
                return (own, false, nil, warning)
            }
            // This process's first sync: the view is read from the store, then the history
            // after the stored token is merged over it (idempotently). The consumer's
            // position holds, so this is no reload in the contract's sense.
            _ = try reload()
            return (stored, false, nil, warning)
        }
        var expired = entry?.isEvicted == true || (entry?.token.map { $0.storeID != container.storeID } ?? false)
        if let entry, entry.token == nil, let repaired = try registry.repairedAt(), entry.registeredAt >= repaired {
            expired = true
        }
        let start = try reload()
        if entry == nil { warning = recordPosition { try registry.register(consumer) } }
        warning = recordPosition { try registry.reset(consumer, to: start) } ?? warning
        return (start, expired, start, warning)
    }

    /// Runs a registry write after a merge; a failure the merge does not depend on (busy,
    /// damaged, full, read-only) becomes a warning: the view is right, the position is not saved.
    private func recordPosition(_ body: () throws -> Void) -> String? {
        do {
            try body()
            return nil
        } catch let error as StoreError {
            return "the token of \(consumer) was not saved: \(error.message)"
        } catch {
            return "the token of \(consumer) was not saved: \(error)"
        }
    }

    /// Loads every tracked object and the current token from one consistent read.
    ///
    /// - Throws: ``StoreError`` when the store cannot be read (`.modelOutdated`, `.busy`,
    ///   `.storage`).
    @discardableResult
    public func reload() throws -> HistoryToken {
        let (value, snapshots) = try container.loadAll(entities)
        objects = Dictionary(uniqueKeysWithValues: snapshots.map { ($0.id, $0) })
        loaded = true
        let t = HistoryToken(storeID: container.storeID, value: value)
        token = t
        return t
    }

    /// Applies a batch: every touched object of a tracked entity is read again from the store
    /// (or removed when it is gone). Returns how many objects of the view changed.
    private func merge(_ batch: [HistoryTransaction]) throws -> Int {
        // A migration changes no object in history but may change every one (a renamed or new
        // attribute, a default): the view reads its entities again.
        if !entities.isEmpty, batch.contains(where: { $0.author == MigrationHistory.author }) {
            let (_, snapshots) = try container.loadAll(entities)
            objects = Dictionary(uniqueKeysWithValues: snapshots.map { ($0.id, $0) })
            return objects.count
        }
        var touched = Set<ObjectID>()
        for t in batch {
            for change in t.changes where entities.contains(change.objectID.entity) { touched.insert(change.objectID) }
        }
        guard !touched.isEmpty else { return 0 }
        let fresh = try container.snapshots(touched)
        var changed = 0
        for (id, snapshot) in fresh {
            if let snapshot {
                if objects[id] != snapshot {
                    objects[id] = snapshot
                    changed += 1
                }
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
    ///
    /// - Throws: what ``sync(batchSize:_:)``, ``ChangeObserver/next(timeout:)`` or `each` throw.
    @discardableResult
    public func watch(
        observer: ChangeObserver, duration: TimeInterval? = nil, count: Int? = nil,
        shouldStop: () -> Bool = { false }, afterSync: (SyncResult) throws -> Void = { _ in },
        _ each: (HistoryTransaction) throws -> Void
    ) throws -> Int {
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
