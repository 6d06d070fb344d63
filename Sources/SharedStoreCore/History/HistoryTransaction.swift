import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// One save as recorded in history: Core Data's NSPersistentHistoryTransaction.
public struct HistoryTransaction: Sendable, Hashable {
    public let token: HistoryToken
    public let author: String?
    public let contextName: String?
    public let processID: Int64
    public let executable: String
    public let timestamp: Date
    public let changes: [HistoryChange]
}

/// One object's change within a transaction: Core Data's NSPersistentHistoryChange.
public struct HistoryChange: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable { case insert, update, delete }
    public let kind: Kind
    public let objectID: ObjectID
    /// For an update, the names of the properties that changed.
    public let updatedProperties: [String]
    /// For a delete, the values of attributes marked "preserve value in history on delete".
    public let tombstone: [String: Value]?
    /// The object's global id, the same on every machine a mirror reaches (nil in history
    /// recorded before global ids, or for a row a foreign tool inserted without one).
    public let globalID: UUID?

    public init(
        kind: Kind, objectID: ObjectID, updatedProperties: [String], tombstone: [String: Value]?, globalID: UUID? = nil
    ) {
        self.kind = kind
        self.objectID = objectID
        self.updatedProperties = updatedProperties
        self.tombstone = tombstone
        self.globalID = globalID
    }
}

/// What a history fetch returns: Core Data's NSPersistentHistoryChangeRequest.
///
/// For example:
/// ```swift
/// let request = HistoryRequest(after: lastToken, excludingAuthors: ["Widget"])
/// for transaction in try container.fetchHistory(request) { … }
/// ```
public struct HistoryRequest: Sendable, Hashable {
    public enum Start: Sendable, Hashable {
        /// Everything retained.
        case beginning
        /// Transactions committed after the token.
        case after(HistoryToken)
        /// Transactions committed after the date.
        case afterDate(Date)
    }

    public var start: Start
    /// Only these authors (nil: all).
    public var authors: [String]?
    /// Not these authors.
    public var excludedAuthors: [String]
    /// Only changes of these entities; transactions with none are skipped (nil: all).
    public var entities: [String]?
    /// At most this many transactions (nil: no limit).
    public var limit: Int?
    /// How many transactions are read from the store at a time.
    public var batchSize: Int

    public init(
        start: Start = .beginning, authors: [String]? = nil, excludingAuthors: [String] = [],
        entities: [String]? = nil, limit: Int? = nil, batchSize: Int = 512
    ) {
        self.start = start
        self.authors = authors
        self.excludedAuthors = excludingAuthors
        self.entities = entities
        self.limit = limit
        self.batchSize = batchSize
    }

    public init(after token: HistoryToken?, excludingAuthors: [String] = [], limit: Int? = nil) {
        self.init(start: token.map(Start.after) ?? .beginning, excludingAuthors: excludingAuthors, limit: limit)
    }
}
