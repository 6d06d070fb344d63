import Foundation
import SharedStoreSupport

/// How many objects a save inserted, updated and deleted (after coalescing).
struct ChangeCounts: Hashable {
    var inserted = 0, updated = 0, deleted = 0
}

/// Records the changes of one write transaction, object by object, and writes them as its one
/// history transaction, in the same SQLite transaction as the data (invariant 1).
struct ChangeRecorder {
    private(set) var changes: [RecordedChange] = []
    /// Inserts alone never name one object twice (each gets a new key): coalescing, which
    /// needs a table of every object, is skipped for them (a batch of a million inserts).
    private var onlyInserts = true
    /// While a transaction only inserts, its inserts as runs (``InsertRuns``): a batch of a
    /// million keeps a few hundred runs, not a million ``RecordedChange``s (issue 11's memory).
    private var inserts = InsertRuns()

    var isEmpty: Bool { changes.isEmpty && inserts.isEmpty }
    var count: Int { changes.count + inserts.count }

    /// Whether this transaction inserted object `pk` of the entity at index `entity`, or updated
    /// one of `properties` (history indexes) of it: what those hold inside the transaction is then
    /// this transaction's, not a stored object's (for an error: it reads every change).
    func hasWritten(_ entity: Int, _ pk: Int64, properties: Set<Int>) -> Bool {
        coalesced.contains { change in
            change.entity == entity && change.primaryKey == pk
                && (change.kind == .insert || (change.kind == .update && !properties.isDisjoint(with: change.updated)))
        }
    }

    mutating func inserted(_ entity: Int, _ pk: Int64, globalID: UUID) {
        if onlyInserts {
            inserts.append(entity, pk, globalID)
        } else {
            changes.append(RecordedChange(kind: .insert, entity: entity, primaryKey: pk, globalID: globalID))
        }
    }

    /// - Parameter globalID: the object's global id when the writer read it with the row (the
    ///   history row names it without reading it again); nil: read when history is written.
    mutating func updated(_ entity: Int, _ pk: Int64, properties: [Int], globalID: UUID? = nil) {
        leaveInsertsOnly()
        changes.append(
            RecordedChange(kind: .update, entity: entity, primaryKey: pk, updated: properties, globalID: globalID))
    }

    mutating func deleted(_ entity: Int, _ pk: Int64, tombstone: [(Int, Value)], globalID: UUID?) {
        leaveInsertsOnly()
        changes.append(
            RecordedChange(kind: .delete, entity: entity, primaryKey: pk, tombstone: tombstone, globalID: globalID))
    }

    /// A change other than an insert: the inserts so far become changes like the others.
    private mutating func leaveInsertsOnly() {
        guard onlyInserts else { return }
        onlyInserts = false
        changes = inserts.changes
        inserts = InsertRuns()
    }

    /// One change per object: an insert absorbs later updates, updates merge their properties,
    /// a delete replaces what came before.
    var coalesced: [RecordedChange] {
        if onlyInserts { return inserts.changes }
        guard changes.count > 1 else { return changes }
        var out: [RecordedChange] = []
        var at: [ObjectKey: Int] = [:]
        for change in changes {
            let key = ObjectKey(entity: change.entity, pk: change.primaryKey)
            guard let i = at[key] else {
                at[key] = out.count
                out.append(change)
                continue
            }
            switch (out[i].kind, change.kind) {
            case (.insert, .update), (.delete, .update): break
            case (.update, .update):
                out[i].updated = Array(Set(out[i].updated).union(change.updated)).sorted()
                out[i].globalID = out[i].globalID ?? change.globalID
            case (_, .insert), (_, .delete), (.insert, _), (.delete, _): out[i] = change
            }
        }
        return out
    }

    var counts: ChangeCounts {
        if onlyInserts { return ChangeCounts(inserted: inserts.count) }
        return coalesced.reduce(into: ChangeCounts()) { n, change in
            switch change.kind {
            case .insert: n.inserted += 1
            case .update: n.updated += 1
            case .delete: n.deleted += 1
            }
        }
    }

    /// Writes the history transaction of everything recorded. Returns its token, or nil when
    /// nothing changed or history is off.
    ///
    /// - Throws: `.tokenSpaceExhausted` when SQLite had no higher row id to give (a damaged
    ///   store holding the largest token): the whole save rolls back.
    func write(_ s: TransactionSQL, author: String?, contextName: String?) throws -> HistoryToken? {
        let container = s.container
        guard container.options.historyTracking, !isEmpty else { return nil }
        if onlyInserts {
            return try insertRow(
                s, author: author, contextName: contextName,
                entities: HistoryCodec.entityMask(inserts, container.numbering),
                changes: HistoryCodec.encode(inserts, container.numbering))
        }
        var changes = coalesced
        // An update names its object by global id too: read from the row, which is still there.
        for i in changes.indices where changes[i].globalID == nil && changes[i].kind == .update {
            changes[i].globalID = try s.globalID(s.model.entities[changes[i].entity], changes[i].primaryKey)
        }
        return try insertRow(
            s, author: author, contextName: contextName,
            entities: HistoryCodec.entityMask(changes, container.numbering),
            changes: HistoryCodec.encode(changes, container.numbering))
    }

    private func insertRow(
        _ s: TransactionSQL, author: String?, contextName: String?, entities: Int64, changes: [UInt8]
    )
        throws -> HistoryToken
    {
        let container = s.container
        let token = try s.insertHistory(
            HistoryRow(
                token: 0, timestamp: Date().timeIntervalSince1970, author: author, context: contextName,
                process: container.process.pid, executable: container.process.executable, entities: entities,
                changes: changes))
        // Tokens only grow; a lower one means SQLite ran out of row ids (see `newestSeen`).
        guard token > container.newestSeen.load(ordering: .relaxed) else {
            throw StoreError(
                .tokenSpaceExhausted,
                "token space exhausted: the store already holds the largest token; nothing was saved")
        }
        container.noteToken(token)
        return HistoryToken(storeID: container.storeID, value: token)
    }
}

/// An object by entity index and primary key.
struct ObjectKey: Hashable {
    let entity: Int
    let pk: Int64
}

/// Inserts recorded as runs (``ChangeRecorder``): consecutive keys of one entity with
/// consecutive global ids are one run — a batch of a million inserts is a few hundred runs.
struct InsertRuns {
    struct Run {
        let entity: Int32
        let firstKey: Int64
        let firstGlobalID: UUID
        var count: Int
        var lastGlobalID: UUID

        /// Whether `next` (a run of one) takes the key and global id after this run's last.
        func continues(with next: Run) -> Bool {
            next.entity == entity && firstKey &+ Int64(count) == next.firstKey
                && GlobalID.successor(of: lastGlobalID) == next.firstGlobalID
        }

        /// Takes one more object, the one with global id `globalID`.
        mutating func extend(to globalID: UUID) {
            count += 1
            lastGlobalID = globalID
        }
    }

    /// The first run is held in place, the others in ``more``: a save of one object (the usual
    /// one) allocates no array for its one run (an allocation and its release cost a save about
    /// 500 instructions).
    private var first: Run?
    private var more: [Run] = []
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// The runs, in order.
    var runs: Runs { Runs(first: first, more: more) }

    mutating func append(_ entity: Int, _ pk: Int64, _ globalID: UUID) {
        count += 1
        let run = Run(entity: Int32(entity), firstKey: pk, firstGlobalID: globalID, count: 1, lastGlobalID: globalID)
        if more.isEmpty {
            guard let head = first else {
                first = run
                return
            }
            if head.continues(with: run) {
                first?.extend(to: globalID)
            } else {
                more.append(run)
            }
        } else if more[more.count - 1].continues(with: run) {
            more[more.count - 1].extend(to: globalID)
        } else {
            more.append(run)
        }
    }

    /// The runs of an ``InsertRuns``, in order, with no array made for them.
    struct Runs: RandomAccessCollection {
        fileprivate let first: Run?
        fileprivate let more: [Run]

        var startIndex: Int { 0 }
        var endIndex: Int { first == nil ? 0 : 1 + more.count }

        subscript(position: Int) -> Run {
            if position == 0, let first { return first }
            return more[position - 1]
        }
    }

    var changes: [RecordedChange] {
        var out: [RecordedChange] = []
        out.reserveCapacity(count)
        for run in runs {
            var gid: UUID? = run.firstGlobalID
            for k in 0..<run.count {
                out.append(
                    RecordedChange(
                        kind: .insert, entity: Int(run.entity), primaryKey: run.firstKey &+ Int64(k), globalID: gid))
                gid = gid.flatMap(GlobalID.successor)
            }
        }
        return out
    }
}
