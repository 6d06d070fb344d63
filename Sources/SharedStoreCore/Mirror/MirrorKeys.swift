import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// The keys of the mirror's state in the store.
package enum MirrorKeys {
    /// The server sequence applied last.
    package static let pullCursor = "pull_cursor"
    /// The id of the server log the store mirrors into (`MirrorServer.logID()`): another is refused.
    package static let serverLog = "server_log_id"
    /// The author of the mirror's own transactions (``Mirror/author``): an app may not save under
    /// it on a mirrored store.
    package static let author = "Mirror"
    /// 1: an import met this store's newer state (an entity with a uniqueness constraint, where a
    /// collision here may differ from the server's order, or an object it put its own state
    /// back on), or a full upload or a restore's pull-back ran: the next
    /// settled round makes the store the state the server's log gives it
    /// (``Container/mirrorReconcile(to:aliases:unpushedAfter:author:contextName:)``). 2: that
    /// failed; nothing is tried again before the next such import. 0 or absent: nothing to do.
    package static let reconcile = "reconcile_needed"
}
