import Foundation

/// Keeps the model's kept counts (``KeptCount``) right through one write transaction.
///
/// Inserts cost nothing per object: the counter notes the primary keys a transaction inserted (in
/// runs, as the table hands them out in order) and, before the transaction commits, counts each
/// run once with SQL. An update of a counted attribute or a delete of an object that existed
/// before the transaction asks SQL whether the object was counted before (and after) the change.
/// A new object updated or deleted in the same transaction needs nothing: the runs are counted
/// as they are at the end. SQL evaluates every condition, so a count agrees with a fetch.
struct KeptCounter {
    /// Per entity index: the primary keys inserted in this transaction, as runs.
    private var inserted: [Int: [ClosedRange<Int64>]] = [:]
    /// Per entity index: the change of each of its kept counts from updates and deletes.
    private var delta: [Int: [Int64]] = [:]

    /// Notes that `pk` of entity `index` was inserted in this transaction.
    mutating func inserted(_ index: Int, _ pk: Int64) {
        var runs = inserted.removeValue(forKey: index) ?? []
        if let last = runs.last, last.upperBound &+ 1 == pk {
            runs[runs.count - 1] = last.lowerBound...pk
        } else {
            runs.append(pk...pk)
        }
        inserted[index] = runs
    }

    /// Whether `pk` of entity `index` was inserted in this transaction.
    func isNew(_ index: Int, _ pk: Int64) -> Bool {
        inserted[index]?.contains { $0.contains(pk) } ?? false
    }

    /// Whether writing `columns` of `e` can change one of its kept counts.
    static func reads(_ e: Entity, _ columns: [String]) -> Bool {
        e.keptCounts.contains { k in k.condition.keyPaths.contains { columns.contains($0) } }
    }

    /// Adds (`sign` 1) or takes away (-1) an object counted as `flags` say.
    mutating func add(_ index: Int, _ flags: [Bool], sign: Int64) {
        guard flags.contains(true) else { return }
        var d = delta[index] ?? Array(repeating: 0, count: flags.count)
        for (i, f) in flags.enumerated() where f { d[i] += sign }
        delta[index] = d
    }

    /// Writes every count's change; called once, last in the transaction.
    func write(_ s: TransactionSQL) throws {
        // Most transactions change no kept count (iterating two empty tables cost a save 200
        // instructions).
        if inserted.isEmpty && delta.isEmpty { return }
        var totals = delta
        for (index, runs) in inserted {
            let e = s.model.entities[index]
            var t = totals[index] ?? Array(repeating: 0, count: e.keptCounts.count)
            for run in runs {
                for (i, n) in try s.keptCountSums(e, run).enumerated() { t[i] += n }
            }
            totals[index] = t
        }
        for (index, t) in totals {
            let e = s.model.entities[index]
            for (k, n) in zip(e.keptCounts, t) where n != 0 {
                try s.addToKeptCount(SchemaSQL.keptCountName(e, k), n)
            }
        }
    }
}
