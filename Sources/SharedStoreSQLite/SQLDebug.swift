import CSQLite
import Foundation
import SharedStoreSupport

/// Core Data's `-com.apple.CoreData.SQLDebug 1` for SharedStore: with `SHAREDSTORE_SQL_DEBUG=1`
/// in its environment, a process prints each SQL statement it runs to standard error when the
/// statement ends, with the time it took, and its query plan when it scanned a whole table:
///
/// ```
/// sharedstore-sql: 0.041 ms SELECT ... FROM "Article" t0 WHERE t0."note" = ?
/// sharedstore-sql:   scan (1000 full-scan steps): SCAN t0
/// ```
///
/// Off, it costs nothing where statements run: the switch is read once per process, and only a
/// connection opened with it on asks SQLite to report its statements (`sqlite3_trace_v2`).
package enum SQLDebug {
    /// Whether a statement of the log reads only SQLite's schema or the library's own tables
    /// (`ss_…`): small, and read whole by design.
    package static func readsInternalTable(_ sql: String) -> Bool {
        sql.contains("FROM sqlite_schema") || sql.contains("FROM ss_") || sql.contains("FROM \"ss_")
    }

    /// Whether a statement of the log fetches every object of an entity (a fetch without a
    /// condition, as the library writes one): its scan is the point.
    package static func fetchesEveryRow(_ sql: String) -> Bool {
        sql.contains(" WHERE 1 ORDER BY ") || sql.hasSuffix(" WHERE 1")
    }

    /// Whether the switch is on (read once).
    package static let isOn: Bool = getenv("SHAREDSTORE_SQL_DEBUG").map { String(cString: $0) == "1" } ?? false

    /// One statement's text on one connection (two stores of one process plan alike text apart).
    private struct PlanKey: Hashable {
        let connection: UInt
        let sql: String
    }

    /// The query plan of each statement prepared while the switch is on, by connection and SQL
    /// (EXPLAIN QUERY PLAN, run at the prepare: never from inside SQLite's report of a statement).
    private static let plans = Protected<[PlanKey: String]>([:])

    /// Forgets the plans of `connection` (closing: its address may be another connection's next).
    static func forget(_ connection: OpaquePointer) {
        let key = UInt(bitPattern: connection)
        plans.withLock { $0 = $0.filter { $0.key.connection != key } }
    }

    /// Notes the plan of `sql` on `connection` (once per text and connection).
    static func notePlan(_ sql: String, on connection: OpaquePointer) {
        let key = PlanKey(connection: UInt(bitPattern: connection), sql: sql)
        guard plans.withLock({ $0[key] == nil }) else { return }
        var stmt: OpaquePointer?
        guard sqlite3_prepare_v2(connection, "EXPLAIN QUERY PLAN " + sql, -1, &stmt, nil) == SQLITE_OK, let stmt
        else {
            sqlite3_finalize(stmt)
            return
        }
        defer { sqlite3_finalize(stmt) }
        var lines: [String] = []
        while sqlite3_step(stmt) == SQLITE_ROW {
            if let detail = sqlite3_column_text(stmt, 3) { lines.append(String(cString: detail)) }
        }
        plans.withLock { $0[key] = lines.joined(separator: "; ") }
    }

    /// When each running statement started, by its handle (SQLite's own timing of a statement
    /// counts whole milliseconds).
    private static let started = Protected<[UInt: Double]>([:])

    /// Asks SQLite to tell when each statement of `connection` starts and ends.
    static func install(on connection: OpaquePointer) {
        sqlite3_trace_v2(
            connection, UInt32(SQLITE_TRACE_STMT | SQLITE_TRACE_PROFILE),
            { event, _, statement, _ in
                guard let statement else { return 0 }
                let connection = sqlite3_db_handle(OpaquePointer(statement))
                let key = UInt(bitPattern: statement)
                if event == UInt32(SQLITE_TRACE_STMT) {
                    let now = Monotonic.seconds()
                    SQLDebug.started.withLock { $0[key] = now }
                } else {
                    let start = SQLDebug.started.withLock { $0.removeValue(forKey: key) }
                    SQLDebug.report(
                        OpaquePointer(statement), connection: connection,
                        seconds: start.map { Monotonic.seconds() - $0 })
                }
                return 0
            }, nil)
    }

    private static func report(_ statement: OpaquePointer, connection: OpaquePointer?, seconds: Double?) {
        guard let text = sqlite3_sql(statement) else { return }
        let sql = String(cString: text)
        // The plans this log asks for are not what the process runs.
        guard !sql.hasPrefix("EXPLAIN QUERY PLAN ") else { return }
        var line = "sharedstore-sql: " + (seconds.map { String(format: "%.3f ms ", $0 * 1000) } ?? "? ms ")
        // The SQL's own line breaks as spaces; anything else that is no text, escaped.
        line += TextSafety.visible(sql.replacingOccurrences(of: "\n", with: " ")) + "\n"
        // A scan: steps of a full table scan counted by SQLite (for this run: the count is
        // reset), or a plan that walks a whole table or index.
        let steps = sqlite3_stmt_status(statement, SQLITE_STMTSTATUS_FULLSCAN_STEP, 1)
        let plan = connection.flatMap { c in
            plans.withLock { $0[PlanKey(connection: UInt(bitPattern: c), sql: sql)] }
        }
        let scans = (plan ?? "").components(separatedBy: "; ").contains {
            $0.hasPrefix("SCAN ") && $0 != "SCAN CONSTANT ROW"
        }
        if steps > 0 || scans {
            line +=
                "sharedstore-sql:   scan (\(steps) full-scan steps): " + TextSafety.visible(plan ?? "plan not known")
                + "\n"
        }
        // One write per report: lines of several threads do not interleave.
        let bytes = Array(line.utf8)
        _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }
}
