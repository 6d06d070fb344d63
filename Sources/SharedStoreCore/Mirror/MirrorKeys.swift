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
    /// A server sequence this store pulled (read its row), and a print of that row's origin and
    /// key (``rowPrint(origin:token:)``): the log holding another row there was rewritten since
    /// (a failover that lost rows, an old primary written to), and pulling on would skip rows.
    package static let checkedSequence = "checked_sequence"
    package static let checkedRow = "checked_row"

    /// A 64-bit print of a server row's origin and key (FNV-1a): what ``checkedRow`` holds.
    package static func rowPrint(origin: UUID, token: Int64) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        let u = origin.uuid
        let bytes: [UInt8] = [
            u.0, u.1, u.2, u.3, u.4, u.5, u.6, u.7, u.8, u.9, u.10, u.11, u.12, u.13, u.14, u.15,
        ]
        for byte in bytes + withUnsafeBytes(of: token.littleEndian, Array.init) {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        return Int64(bitPattern: hash)
    }
}
