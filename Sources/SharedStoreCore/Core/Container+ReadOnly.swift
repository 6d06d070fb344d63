import Foundation
import SharedStoreSQLite
import SharedStoreSupport

// MARK: - Opening a store read-only (Options.readOnly), and reading it as the file is

extension Container {
    /// ``Options/readOnly``: two read-only connections on a store that is at `model`'s version
    /// and format already (read-only connections never checkpoint: the WAL stays).
    static func openReadOnlyStore(path: String, model: Model, timeout: Int32) throws
        -> (SQLiteConnection, SQLiteConnection, StoreFormat.State)
    {
        guard FileManager.default.fileExists(atPath: path) else {
            throw StoreError(.fileAccess, "no store at \(GroupDirectory.shown(path)) (a read-only open makes none)")
        }
        func connection(asItIs: Bool = false) throws -> SQLiteConnection {
            try StoreError.wrap(path: path) {
                let c = try SQLiteConnection(
                    path: asItIs ? Self.immutableURI(path) : path, readOnly: true, create: false,
                    busyTimeoutMilliseconds: timeout)
                try SchemaSQL.defineFunctions(c)
                return c
            }
        }
        var w = try connection()
        var found: StoreFormat.Found?
        var asItIs = false
        do {
            found = try StoreFormat.inspect(w, model: model, path: path)
        } catch let error as StoreError where readsAsItIs(after: error, path: path) {
            asItIs = true
            w = try connection(asItIs: true)
            found = try StoreFormat.inspect(w, model: model, path: path)
        }
        switch found {
        case .ready(let state)?: return (w, try connection(asItIs: asItIs), state)
        case nil:
            throw StoreError(
                .fileAccess, "\(GroupDirectory.shown(path)) holds no store yet (a read-only open makes none)")
        case .older?, .legacy?:
            throw StoreError(
                .migrationRefused,
                "\(GroupDirectory.shown(path)) needs a migration or a format upgrade to model \(model.version) "
                    + "first; a read-only open changes nothing (open it at its own version, or run a target)")
        }
    }

    /// `path` as an SQLite URI that opens it as an immutable file: no lock, no WAL, no -shm.
    static func immutableURI(_ path: String) -> String {
        let escaped = path.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "?", with: "%3f")
            .replacingOccurrences(of: "#", with: "%23")
        return "file:\(escaped)?immutable=1"
    }

    /// Whether this read-only container reads `Store.sqlite` as the file is, without SQLite's
    /// locks and WAL: it could not make the -shm a reader needs and found no WAL (another user's
    /// group, a read-only mount), so a writer working now is not seen.
    package var readsFileAsItIs: Bool {
        reader.path.hasPrefix("file:") && reader.path.hasSuffix("?immutable=1")
    }

    /// Whether a read-only open that failed with `error` reads `path` as the file is instead: a
    /// WAL reader makes the -shm it reads through, and one who may not (a group directory of
    /// another user, a read-only mount) can still read a store with no WAL and no journal.
    static func readsAsItIs(after error: StoreError, path: String) -> Bool {
        error.resultCode?.primary == .readOnly && !FileManager.default.fileExists(atPath: path + "-wal")
            && !FileManager.default.fileExists(atPath: path + "-journal")
    }
}
