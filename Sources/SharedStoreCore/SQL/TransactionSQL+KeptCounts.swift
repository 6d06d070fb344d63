import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// Kept counts (``KeptCount``): one row per count in `ss_counts`, changed by every write
/// transaction that changes what it counts (``KeptCounter``).
extension TransactionSQL {
    /// The 0-or-1 expression of each kept count of `e` over `t0`, and their bindings in order.
    private func keptCountExpressions(_ e: Entity) throws -> (expressions: [String], bindings: [SQLValue]) {
        if let made = entitySQL(e).keptCounts { return (made.expressions, made.bindings) }
        var q = QueryBuilder(model: model, entity: e, storeID: storeID)
        let expressions = try e.keptCounts.map { try q.sql($0.condition) }
        return (expressions, q.bindings)
    }

    /// Whether object `pk` of `e` is counted by each of the entity's kept counts (empty when
    /// there is no such object).
    func keptCountFlags(_ e: Entity, _ pk: Int64) throws -> [Bool] {
        let (expressions, bindings) = try keptCountExpressions(e)
        let sql =
            entitySQL(e).keptCounts?.flags ?? SelectFrame.select(expressions, from: e, where: SelectFrame.byPrimaryKey)
        let n = Int32(expressions.count)
        return try c.cached(sql).firstRow(bindings + [.integer(pk)]) { row in
            (0..<n).map { row.int64($0) != 0 }
        } ?? []
    }

    /// How many objects of `e` with a primary key in `range` each kept count counts.
    func keptCountSums(_ e: Entity, _ range: ClosedRange<Int64>) throws -> [Int64] {
        let (expressions, bindings) = try keptCountExpressions(e)
        let sums = expressions.map { "coalesce(sum(\($0)), 0)" }
        let key = SelectFrame.column(StoreColumn.primaryKey)
        let sql = SelectFrame.select(sums, from: e, where: "\(key) BETWEEN ? AND ?")
        let n = Int32(expressions.count)
        return try c.cached(sql).firstRow(bindings + [.integer(range.lowerBound), .integer(range.upperBound)]) { row in
            (0..<n).map { row.int64($0) }
        } ?? Array(repeating: 0, count: expressions.count)
    }

    /// Adds `delta` to kept count `name` (a missing row stays missing: its value is unknown).
    func addToKeptCount(_ name: String, _ delta: Int64) throws {
        try c.cached("UPDATE ss_counts SET value = value + ? WHERE name = ?").execute([.integer(delta), .text(name)])
    }

    /// The value of kept count `name`; nil when the store has no such row.
    func keptCount(_ name: String) throws -> Int64? {
        try c.cached("SELECT value FROM ss_counts WHERE name = ?").firstRow([.text(name)]) { $0.int64(0) }
    }

    /// Counts what kept count `k` of `e` counts, by reading the table.
    func recount(_ e: Entity, _ k: KeptCount) throws -> Int64 {
        let (sql, bindings) = try query(
            e, columns: [SelectFrame.column(StoreColumn.primaryKey)], where: k.condition, sort: nil, window: nil)
        return try c.cached("SELECT count(*) FROM (\(sql))").firstRow(bindings) { $0.int64(0) } ?? 0
    }

    /// Sets kept count `name` to `value`, making its row when missing.
    func setKeptCount(_ name: String, _ value: Int64) throws {
        try c.cached(
            "INSERT INTO ss_counts(name, value) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = excluded.value"
        )
        .execute([.text(name), .integer(value)])
    }
}
