/// The one builder of the aliased `SELECT … FROM … AS t0 … WHERE …` frame: every read that names
/// an entity's row by the alias goes through it (fetches, counts, aggregates, kept counts, a row by
/// its key, migration's recounts), so that the alias the columns and conditions name, and the
/// order of the clauses, are written once (GRDB's `SQLQueryGenerator`). Short statements on one
/// row by its key without the alias (the save's own reads and writes, the mirror's map) and the
/// to-many subqueries ``QueryBuilder`` nests are written where they are used, in this folder.
enum SelectFrame {
    /// The alias of the entity's row: ``QueryBuilder`` and ``EntitySQL`` name columns `t0.…`.
    static let alias = "t0"

    /// `t0.column`: a column of the row the frame reads (`column` quoted already when it must be).
    static func column(_ column: String) -> String { "\(alias).\(column)" }

    /// `t0.Z_PK = ?`: the condition that reads one row by its primary key.
    static let byPrimaryKey = "\(alias).\(StoreColumn.primaryKey) = ?"

    /// `SELECT columns FROM source AS t0 joins [WHERE condition]`.
    ///
    /// - Parameters:
    ///   - columns: the select list, in order.
    ///   - source: a quoted table name, or a parenthesized subquery (an unsaved object as a row).
    ///   - joins: `LEFT JOIN …` clauses for to-one key paths (``QueryBuilder/joins``).
    ///   - condition: the WHERE expression; nil for none.
    static func select(_ columns: [String], from source: String, joins: [String] = [], where condition: String?)
        -> String
    {
        var sql = "SELECT \(columns.joined(separator: ", ")) FROM \(source) AS \(alias)"
        if !joins.isEmpty { sql += " " + joins.joined(separator: " ") }
        if let condition { sql += " WHERE \(condition)" }
        return sql
    }

    /// The frame over the table of `e`.
    static func select(_ columns: [String], from e: Entity, joins: [String] = [], where condition: String?) -> String {
        select(columns, from: SQLMapping.quote(e.name), joins: joins, where: condition)
    }
}
