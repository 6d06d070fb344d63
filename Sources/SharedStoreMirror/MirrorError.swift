import Foundation
import SharedStoreCore
import SharedStorePostgres

/// A mirror's failure, in words, with what kind it is and, for the failures a caller handles,
/// what it is about in a typed form (``Reason``).
///
/// For example:
/// ```swift
/// do { _ = try mirror.round() }
/// catch {
///     switch MirrorError.reason(of: error) {
///     case .serverUnreachable?: break                       // try again later
///     case .newerModel(_, let rowModel, _)?: print("update the app to model", rowModel)
///     default: throw error
///     }
/// }
/// ```
public struct MirrorError: Error, Sendable, CustomStringConvertible {
    public enum Code: Sendable, Hashable {
        /// A server row that cannot be read (another program wrote it): quarantined.
        case malformedRow
        /// A server row made by a newer model: this app must be updated to pull past it.
        case newerModel
        /// Another mirror runs on this store.
        case busy
        /// This role may not use the space (never granted, or revoked): an administrator grants it.
        case accessDenied
        /// The store mirrors into another server log (another space or server): it is refused.
        case otherLog
        /// The server pruned its log past this store's pull cursor, and this store's changes that
        /// did not go up cannot be told apart from what it missed: `--rejoin` takes the server's state.
        case behindHorizon
        /// An administrator moved the space to another server: the space directory names it
        /// (`storectl mirror --directory` follows it on its own).
        case spaceMoved
        /// Anything else (the store cannot be mirrored as it is).
        case other
    }

    /// What a failure is about, in a typed form.
    public enum Reason: Sendable, Hashable {
        /// The server cannot be reached, or the connection to it broke (libpq's words): a later
        /// round with a new connection may work.
        case serverUnreachable(String)
        /// Server transaction `sequence` was made with model `rowModel`, newer than this app's
        /// `appModel`: the app must be updated to pull past it.
        case newerModel(sequence: Int64, rowModel: Int, appModel: Int)
        /// Server transaction `sequence` cannot be read: `problem` says what is malformed.
        case badRow(sequence: Int64, problem: String)
        /// Another mirror runs on this store: `holder` names it as its lock does.
        case busy(holder: String)
        /// Role `role` may not read or write space `space` (never granted, or revoked since).
        case accessDenied(space: String, role: String)
    }

    /// What kind of failure it is (whether a row is quarantined, a follower stops or retries).
    public let code: Code
    /// The failure in words, naming what failed.
    public let description: String
    /// What the failure is about, in a typed form (nil: a failure of another kind, said in
    /// ``description`` alone).
    public let reason: Reason?

    /// A failure described as `description`, of kind `code`, about `reason`.
    public init(_ description: String, code: Code = .other, reason: Reason? = nil) {
        self.code = code
        self.description = description
        self.reason = reason
    }

    /// What a failure of a mirror call is about, whatever it threw: a mirror error's
    /// ``reason``, ``Reason/serverUnreachable(_:)`` for a PostgreSQL connection that could not
    /// be made or broke (``PostgresError/connectionFailed``); nil for anything else (a store
    /// error, a statement the server refused).
    public static func reason(of error: any Error) -> Reason? {
        if let e = error as? MirrorError { return e.reason }
        if let e = error as? PostgresError, e.connectionFailed { return .serverUnreachable(e.message) }
        return nil
    }
}
