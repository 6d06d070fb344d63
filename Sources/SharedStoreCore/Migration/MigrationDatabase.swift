import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// The store as a custom migration step sees it (GRDB's `Database` in a registered migration):
/// SQL run in the migration's one transaction, after the lightweight steps, with the new
/// schema's tables and columns. Valid only inside the step.
public struct MigrationDatabase: ~Copyable {
    let c: SQLiteConnection

    /// Runs `sql` with `values` bound to its `?` placeholders (never spliced into the text).
    ///
    /// - Throws: ``StoreError`` with SQLite's message (`.storage` for an SQL error); thrown out of
    ///   the step, it rolls the whole migration back.
    public func execute(_ sql: String, _ values: [Value] = []) throws {
        try StoreError.wrap(path: "migration step") { try c.execute(sql, try values.map(Self.bindable)) }
    }

    /// The rows of a query, each as its columns' values (integers, doubles, text, data, nil).
    ///
    /// - Throws: like ``execute(_:_:)``.
    public func rows(_ sql: String, _ values: [Value] = []) throws -> [[Value]] {
        try StoreError.wrap(path: "migration step") {
            try c.cached(sql).rows(try values.map(Self.bindable)) { row in
                (0..<row.columnCount).map { i -> Value in
                    switch row.type(i) {
                    case .integer: return .integer(row.int64(i))
                    case .double: return .double(row.double(i))
                    case .text: return .string(row.text(i))
                    case .blob: return .data(Data(row.blob(i)))
                    case .null: return .null
                    }
                }
            }
        }
    }

    private static func bindable(_ v: Value) throws -> SQLValue {
        switch v {
        case .null: return .null
        case .string(let s): return .text(s)
        case .integer(let i): return .integer(i)
        case .double(let d): return .double(d)
        case .bool(let b): return .integer(b ? 1 : 0)
        case .date(let d): return .double(d.timeIntervalSince1970)
        case .data(let d): return .blob([UInt8](d))
        case .uuid(let u): return .text(u.uuidString.lowercased())
        }
    }
}
