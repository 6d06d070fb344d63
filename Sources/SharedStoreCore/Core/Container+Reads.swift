import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// What the sync layer (views, the verifier) asks the store, in one read transaction each.
extension Container {
    /// Every object of `entities` and the current token, from one consistent read.
    package func loadAll(_ entities: [String]) throws -> (token: Int64, objects: [Snapshot]) {
        try read { s in
            let token = try s.currentToken()
            var all: [Snapshot] = []
            for e in entities { all += try s.fetch(FetchRequest(e)) }
            return (token, all)
        }
    }

    /// The stored state of each object (nil: it is gone), from one consistent read.
    package func snapshots(_ ids: Set<ObjectID>) throws -> [ObjectID: Snapshot?] {
        try read { s in
            var out: [ObjectID: Snapshot?] = [:]
            for id in ids { out[id] = try s.snapshot(try model.entity(id.entity), id.primaryKey) }
            return out
        }
    }
}
