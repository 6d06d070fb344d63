import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// One sort criterion of a fetch.
public struct SortKey: Sendable, Hashable {
    public let path: String
    public let ascending: Bool
    public init(_ path: String, ascending: Bool = true) {
        self.path = path
        self.ascending = ascending
    }
}

/// What to fetch: an entity, a condition, an order, a window.
public struct FetchRequest: Sendable, Hashable {
    public var entity: String
    public var condition: Condition
    public var sort: [SortKey]
    public var limit: Int?
    public var offset: Int
    /// Whether a context's fetch sees its own unsaved inserts, updates and deletes of the
    /// entity (Core Data's `includesPendingChanges`, on by default).
    public var includesPendingChanges = true

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
