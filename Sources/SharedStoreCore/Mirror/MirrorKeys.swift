import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// The keys of the mirror's state in the store.
package enum MirrorKeys {
    /// The server sequence applied last.
    package static let pullCursor = "pull_cursor"
}
