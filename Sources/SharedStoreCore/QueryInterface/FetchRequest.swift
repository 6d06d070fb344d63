import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// One sort criterion of a fetch.
public struct SortKey: Sendable, Hashable {
    /// The key path sorted on (an attribute, a to-one relationship, or `relationship.attribute`).
    public let path: String
    /// Whether smaller values come first; objects without a value are the smallest.
    public let ascending: Bool
    /// A sort on `path`; ``Key/ascending`` and ``Key/descending`` say the same more briefly.
    public init(_ path: String, ascending: Bool = true) {
        self.path = path
        self.ascending = ascending
    }
}

/// What to fetch: an entity, a condition, an order, a window.
public struct FetchRequest: Sendable, Hashable {
    /// The entity whose objects the request returns; an unknown name fails the fetch with
    /// `.unknownEntity`.
    public var entity: String
    /// Which objects match (``Condition/always``: every object).
    public var condition: Condition
    /// The order of the result. Without keys, objects come in the order of their primary keys (the
    /// order this store first saved them); objects equal on every key come in that order too,
    /// reversed when the last key is descending.
    public var sort: [SortKey]
    /// The most objects the fetch returns (nil: no limit); a negative limit fails with
    /// `.invalidArgument`.
    public var limit: Int?
    /// How many matching objects the fetch skips first; a negative offset fails with
    /// `.invalidArgument`.
    public var offset: Int
    /// Whether a context's fetch sees its own unsaved inserts, updates and deletes of the
    /// entity (Core Data's `includesPendingChanges`, on by default).
    public var includesPendingChanges = true

    /// A request for the objects of `entity` that match `condition`, in the order of `sort`, at most
    /// `limit` of them after skipping `offset`.
    ///
    /// For example:
    /// ```swift
    /// let page = FetchRequest("Article",
    ///     where: Key("isRead") == false && Key("category.name") == "Swift",
    ///     sortedBy: [Key("createdAt").descending], limit: 20, offset: 40)
    /// let articles = try context.fetch(page)
    /// ```
    ///
    /// Nothing is checked here: the names, the value types and the window are checked when the request
    /// runs (``ObjectContext/fetch(_:)``), which throws ``StoreError`` with `.unknownEntity`,
    /// `.unknownProperty`, `.validation` (a value of the wrong type) or `.invalidArgument`.
    public init(
        _ entity: String, where condition: Condition = .always, sortedBy sort: [SortKey] = [], limit: Int? = nil,
        offset: Int = 0
    ) {
        self.entity = entity
        self.condition = condition
        self.sort = sort
        self.limit = limit
        self.offset = offset
    }
}
