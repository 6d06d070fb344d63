import Foundation
import SharedStoreSQLite
import SharedStoreSupport

extension Container {
    /// How SQLite runs `request`: `EXPLAIN QUERY PLAN`'s steps, such as
    /// `SEARCH Article USING INDEX ss_index_Article_isRead_createdAt (isRead=?)`.
    ///
    /// - Throws: ``StoreError`` when the request names an unknown entity or key path, or the
    ///   store cannot be read.
    public func queryPlan(_ request: FetchRequest) throws -> [String] {
        try read { s in try s.queryPlan(request) }
    }
}
