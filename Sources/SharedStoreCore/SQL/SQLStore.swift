import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// The one owner of SQL text in SharedStore: every statement the store runs is written in this
/// folder (`Sources/SharedStoreCore/SQL`), behind functions named after what they do — the schema
/// and its meta keys, the rows of entities and join tables, fetches, history. The rest of the
/// library asks these functions and never builds SQL; a schema change is made here.
///
/// A value of this type is the store's connection inside one transaction
/// (``Container/write(_:)``, ``Container/read(_:)``); it does not outlive it.
struct SQLStore {
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
    case insert, select, delete, exists
}

/// The keys of `ss_meta`, the store's own facts.
enum MetaKey: String, CaseIterable {
    /// The layout of SharedStore's own tables.
    case format
    case storeID = "store_id"
    /// The model's description (stores of format 2; format 3 keeps `schema`).
    case model
    /// The version of the model that made or last migrated the store.
    case modelVersion = "model_version"
    /// The canonical JSON of the store's schema (``StoredSchema``).
    case schema
    /// The store's numbering of entities and properties for history (``HistoryCatalog``).
    case catalog
    case createdAt = "created_at"
    /// Through which token history was deleted (the floor), and the newest time deleted.
    case historyDeletedThrough = "history_deleted_through"
    case historyDeletedTime = "history_deleted_time"
    /// Token numbers lost when the store was put back to an older copy.
    case lostTokens = "lost_tokens"
    /// Set once a token registry held consumers of this store: an empty registry beside it
    /// since (not repaired) lost them.
    case registryInUse = "registry_in_use"
    /// The token lease: `THROUGH BOOT`, the highest token a save may take before the lease is
    /// extended, and the boot it was taken in (``Container/leaseSpan``).
    case tokenLease = "token_lease"
}

extension SQLStore {
    // MARK: - Meta

    /// Every meta value, by key text (unknown keys included: a newer version may add some).
    static func meta(_ c: SQLiteConnection) throws -> [String: String] {
        var meta: [String: String] = [:]
        try c.cached("SELECT key, value FROM ss_meta").forEachRow { meta[$0.text(0)] = $0.text(1) }
        return meta
    }

    func meta(_ key: MetaKey) throws -> String? {
        try c.cached("SELECT value FROM ss_meta WHERE key = ?").firstRow([.text(key.rawValue)]) { $0.text(0) }
    }

    func setMeta(_ key: MetaKey, _ value: String) throws {
        try Self.setMeta(c, key, value)
    }

    static func setMeta(_ c: SQLiteConnection, _ key: MetaKey, _ value: String) throws {
        try c.cached(
            "INSERT INTO ss_meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"
        )
        .execute([.text(key.rawValue), .text(value)])
    }
}
