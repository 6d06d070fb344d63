import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// One object as a mirror uploads it (issue 14): its global id, its stored attributes (derived
/// ones aside: every store computes its own) and its to-one relationships by global id (an
/// absent relationship is nil).
package struct MirrorObject: Sendable, Hashable {
    package var entity: String
    package var globalID: UUID
    package var values: [String: Value]
    package var toOne: [String: UUID]
    /// Its many-to-many links, on the side that owns them (one side per relationship: the
    /// other side's state leaves them out, so a link has one last writer).
    package var toMany: [String: [UUID]]
    /// Its primary key in the store that uploaded it (that store's mirror reads it back after a
    /// restart; other stores ignore it).
    package var originKey: Int64?

    package init(
        entity: String, globalID: UUID, values: [String: Value], toOne: [String: UUID],
        toMany: [String: [UUID]] = [:], originKey: Int64? = nil
    ) {
        self.entity = entity
        self.globalID = globalID
        self.values = values
        self.toOne = toOne
        self.toMany = toMany
        self.originKey = originKey
    }
}

/// One change of a mirrored transaction: an object's whole current state, its deletion, or two
/// objects that a collision made one (`loser` is an alias of `winner` from then on).
package enum MirrorChange: Sendable, Hashable {
    case upsert(MirrorObject)
    case delete(entity: String, globalID: UUID)
    case merge(entity: String, loser: UUID, winner: UUID)

    /// The entity of the object (objects) it names.
    package var entity: String {
        switch self {
        case .upsert(let o): return o.entity
        case .delete(let e, _): return e
        case .merge(let e, _, _): return e
        }
    }

    package var globalID: UUID {
        switch self {
        case .upsert(let o): return o.globalID
        case .delete(_, let g): return g
        case .merge(_, let loser, _): return loser
        }
    }
}

/// What applying one remote transaction did.
package struct MirrorImportResult: Sendable {
    /// The local transaction it made (nil: it changed nothing here, or was applied before).
    package let token: HistoryToken?
    /// False when the pull cursor was at or past it already (another mirror run applied it).
    package let applied: Bool
    /// Whether local changes not yet pushed were found (the caller then keeps looking for them
    /// from the same token next time).
    package let foundUnpushed: Bool
}
