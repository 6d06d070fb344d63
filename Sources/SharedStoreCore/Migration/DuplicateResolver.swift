import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// What a migration does with stored objects that break a uniqueness constraint the new model
/// adds (Core Data's merge policies for a constraint conflict, applied once).
public enum DuplicateResolution: String, Sendable, Hashable {
    /// The migration is refused, listing the duplicated values (the default).
    case refuse
    /// The object stored first stays (store trump); the others are deleted.
    case keepOldest
    /// The object stored last stays (object trump); the others are deleted.
    case keepNewest
}

/// Resolves the duplicates of one new uniqueness constraint inside the migration's transaction:
/// one object of each group stays; every to-one reference and many-to-many link to the others
/// moves to it; the others are deleted. Each change is recorded for the migration's history
/// transaction, so that consumers merge it like any save.
struct DuplicateResolver {
    let c: SQLiteConnection
    let model: Model
    let resolution: DuplicateResolution
    private(set) var changes: [RecordedChange] = []

    init(c: SQLiteConnection, model: Model, resolution: DuplicateResolution) {
        self.c = c
        self.model = model
        self.resolution = resolution
    }

    /// Resolves the duplicates of `columns` of entity `name` (new names); returns how many
    /// objects were deleted.
    mutating func resolve(entity name: String, columns: [String]) throws -> Int {
        let e = try model.entity(name)
        let index = model.index(of: e)
        var deleted = 0
        for group in try SchemaSQL.duplicateGroups(c, e.name, columns) {
            guard let keep = resolution == .keepNewest ? group.last : group.first else { continue }
            let others = group.filter { $0 != keep }
            try moveReferences(to: e, from: others, keep: keep)
            let preserved = e.attributes.enumerated().filter { $0.element.preservesValueInHistoryOnDeletion }
            for pk in others {
                let values = try SchemaSQL.rowValues(
                    c, e.name, pk, preserved.map { ($0.element.name, $0.element.type) })
                changes.append(
                    RecordedChange(
                        kind: .delete, entity: index, primaryKey: pk,
                        tombstone: Array(zip(preserved.map(\.offset), values)),
                        globalID: try SchemaSQL.globalID(c, e.name, pk)))
            }
            try SchemaSQL.deleteRows(c, e.name, others)
            deleted += others.count
        }
        return deleted
    }

    /// Every to-one reference and many-to-many link to one of `others` now names `keep`.
    private mutating func moveReferences(to e: Entity, from others: [Int64], keep: Int64) throws {
        for x in model.entities {
            for r in x.relationships where r.destination == e.name {
                let xi = model.index(of: x)
                if !r.isToMany {
                    for pk in try SchemaSQL.repoint(c, x.name, r.name, from: others, to: keep) {
                        changes.append(
                            RecordedChange(
                                kind: .update, entity: xi, primaryKey: pk, updated: [x.historyIndex(of: r.name)]))
                    }
                } else if let join = model.joinTable(x, r) {
                    // The links' column on e's side is the one x's side calls theirs (a
                    // relationship of e to itself comes twice, once per column).
                    for pk in try SchemaSQL.moveLinks(
                        c, join.name, mine: join.theirs, theirs: join.mine, from: others, to: keep)
                    {
                        changes.append(
                            RecordedChange(
                                kind: .update, entity: xi, primaryKey: pk, updated: [x.historyIndex(of: r.name)]))
                    }
                }
            }
        }
    }
}
