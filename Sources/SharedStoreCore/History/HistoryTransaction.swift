import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// One save as recorded in history: Core Data's NSPersistentHistoryTransaction.
public struct HistoryTransaction: Sendable, Hashable {
    /// The transaction's token: its place in the store's commit order.
    public let token: HistoryToken
    /// The author of the context that saved (``ObjectContext/transactionAuthor``), nil for a context without
    /// one; consumers skip their own transactions by it.
    public let author: String?
    /// The name of the context that saved (``ObjectContext/name``), for diagnostics.
    public let contextName: String?
    /// The process id of the process that saved.
    public let processID: Int64
    /// The name of the executable that saved (`main-app`, `share-extension`, …).
    public let executable: String
    /// When the save committed, by the saving machine's clock.
    public let timestamp: Date
    /// The objects the save inserted, updated or deleted, each once.
    public let changes: [HistoryChange]
}

/// One object's change within a transaction: Core Data's NSPersistentHistoryChange.
public struct HistoryChange: Sendable, Hashable {
    /// What happened to the object: inserted, updated (``HistoryChange/updatedProperties`` says
    /// which properties) or deleted.
    public enum Kind: String, Sendable, Hashable { case insert, update, delete }
    /// Whether the object was inserted, updated or deleted.
    public let kind: Kind
    /// The object's id in this store.
    public let objectID: ObjectID
    /// For an update, the names of the properties that changed.
    public let updatedProperties: [String]
    /// For a delete, the values of attributes marked "preserve value in history on delete".
    public let tombstone: [String: Value]?
    /// The object's global id, the same on every machine a mirror reaches (nil in history
    /// recorded before global ids, or for a row a foreign tool inserted without one).
    public let globalID: UUID?

    /// A change as history records it; the library makes these, a test may too.
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
    /// Where a history request starts.
    public enum Start: Sendable, Hashable {
        /// Everything retained.
        case beginning
        /// Transactions committed after the token.
        case after(HistoryToken)
        /// Transactions committed after the date.
        case afterDate(Date)
    }

    /// Where the request starts (``Start/beginning`` by default).
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

    /// A request for the transactions after `start` whose author is one of `authors` (when given)
    /// and none of `excludingAuthors`, that changed one of `entities` (when given), at most `limit`
    /// of them, read `batchSize` at a time.
    ///
    /// For example:
    /// ```swift
    /// let yesterday = Date(timeIntervalSinceNow: -86_400)
    /// let request = HistoryRequest(start: .afterDate(yesterday), authors: ["ShareExtension"],
    ///                              entities: ["Article"], limit: 100)
    /// ```
    ///
    /// A transaction without an author is never excluded by `excludingAuthors`. Nothing is checked
    /// here: a fetch fails with `.invalidArgument` for a batch size below 1 or a negative limit, and
    /// with `.unknownEntity` for an entity the model lacks.
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

    /// A request for what was committed after `token` (everything retained when nil), leaving out
    /// the transactions of `excludingAuthors`: a consumer's usual request, with its own author
    /// excluded.
    public init(after token: HistoryToken?, excludingAuthors: [String] = [], limit: Int? = nil) {
        self.init(start: token.map(Start.after) ?? .beginning, excludingAuthors: excludingAuthors, limit: limit)
    }
}
