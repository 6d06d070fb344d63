import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// Creates a store's schema on first open, checks it on every later open, and brings an older
/// store to the model's version (``MigrationRunner``).
///
/// A store keeps (in `ss_meta`) its model version, its schema's canonical JSON
/// (``StoredSchema``) and its history catalog (``HistoryCatalog``). A model of the same version
/// must have the same schema; a newer model migrates the store; an older one cannot open it.
enum StoreFormat {
    /// Format 4: every entity table has a global id column (issue 14).
    static let formatVersion = "4"
    /// Stores made before global ids: brought to format 4 on open or by the migration.
    static let priorFormat = "3"
    /// Stores made before model versions: a model description, no version, no catalog.
    static let legacyFormat = "2"

    /// What an existing store says about itself.
    struct State {
        let storeID: UUID
        let version: Int
        let schema: StoredSchema
        let catalog: HistoryCatalog
    }

    /// What opening found.
    enum Found {
        /// The store is at the model's version and schema.
        case ready(State)
        /// The store is at an older version: it needs the migration to the model's.
        case older(State)
        /// A store of format 2 or 3 at the model's schema: brought to format 4 on open (global
        /// ids for its objects), keeping the catalog its history was numbered by. (One whose
        /// schema differs is `.older`: migrated, which brings it to format 4 too.)
        case legacy(State)
    }

    /// What the store at `c` is for `model`; nil for an empty database. Throws when the file is
    /// not a store, another application's database, a store of a newer model (`.modelNewer`),
    /// or of another model at the same version (`.modelMismatch`).
    static func inspect(_ c: SQLiteConnection, model: Model, path: String) throws -> Found? {
        try StoreError.wrap(path: path) {
            try c.readTransaction { try found(c, model: model, path: path) }
        }
    }

    private static func found(_ c: SQLiteConnection, model: Model, path: String) throws -> Found? {
        let tables = try SchemaSQL.tableNames(c)
        if tables.isEmpty { return nil }
        guard tables.contains(SchemaSQL.metaTable) else {
            throw StoreError(
                .notAStore, "\(path) is an SQLite database of another application (no ss_meta table); left untouched")
        }
        let meta = try SchemaSQL.meta(c)
        let id = try storeID(meta, path: path)
        switch meta[MetaKey.format.rawValue] {
        case legacyFormat:
            let state = try legacyState(meta, id: id, model: model, path: path)
            // Its schema is the model's (indexes were never described): adopt it as it is.
            if state.schema.withoutIndexes == StoredSchema(model).withoutIndexes { return .legacy(state) }
            return .older(state)
        case formatVersion, priorFormat:
            let state = try self.state(meta, id: id, path: path)
            let found = try compare(state, model: model, path: path)
            if meta[MetaKey.format.rawValue] == priorFormat, case .ready(let state) = found { return .legacy(state) }
            return found
        default:
            throw StoreError(
                .notAStore, "\(path) has an unknown SharedStore format '\(meta[MetaKey.format.rawValue] ?? "none")'")
        }
    }

    /// Same version and schema: ready; an older store: to migrate; otherwise an error.
    private static func compare(_ state: State, model: Model, path: String) throws -> Found {
        if state.version > model.version {
            throw StoreError(
                .modelNewer,
                "this store was migrated by a newer version: model \(state.version); update the app "
                    + "(this one has model \(model.version)); \(path) left untouched")
        }
        if state.version < model.version { return .older(state) }
        let mine = StoredSchema(model)
        guard mine == state.schema else {
            throw StoreError(
                .modelMismatch,
                "\(path) was made with a different model of the same version \(model.version): "
                    + "\(mine.firstDifference(from: state.schema)); a model that changes the schema needs a higher "
                    + "version; left untouched")
        }
        return .ready(state)
    }

    static func storeID(_ meta: [String: String], path: String) throws -> UUID {
        guard let idText = meta[MetaKey.storeID.rawValue], let id = UUID(uuidString: idText) else {
            let shown =
                meta[MetaKey.storeID.rawValue].map { "'\(TextSafety.visible(String($0.prefix(60))))'" } ?? "none"
            throw StoreError(
                .notAStore, "\(path) has an invalid store id \(shown) in ss_meta: the store is damaged; left untouched")
        }
        return id
    }

    /// A store of format 2 as version 0, its schema and catalog read from its description.
    static func legacyState(_ meta: [String: String], id: UUID, model: Model, path: String) throws -> State {
        let (schema, catalog) = try StoredSchema.legacy(meta[MetaKey.model.rawValue] ?? "", model: model, path: path)
        return State(storeID: id, version: 0, schema: schema, catalog: catalog)
    }

    /// What the store's meta says, whatever its format (a store of format 2 is version 0).
    static func currentState(_ meta: [String: String], id: UUID, model: Model, path: String) throws -> State {
        meta[MetaKey.format.rawValue] == legacyFormat
            ? try legacyState(meta, id: id, model: model, path: path) : try state(meta, id: id, path: path)
    }

    static func state(_ meta: [String: String], id: UUID, path: String) throws -> State {
        guard let versionText = meta[MetaKey.modelVersion.rawValue], let version = Int(versionText), version >= 1,
            let schemaText = meta[MetaKey.schema.rawValue], let catalogText = meta[MetaKey.catalog.rawValue]
        else {
            throw StoreError(
                .notAStore, "\(path) lacks its model version, schema or catalog in ss_meta: the store is damaged")
        }
        return State(
            storeID: id, version: version, schema: try StoredSchema(json: schemaText, path: path),
            catalog: try HistoryCatalog(json: catalogText, path: path))
    }

    /// The meta rows of a store at `model`'s version and schema.
    static func metaRows(model: Model, catalog: HistoryCatalog) -> [(MetaKey, String)] {
        [
            (.format, formatVersion), (.modelVersion, String(model.version)), (.schema, StoredSchema(model).json),
            (.catalog, catalog.json),
        ]
    }

    // MARK: - Creating

    /// Creates the schema, unless another process created it since `inspect` looked; returns
    /// what the store is.
    static func create(_ c: SQLiteConnection, model: Model, path: String) throws -> Found {
        try StoreError.wrap(path: path) {
            try c.writeTransaction {
                if let found = try found(c, model: model, path: path) { return found }
                let id = UUID()
                let catalog = HistoryCatalog(model)
                try SchemaSQL.createSchema(
                    c, model: model,
                    meta: metaRows(model: model, catalog: catalog) + [
                        (.storeID, id.uuidString), (.createdAt, ISO8601.string(Date())),
                        (.historyDeletedThrough, "0"), (.historyDeletedTime, "0"),
                    ])
                return .ready(State(storeID: id, version: model.version, schema: StoredSchema(model), catalog: catalog))
            }
        }
    }

    /// Brings a store of format 2 or 3 whose schema is the model's to format 4, keeping the
    /// catalog its history was numbered by (a format 2 description's declaration order), and
    /// gives each of its objects a global id.
    static func adoptLegacy(_ c: SQLiteConnection, model: Model, path: String) throws -> State {
        try StoreError.wrap(path: path) {
            try c.writeTransaction {
                switch try found(c, model: model, path: path) {
                case .ready(let state)?: return state
                case .legacy(let legacy)?:
                    try SchemaSQL.upgradeLegacy(c, meta: metaRows(model: model, catalog: legacy.catalog))
                    try SchemaSQL.addGlobalIDs(c, tables: model.entities.map(\.name))
                    return State(
                        storeID: legacy.storeID, version: model.version, schema: StoredSchema(model),
                        catalog: legacy.catalog)
                case .older?, nil:
                    throw StoreError(.notAStore, "\(path) changed while it was being opened; open it again")
                }
            }
        }
    }
}
