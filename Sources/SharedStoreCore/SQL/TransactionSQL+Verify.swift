import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// The queries of `storectl verify`: what can be checked at rest.
extension TransactionSQL {
    /// SQLite's own structural check: `["ok"]`, or the first problems.
    func quickCheck() throws -> [String] {
        try c.cached("PRAGMA quick_check").rows { $0.text(0) }
    }

    /// The lowest and highest token, how many rows, how many at or below the floor.
    func historyExtent(floor: Int64) throws -> (lowest: Int64, highest: Int64, rows: Int64, belowFloor: Int64) {
        try c.cached(
            "SELECT coalesce(min(token), 0), coalesce(max(token), 0), count(*), coalesce(sum(token <= ?), 0) "
                + "FROM ss_history"
        )
        .firstRow([.integer(floor)]) { ($0.int64(0), $0.int64(1), $0.int64(2), $0.int64(3)) } ?? (0, 0, 0, 0)
    }

    /// For each of `columns`, how many objects of `e` hold there a value whose SQLite type
    /// (`typeof`) is none of its `types`, counted in one pass over the table; and for a column
    /// with any, the first of them: its key, and the value's type and text as SQL quotes it (a
    /// text's first 40 characters, a blob's first 30 bytes: never the whole of a large one).
    func mistyped(_ e: Entity, _ columns: [(name: String, types: [String])]) throws -> [(
        count: Int64, first: (Int64, String)?
    )] {
        guard !columns.isEmpty else { return [] }
        let q = SQLMapping.quote
        let tests = columns.map {
            "typeof(\(q($0.name))) NOT IN (\($0.types.map { "'\($0)'" }.joined(separator: ", ")))"
        }
        let counts =
            try c.cached(
                "SELECT " + tests.map { "coalesce(sum(\($0)), 0)" }.joined(separator: ", ") + " FROM \(q(e.name))"
            ).firstRow { row in tests.indices.map { row.int64(Int32(truncatingIfNeeded: $0)) } }
            ?? tests.map { _ in 0 }
        return try zip(columns, zip(tests, counts)).map { column, tested in
            let (test, n) = tested
            guard n > 0 else { return (0, nil) }
            let col = q(column.name)
            let shown =
                "CASE typeof(\(col)) WHEN 'text' THEN quote(substr(\(col), 1, 40)) "
                + "WHEN 'blob' THEN quote(substr(\(col), 1, 30)) ELSE quote(\(col)) END"
            let first = try c.cached(
                "SELECT \(StoreColumn.primaryKey), typeof(\(col)), \(shown) "
                    + "FROM \(q(e.name)) WHERE \(test) ORDER BY \(StoreColumn.primaryKey) LIMIT 1"
            ).firstRow { ($0.int64(0), $0.text(1) + " " + $0.text(2)) }
            return (n, first)
        }
    }

    /// For each of `columns`, how many objects of `e` hold there text that is not UTF-8 (a read
    /// repairs it, and gives another text than the one stored) or that its `isWellFormed` (nil:
    /// any text) refuses (a value of another SQLite type is ``mistyped(_:_:)``'s to name), read in one pass
    /// over the table in key order; and for a column with any, the first of them: its key and
    /// its text as SQL quotes it (the first 40 characters).
    func malformedTexts(_ e: Entity, _ columns: [(name: String, isWellFormed: ((String) -> Bool)?)]) throws -> [(
        count: Int64, first: (Int64, String)?
    )] {
        guard !columns.isEmpty else { return [] }
        let q = SQLMapping.quote
        var found = columns.map { _ in (count: Int64(0), first: (Int64, String)?.none) }
        try c.cached(
            "SELECT \(StoreColumn.primaryKey), " + columns.map { q($0.name) }.joined(separator: ", ")
                + " FROM \(q(e.name)) ORDER BY \(StoreColumn.primaryKey)"
        ).forEachRow { row in
            for (i, column) in columns.enumerated() {
                let at = Int32(truncatingIfNeeded: i + 1)
                guard row.type(at) == .text else { continue }
                let wellFormed = row.withTextOrNil(at) { bytes -> Bool in
                    guard let bytes else { return true }
                    // A column of any text is only checked to be UTF-8, with no string made.
                    guard let check = column.isWellFormed else {
                        return !transcode(bytes.makeIterator(), from: UTF8.self, to: UTF32.self, stoppingOnError: true)
                        {
                            _ in
                        }
                    }
                    return String(validating: bytes, as: UTF8.self).map(check) ?? false
                }
                if wellFormed { continue }
                found[i].count += 1
                if found[i].first == nil {
                    // Not UTF-8: shown as a read repairs it.
                    let shown = String(row.text(at).prefix(40)).replacingOccurrences(of: "'", with: "''")
                    found[i].first = (row.int64(0), "text '\(shown)'")
                }
            }
        }
        return found
    }

    /// How many objects of `e` point through to-one `r` to an object that does not exist.
    func danglingReferences(_ e: Entity, _ r: Relationship) throws -> Int64 {
        let q = SQLMapping.quote
        return try c.cached(
            """
            SELECT count(*) FROM \(q(e.name)) AS s WHERE s.\(q(r.name)) IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM \(q(r.destination)) AS d WHERE d.\(StoreColumn.primaryKey) = s.\(q(r.name)))
            """
        ).firstRow { $0.int64(0) } ?? 0
    }

    /// How many links of a join table name an object that does not exist on either side.
    func danglingLinks(_ e: Entity, _ r: Relationship, _ join: JoinTable) throws -> Int64 {
        let q = SQLMapping.quote
        return try c.cached(
            """
            SELECT count(*) FROM \(q(join.name)) AS j
            WHERE NOT EXISTS (SELECT 1 FROM \(q(e.name)) WHERE \(StoreColumn.primaryKey) = j.\(join.mine))
               OR NOT EXISTS (SELECT 1 FROM \(q(r.destination)) WHERE \(StoreColumn.primaryKey) = j.\(join.theirs))
            """
        ).firstRow { $0.int64(0) } ?? 0
    }

    /// How many values of a uniqueness constraint are held by more than one object.
    func duplicates(_ e: Entity, _ constraint: [String]) throws -> Int64 {
        let q = SQLMapping.quote
        let cols = constraint.map(q).joined(separator: ", ")
        let notNull = constraint.map { "\(q($0)) IS NOT NULL" }.joined(separator: " AND ")
        return try c.cached(
            "SELECT count(*) FROM (SELECT 1 FROM \(q(e.name)) WHERE \(notNull) GROUP BY \(cols) HAVING count(*) > 1)"
        )
        .firstRow { $0.int64(0) } ?? 0
    }

    /// How many objects of `e` have no global id, or one that is not 16 bytes.
    func objectsWithoutGlobalID(_ e: Entity) throws -> Int64 {
        try c.cached(
            "SELECT count(*) FROM \(SQLMapping.quote(e.name)) WHERE length(\(StoreColumn.globalID)) IS NOT 16"
        ).firstRow { $0.int64(0) } ?? 0
    }

    /// Gives every object of `e` lacking a well-formed global id a new one; returns how many.
    func assignMissingGlobalIDs(_ e: Entity) throws -> Int {
        try c.execute(
            "UPDATE \(SQLMapping.quote(e.name)) SET \(StoreColumn.globalID) = ss_new_gid() "
                + "WHERE length(\(StoreColumn.globalID)) IS NOT 16")
        return c.changes
    }
}
