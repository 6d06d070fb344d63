import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// The store's connection inside one transaction, and the SQL run there: the rows of entities
/// and join tables, fetches, history, kept counts, the mirror's tables.
///
/// SQL text in SharedStore is written in this folder (`Sources/SharedStoreCore/SQL`) only, behind
/// functions named after what they do, in two types: this one, used inside a transaction of an
/// open container (``Container/write(lease:_:)``, ``Container/read(_:)``) and never outliving it,
/// and ``SchemaSQL``, used on a bare connection while the store is opened, made or migrated,
/// before a container exists. The rest of the library asks these functions and never builds SQL.
struct TransactionSQL {
    let c: SQLiteConnection
    let container: Container

    var model: Model { container.model }
    var storeID: UUID { container.storeID }

    /// A hot statement, prepared once per connection and kept in its slot.
    func statement(_ key: StoreStatement, _ sql: @autoclosure () -> String) throws -> SQLiteStatement {
        try c.statement(slot: key.slot, sql())
    }

    /// Rows changed by the last statement.
    var changes: Int { c.changes }
}

/// The hot statements of a connection, by a typed key; the connection keeps them in numbered
/// slots so that a save reaches them without hashing SQL text.
enum StoreStatement {
    case historyInsert
    case currentToken
    case entity(Int, EntityStatement)

    var slot: Int {
        switch self {
        case .historyInsert: return 0
        case .currentToken: return 1
        case .entity(let index, let kind): return 2 + index * EntityStatement.allCases.count + kind.rawValue
        }
    }
}

/// The per-entity hot statements (``EntitySQL``).
enum EntityStatement: Int, CaseIterable {
    case insert, select, delete, exists, version
}

extension TransactionSQL {
    // MARK: - Meta

    /// The value of `key` in `ss_meta`, nil when it is not set.
    func meta(_ key: MetaKey) throws -> String? {
        try c.cached("SELECT value FROM ss_meta WHERE key = ?").firstRow([.text(key.rawValue)]) { $0.text(0) }
    }

    /// Sets `key` in `ss_meta` to `value`.
    func setMeta(_ key: MetaKey, _ value: String) throws {
        try SchemaSQL.setMeta(c, key, value)
    }
}
