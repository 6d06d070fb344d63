import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// Every error SharedStore throws: a code to match on, a message that names the problem, and
/// the context it happened in (a path, an object id, a token, SQL).
///
/// For example:
/// ```swift
/// do { try context.save() }
/// catch let error as StoreError where error.code == .validation { print(error.message) }
/// ```
public struct StoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure happened: match on it (`catch let e as StoreError where e.code == .busy`).
    /// Its raw value is stable text (`"historyExpired"`), for logs and JSON.
    public enum Code: String, Sendable, Hashable {
        /// The model is inconsistent (unknown destination, bad name, …).
        case invalidModel
        /// The store was made with a different model of the same version (or one a migration
        /// cannot reach); it was left untouched.
        case modelMismatch
        /// The store was migrated by a newer version of the app: this model is older than the
        /// store's; update the app. The store was left untouched.
        case modelNewer
        /// Another process migrated the store to a newer model while this one runs: its next read
        /// or write fails with this error, never with a stale schema. Restart with the newer app.
        case modelOutdated
        /// A migration was refused (a change lightweight migration cannot make, or stored objects
        /// that break the new model); nothing was touched.
        case migrationRefused
        /// The file is not a SharedStore store (not a database, or a database of something else).
        case notAStore
        /// A history record of the store cannot be decoded (the store is damaged).
        case historyCorrupt
        /// The group directory or a file in it cannot be created, opened or written.
        case fileAccess
        /// The disk is full; the save was rolled back.
        case diskFull
        /// The store stayed locked past the busy deadline.
        case busy
        /// A value breaks its attribute's rules (type, required, length, pattern, range).
        case validation
        /// A uniqueness constraint would be broken.
        case uniqueness
        /// Objects changed in the store since the context read them (merge policy `.error`);
        /// ``StoreError/conflicts`` lists them.
        case conflict
        /// A delete is denied by a `deny` delete rule.
        case deleteDenied
        /// The object does not exist (never did, or was deleted).
        case objectNotFound
        /// An unknown entity or property name.
        case unknownEntity, unknownProperty
        /// A malformed object id or token string.
        case malformedID, malformedToken
        /// The token is older than the retained history: reload in full.
        case historyExpired
        /// The token belongs to another store.
        case foreignToken
        /// The object id belongs to another store.
        case foreignID
        /// `storectl verify` found an invariant that does not hold.
        case verificationFailed
        /// The token registry (`tokens.lmdb`) is damaged: `storectl repair-registry` moves it
        /// aside and starts an empty one (every consumer then reloads in full).
        case registryDamaged
        /// Every token number has been used (only a damaged store gets here): nothing was saved.
        case tokenSpaceExhausted
        /// A request or argument out of range.
        case invalidArgument
        /// Anything else SQLite or the system reported.
        case storage
    }

    /// The kind of failure.
    public let code: Code
    /// One line for people that names the problem: the path, object, property, token or rule.
    public let message: String
    /// Extra context: the SQL, path or token involved.
    public let context: String?
    /// For `.conflict`: each conflicting object with the values read, stored and being saved.
    public let conflicts: [MergeConflict]
    /// The SQLite result code behind the error, when SQLite reported it; match it with `~=`
    /// (`case .constraint` matches every constraint code).
    public let resultCode: ResultCode?
    /// What the failure is about, in a typed form, for the failures a caller handles: the
    /// constraint, values and existing object of a `.uniqueness` error, the object, property and
    /// rule of a `.validation` error (``uniqueness``, ``validation``); nil for the others.
    public let details: Details?

    /// An error with its code, message and what goes with it (its typed ``details`` among them);
    /// the library makes these, a test or a wrapper may too.
    public init(
        _ code: Code, _ message: String, context: String? = nil, conflicts: [MergeConflict] = [],
        resultCode: ResultCode? = nil, details: Details? = nil
    ) {
        self.code = code
        self.message = message
        self.context = context
        self.conflicts = conflicts
        self.resultCode = resultCode
        self.details = details
    }

    /// The message, followed by the context in brackets when there is one (its first 500
    /// characters: the SQL of a request of thousands of conditions made a message of 800 KB;
    /// ``context`` holds it whole).
    public var description: String {
        guard let context else { return message }
        guard context.count > 600 else { return "\(message) [\(context)]" }
        return "\(message) [\(context.prefix(500))… (\(context.count) characters)]"
    }

    /// Maps an SQLite failure to a store error, keeping SQLite's words and result code.
    init(_ error: SQLiteError, path: String) {
        let (code, message, context) = Self.describe(error, path: path)
        self.init(code, message, context: context, resultCode: error.resultCode)
    }

    private static func describe(_ error: SQLiteError, path: String) -> (Code, String, String?) {
        if error.isBusy {
            return (.busy, "store busy: \(path) stayed locked past the busy timeout", error.description)
        } else if error.isDiskFull {
            return (.diskFull, "disk full while writing \(path); nothing was saved", error.description)
        } else if error.isNotADatabase {
            return (.notAStore, "\(path) is not a SharedStore store (\(error.message))", error.sql)
        } else if error.isReadOnly {
            let directory = PathName.parent(of: path)
            if !directory.isEmpty, access(directory, W_OK) != 0 {
                // A directory removed under a running process is not a read-only one.
                if errno == ENOENT {
                    return (
                        .fileAccess,
                        "group directory \(directory) no longer exists (removed while in use): \(error.message)",
                        error.sql
                    )
                }
                return (.fileAccess, "group directory \(directory) is read-only: \(error.message)", error.sql)
            }
            return (.fileAccess, "cannot write \(path): \(error.message)", error.sql)
        }
        return (.storage, "storage error in \(path): \(error.message)", error.sql)
    }
}

extension StoreError {
    static func wrap<T>(path: String, _ body: () throws -> T) throws -> T {
        do { return try body() } catch let e as SQLiteError { throw StoreError(e, path: path) }
    }
}
