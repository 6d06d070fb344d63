import Foundation
import SharedStoreCore
import SharedStoreSupport

/// How one result of a fetch became the next: what a list on screen needs to animate (Core
/// Data's `NSFetchedResultsController` changes, a collection view's batch updates).
///
/// Positions: `removed` in the old result; `inserted`, `updated` and the targets of `moved` in
/// the new one. Objects neither removed nor moved keep their relative order. ``apply(to:new:)`` turns
/// the old result into the new one.
public struct ResultDiff: Sendable, Hashable {
    /// An object that changed place: its position in the old result and in the new one.
    public struct Move: Sendable, Hashable {
        /// Its position in the old result.
        public let from: Int
        /// Its position in the new result.
        public let to: Int
    }

    /// Positions, in the old result, of the objects no longer in it.
    public var removed: [Int] = []
    /// Positions, in the new result, of the objects that were not in the old one.
    public var inserted: [Int] = []
    /// Objects in both results that changed place relative to the others (as few as possible: the
    /// longest run that kept its order stays).
    public var moved: [Move] = []
    /// Objects in both results whose stored version changed.
    public var updated: [Int] = []

    /// Whether the two results are the same objects, in the same order, at the same versions.
    public var isEmpty: Bool { removed.isEmpty && inserted.isEmpty && moved.isEmpty && updated.isEmpty }

    /// The diff between a result and itself: nothing removed, inserted, moved or updated.
    public static let empty = ResultDiff()

    /// The empty diff (``empty``); a diff of two results is ``init(from:to:)``.
    public init() {}

    /// The diff from `old` to `new` (objects by id; an object whose version changed is updated;
    /// the longest run of objects that kept their relative order stays, the others move).
    public init(from old: [Snapshot], to new: [Snapshot]) {
        var oldIndex: [ObjectID: Int] = [:]
        for (i, s) in old.enumerated() { oldIndex[s.id] = i }
        var newIndex: [ObjectID: Int] = [:]
        for (i, s) in new.enumerated() { newIndex[s.id] = i }
        removed = old.indices.filter { newIndex[old[$0].id] == nil }
        inserted = new.indices.filter { oldIndex[new[$0].id] == nil }
        updated = new.indices.filter { i in oldIndex[new[i].id].map { old[$0].version != new[i].version } ?? false }
        // The objects in both, in old order, with their new positions: those off the longest
        // increasing run of new positions are the moves.
        let common = old.indices.compactMap { i in newIndex[old[i].id].map { (from: i, to: $0) } }
        let staying = Set(Self.longestIncreasingRun(common.map(\.to)).map { common[$0].from })
        moved = common.filter { !staying.contains($0.from) }.map { Move(from: $0.from, to: $0.to) }
    }

    /// Turns `old` into the new result, given the new snapshots (or records) of inserted and
    /// updated objects (`new`, by position): what a list on screen does with a diff, and its test.
    public func apply<Element>(to old: [Element], new: [Element]) -> [Element] {
        var out = [Element?](repeating: nil, count: new.count)
        for i in inserted { out[i] = new[i] }
        for m in moved { out[m.to] = old[m.from] }
        let gone = Set(removed).union(moved.map(\.from))
        var staying = old.indices.filter { !gone.contains($0) }.makeIterator()
        for i in out.indices where out[i] == nil { out[i] = staying.next().map { old[$0] } }
        for i in updated { out[i] = new[i] }
        return out.compactMap { $0 }
    }

    /// Indexes (into `values`) of one longest strictly increasing subsequence.
    static func longestIncreasingRun(_ values: [Int]) -> [Int] {
        var tails: [Int] = []  // index into values of the smallest tail of each length
        var previous = [Int](repeating: -1, count: values.count)
        for (i, v) in values.enumerated() {
            var lo = 0
            var hi = tails.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if values[tails[mid]] < v { lo = mid + 1 } else { hi = mid }
            }
            if lo > 0 { previous[i] = tails[lo - 1] }
            if lo == tails.count { tails.append(i) } else { tails[lo] = i }
        }
        var run: [Int] = []
        var i = tails.last ?? -1
        while i >= 0 {
            run.append(i)
            i = previous[i]
        }
        return run.reversed()
    }
}

/// One result of a live query: its objects as the query's `Element` (snapshots, or records).
public struct LiveResult<Element: FetchedElement>: Sendable {
    /// The objects, as the fetch returns them.
    public let objects: [Element]
    /// How far the previous result became this one (empty for the first).
    public let diff: ResultDiff
    /// The store's token the result is read at (or after).
    public let token: HistoryToken
    /// The consumer's history had expired: the query ran again from scratch (it holds no replica).
    public let reloaded: Bool
}

extension LiveResult: Equatable where Element: Equatable {}
extension LiveResult: Hashable where Element: Hashable {}

/// A fetch that follows the store, in this process and all others: Core Data's
/// `NSFetchedResultsController`, GRDB's `ValueObservation`.
///
/// It gives the current result, then after every merge that can change it — and only then — the
/// new result with its ``ResultDiff``. Whether a merged transaction can change the result is
/// decided from the transaction itself (entity, changed properties, object ids), without
/// reading the store; only then does the query run again, on its index. It keeps nothing but the
/// last result. Its consumer's token advances as it merges; an expired token just re-runs it.
///
/// It delivers its objects as its `Element`: `LiveQuery<Article>` gives `[Article]` (each record
/// knows what it was read as, so that updating one writes only what was changed), and
/// `LiveQuery<Snapshot>` (what `LiveQuery(…)` of an entity's name makes) gives snapshots.
///
/// For example:
/// ```swift
/// let query = try LiveQuery<Article>(
///     container: container, registry: registry,
///     request: FetchRequest(Article.self, where: \Article.isRead == false,
///                           sortedBy: [.descending(\Article.createdAt)], limit: 50))
/// for try await result in query.results() {
///     print(result.objects.count, result.diff.inserted)   // result.objects: [Article]
/// }
/// ```
public final class LiveQuery<Element: FetchedElement>: @unchecked Sendable {
    /// The fetch the query follows.
    public let request: FetchRequest
    private let container: Container
    private let consumer: ViewContext
    private let context: ObjectContext
    private let relevance: Relevance
    private var last: [Snapshot] = []
    private var started = false
    private var runCount = 0
    /// How many times the query ran (the first included): what relevance saves is visible here.
    public var runs: Int { lock.withLock { runCount } }
    // The consumer and the context are confined to whoever calls `next` (one thread at a time).
    private let lock = NSLock()
    /// The last run merged what can change the result but did not deliver it (its fetch or its
    /// decoding failed): the next call runs again, whatever it merges.
    private var rerun = false
    /// Whether a stream (``results(pollInterval:)``, `observe`, a model) follows the query: it
    /// has one reader, since each result is a diff from the one its reader got before.
    private let followed = Protected(false)

    /// A query following `request` as `consumer` (nil: an ephemeral consumer of its own, removed
    /// with the query, and dropped by the next clean once the process is gone).
    init(container: Container, registry: TokenRegistry, consumer: String?, request: FetchRequest) throws {
        if let entity = Element.fetchedEntity, entity != request.entity {
            throw StoreError(
                .invalidArgument, "a LiveQuery<\(Element.self)> follows \(entity) objects, not \(request.entity)")
        }
        let name = try consumer ?? registry.registerEphemeral("LiveQuery")
        do {
            self.request = request
            self.container = container
            self.consumer = try ViewContext(container: container, registry: registry, consumer: name, entities: [])
            self.context = container.newLockConfinedContext(name: "live.\(name)")
            self.relevance = try Relevance(model: container.model, request: request)
        } catch {
            if consumer == nil { _ = try? registry.remove(name) }
            throw error
        }
        if consumer == nil { ephemeral = (registry, name) }
    }

    /// The name of the query's consumer in the token registry (an ephemeral one starts with `~`).
    public var consumerName: String { consumer.consumer }

    /// The ephemeral consumer this query registered, removed with it.
    private var ephemeral: (registry: TokenRegistry, name: String)?

    deinit {
        if let ephemeral { _ = try? ephemeral.registry.remove(ephemeral.name) }
    }

    /// The first result, then a result each time merged history changed it; nil when nothing
    /// that was merged could change it (the query did not run). Blocking; one caller at a time
    /// (a query has one reader: each result is a diff from the one its reader got before).
    ///
    /// A call that throws delivered nothing: the next one runs the query again, and its diff is
    /// from the last result delivered.
    ///
    /// - Throws: like ``ViewContext/sync(batchSize:_:)`` and ``ObjectContext/fetch(_:)``, and
    ///   what makes an object no `Element` (a record's `.validation`).
    public func next() throws -> LiveResult<Element>? {
        try lock.withLock {
            var relevant = !started || rerun
            let sync: SyncResult
            do {
                sync = try consumer.sync { transaction in
                    if !relevant, relevance.touches(transaction, current: last) { relevant = true }
                }
            } catch {
                // What was merged before the failure is not looked at again: run next time.
                rerun = true
                throw error
            }
            // A reload (expired, evicted) merged nothing it could look at: run again.
            guard relevant || sync.reloaded && started else { return nil }
            rerun = true
            let objects = try context.fetch(request)
            context.rollback()
            runCount += 1
            let first = !started
            let diff = first ? ResultDiff(from: [], to: objects) : ResultDiff(from: last, to: objects)
            guard first || !diff.isEmpty else {
                rerun = false
                last = objects
                return nil
            }
            let elements = try Element.elements(from: objects)
            rerun = false
            started = true
            last = objects
            return LiveResult(objects: elements, diff: diff, token: sync.token, reloaded: sync.reloaded && !first)
        }
    }

    /// The results as an async sequence: the first at once, then one per change, woken by the
    /// change signal of any process. Ends when the task is cancelled; throws what the store threw.
    ///
    /// A query has one reader: while a stream follows it (this, ``observe(pollInterval:_:)`` or
    /// a `LiveRecordsModel`), another stream of it fails at once with `.invalidArgument` (make a
    /// query per reader: each gets every result and every change).
    public func results(pollInterval: TimeInterval = 1) -> AsyncThrowingStream<LiveResult<Element>, Error> {
        AsyncThrowingStream { continuation in
            let claimed = followed.withLock { taken in
                defer { taken = true }
                return !taken
            }
            guard claimed else {
                continuation.finish(
                    throwing: StoreError(
                        .invalidArgument,
                        "this live query already has a reader (results, observe or a LiveRecordsModel): "
                            + "make one query per reader"))
                return
            }
            let stop = Protected(false)
            let thread = Thread { [self] in
                defer { followed.withLock { $0 = false } }
                do {
                    let observer = try ChangeObserver(container: container, pollInterval: pollInterval)
                    defer { observer.stop() }
                    while !stop.withLock({ $0 }) {
                        if let result = try next() { continuation.yield(result) }
                        _ = try observer.next(timeout: pollInterval)
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in stop.withLock { $0 = true } }
            thread.name = "SharedStore.LiveQuery"
            thread.start()
        }
    }

    /// Calls `body` on a background thread with the first result and each change, until the
    /// returned task is cancelled.
    @discardableResult
    public func observe(pollInterval: TimeInterval = 1, _ body: @escaping @Sendable (LiveResult<Element>) -> Void)
        -> Task<
            Void, Error
        >
    {
        let stream = results(pollInterval: pollInterval)
        return Task.detached {
            for try await result in stream { body(result) }
        }
    }
}

/// Whether a merged transaction can change a query's result, from the transaction alone.
struct Relevance {
    let entity: String
    /// Properties of the entity the condition and the sort read.
    let properties: Set<String>
    /// Related entities the condition and the sort read through a to-one key path, with the
    /// properties read there.
    let related: [String: Set<String>]
    /// Entities the condition reads through a to-many relationship (ANY, ALL, NONE, a count).
    let collections: Set<String>

    init(model: Model, request: FetchRequest) throws {
        guard let e = model.entity(named: request.entity) else {
            throw StoreError(.unknownEntity, "unknown entity '\(request.entity)' for a live query")
        }
        entity = e.name
        try request.condition.checkDepth()
        var properties = Set<String>()
        var related: [String: Set<String>] = [:]
        for path in request.condition.keyPaths + request.sort.map(\.path) {
            let parts = path.split(separator: ".").map(String.init)
            properties.insert(parts[0])
            if parts.count == 2, let r = e.relationship(named: parts[0]) {
                related[r.destination, default: []].insert(parts[1])
            }
        }
        // ANY, ALL, NONE and counts read every object of the relationship: any change of one.
        var collections = Set<String>()
        for path in request.condition.toManyPaths {
            if let r = e.relationship(named: path) { collections.insert(r.destination) }
        }
        self.properties = properties
        self.related = related
        self.collections = collections
    }

    /// A migration; an insert or delete of the entity; an update of an object in the result, or of a
    /// property the query reads; a change of a related object the query reads through a path.
    func touches(_ transaction: HistoryTransaction, current: [Snapshot]) -> Bool {
        // A migration may change what every object holds: run again.
        if transaction.author == MigrationHistory.author { return true }
        lazy var ids = Set(current.map(\.id))
        for change in transaction.changes {
            let e = change.objectID.entity
            if collections.contains(e) { return true }
            if e == entity {
                switch change.kind {
                case .insert, .delete: return true
                case .update:
                    if ids.contains(change.objectID) || !properties.isDisjoint(with: change.updatedProperties) {
                        return true
                    }
                }
            } else if let read = related[e] {
                switch change.kind {
                case .insert: continue
                case .delete: return true
                case .update: if !read.isDisjoint(with: change.updatedProperties) { return true }
                }
            }
        }
        return false
    }
}
