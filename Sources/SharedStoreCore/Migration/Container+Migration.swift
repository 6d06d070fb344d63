import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// What a store says about itself, read without opening it for writing (nothing is migrated).
package struct StoreDescription: Sendable {
    package let storeID: UUID
    package let version: Int
    package let format: String
    /// The stored schema (for a store of format 2, version 0, read from its description).
    package let schema: StoredSchema
    /// Whether a token registry held consumers of the store (``Container/noteRegistryInUse()``).
    package var registryInUse = false
}

extension Container {
    /// The store in `group` as it is, read through a read-only connection: its id, model
    /// version and schema; nil when there is no store yet. Nothing is created or migrated.
    ///
    /// - Throws: like ``init(group:model:options:migrations:)`` for a file that is not a store.
    package static func describeStore(group: String) throws -> StoreDescription? {
        guard let c = try openReadOnly(group: group) else { return nil }
        let path = c.path
        return try StoreError.wrap(path: path) {
            try c.readTransaction { () throws -> StoreDescription? in
                // An empty file: another process is making the store at this moment (it makes
                // every table in one transaction), or nobody has yet.
                let tables = try SchemaSQL.tableNames(c)
                if tables.isEmpty { return nil }
                guard tables.contains(SchemaSQL.metaTable) else {
                    throw StoreError(
                        .notAStore,
                        "\(path) is an SQLite database of another application (no ss_meta table); left untouched")
                }
                let meta = try SchemaSQL.meta(c)
                guard !meta.isEmpty else { return nil }
                let id = try StoreFormat.storeID(meta, path: path)
                let format = meta[MetaKey.format.rawValue] ?? "?"
                if format == StoreFormat.legacyFormat {
                    let (schema, _) = try StoredSchema.legacy(
                        meta[MetaKey.model.rawValue] ?? "", model: nil, path: path)
                    return StoreDescription(storeID: id, version: 0, format: format, schema: schema)
                }
                let state = try StoreFormat.state(meta, id: id, path: path)
                var description = StoreDescription(
                    storeID: id, version: state.version, format: format, schema: state.schema)
                description.registryInUse = meta[MetaKey.registryInUse.rawValue] != nil
                return description
            }
        }
    }

    /// The plan that opening the store in `group` with `model` would run, without running it:
    /// nil when there is no store or it is at `model`'s version already.
    ///
    /// - Throws: `.modelNewer` when the store is newer than `model`; `.modelMismatch` when it is
    ///   at the same version with another schema.
    public static func migrationPlan(
        group: String, model: Model, migrations: [MigrationStep] = [], duplicates: DuplicateResolution = .refuse
    ) throws -> MigrationPlan? {
        guard let c = try openReadOnly(group: group) else { return nil }
        let path = c.path
        guard case .older(let state)? = try StoreFormat.inspect(c, model: model, path: path) else { return nil }
        return try StoreError.wrap(path: path) {
            try c.readTransaction {
                try MigrationRunner(c: c, model: model, steps: migrations, duplicates: duplicates, path: path)
                    .plan(state).0
            }
        }
    }

    /// A read-only connection to the store of `group`, checked as every group file is; nil
    /// when the directory or the store does not exist.
    private static func openReadOnly(group: String) throws -> SQLiteConnection? {
        let path = (group as NSString).appendingPathComponent(storeFileName)
        guard FileManager.default.fileExists(atPath: group), FileManager.default.fileExists(atPath: path) else {
            return nil
        }
        try GroupDirectory.check(group)
        for suffix in ["", "-wal", "-shm", "-journal"] { try GroupDirectory.checkFile(path + suffix) }
        var c = try StoreError.wrap(path: path) {
            try SQLiteConnection(path: path, readOnly: true, create: false, busyTimeoutMilliseconds: 5000)
        }
        // A hot journal (left by a crash or power loss while the store was being made, or
        // planted) needs a rollback, which writes the store: this read-only connection never
        // applies it, and its first read fails. Said plainly, with what to do. (A journal another
        // process is writing right now is not hot: the read waits for it.)
        do {
            _ = try StoreError.wrap(path: path) { try SchemaSQL.tableNames(c) }
        } catch let error as StoreError where readsAsItIs(after: error, path: path) {
            c = try StoreError.wrap(path: path) {
                try SQLiteConnection(
                    path: immutableURI(path), readOnly: true, create: false, busyTimeoutMilliseconds: 5000)
            }
            _ = try StoreError.wrap(path: path) { try SchemaSQL.tableNames(c) }
        } catch {
            var st = stat()
            if lstat(path + "-journal", &st) == 0, st.st_size > 0 {
                throw StoreError(
                    .fileAccess,
                    "\(GroupDirectory.shown(path))-journal is a journal left by a crash or power loss while the "
                        + "store was being made (or put there by someone): a command that only reads does not apply "
                        + "it; open the store with any target (e.g. 'widget show'), which rolls it back, or remove "
                        + "the file if it is not this store's")
            }
            throw error
        }
        try StoreError.wrap(path: path) { try SchemaSQL.defineFunctions(c) }
        return c
    }
}
