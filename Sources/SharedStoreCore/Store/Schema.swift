import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// Creates the schema of a model on first open and checks it on every later open.
enum Schema {
    static let formatVersion = "2"

    /// The store's UUID when the schema exists and matches; nil for an empty database. Throws
    /// when the file is not a store, another application's database or a store of another model.
    static func existingStoreID(_ c: SQLiteConnection, model: Model, path: String) throws -> UUID? {
        let expected = model.schemaDescription
        return try StoreError.wrap(path: path) {
            try c.readTransaction { try check(c, expected: expected, path: path) }
        }
    }

    /// Creates the schema, unless another process created it since `existingStoreID` looked;
    /// returns the store's UUID.
    static func create(_ c: SQLiteConnection, model: Model, path: String) throws -> UUID {
        let expected = model.schemaDescription
        return try StoreError.wrap(path: path) {
            try c.writeTransaction {
                if let id = try check(c, expected: expected, path: path) { return id }
                return try create(c, model: model)
            }
        }
    }

    /// The store's UUID when the schema exists and matches, nil when the store is empty.
    private static func check(_ c: SQLiteConnection, expected: String, path: String) throws -> UUID? {
        let tables = try SQLStore.tableNames(c)
        if tables.isEmpty { return nil }
        guard tables.contains(SQLStore.metaTable) else {
            throw StoreError(
                .notAStore, "\(path) is an SQLite database of another application (no ss_meta table); left untouched")
        }
        let meta = try SQLStore.meta(c)
        guard meta[MetaKey.format.rawValue] == formatVersion else {
            throw StoreError(
                .notAStore, "\(path) has an unknown SharedStore format '\(meta[MetaKey.format.rawValue] ?? "none")'")
        }
        guard let idText = meta[MetaKey.storeID.rawValue], let id = UUID(uuidString: idText) else {
            let shown =
                meta[MetaKey.storeID.rawValue].map { "'\(TextSafety.visible(String($0.prefix(60))))'" } ?? "none"
            throw StoreError(
                .notAStore, "\(path) has an invalid store id \(shown) in ss_meta: the store is damaged; left untouched")
        }
        let stored = meta[MetaKey.model.rawValue] ?? ""
        if stored != expected {
            let a = stored.split(separator: "\n").map(String.init)
            let b = expected.split(separator: "\n").map(String.init)
            let detail: String
            if let first = a.first(where: { !b.contains($0) }) {
                detail = "the store has '\(first.trimmingCharacters(in: .whitespaces))', the model does not"
            } else if let first = b.first(where: { !a.contains($0) }) {
                detail = "the model has '\(first.trimmingCharacters(in: .whitespaces))', the store does not"
            } else {
                detail = "the declarations are in another order"
            }
            throw StoreError(.modelMismatch, "\(path) was made with a different model: \(detail); left untouched")
        }
        return id
    }

    private static func create(_ c: SQLiteConnection, model: Model) throws -> UUID {
        let id = UUID()
        try SQLStore.createSchema(
            c, model: model,
            meta: [
                (.format, formatVersion), (.storeID, id.uuidString), (.model, model.schemaDescription),
                (.createdAt, ISO8601.string(Date())), (.historyDeletedThrough, "0"), (.historyDeletedTime, "0"),
            ])
        return id
    }
}
