import Foundation
import SharedStoreSupport

/// The properties one save writes to one object: attribute values and to-one targets (by
/// primary key; `.some(nil)` clears the relationship).
struct PropertyChanges {
    var values: [String: Value]
    var relationships: [String: Int64?]
}

/// Resolves a save's changes against what another save put in the store meanwhile, by the
/// context's ``MergePolicy``, property by property: Core Data's five policies.
struct MergeResolver {
    let policy: MergePolicy

    /// What to do with an update of an object whose version moved since the context read it.
    enum Update {
        /// Write these properties.
        case write(PropertyChanges)
        /// Leave the object as the store has it.
        case skip
        /// Fail the save (`.error`), reporting this.
        case conflict(MergeConflict)
    }

    /// What to do with an update of an object another save deleted.
    enum Deleted {
        case skip
        case conflict(MergeConflict)
        /// Bring it back under its id with the context's values (object trump, overwrite).
        case restore
    }

    /// Resolves an update: `read` is what the context read, `current` what the store holds.
    func update(_ e: Entity, read: Snapshot, current: Snapshot, _ changes: PropertyChanges) -> Update {
        guard read.version != current.version else { return .write(changes) }
        var changes = changes
        let mine = Set(changes.values.keys).union(changes.relationships.keys)
        let theirs = Set(e.attributes.map(\.name).filter { read[$0] != current[$0] })
            .union(e.toOneRelationships.map(\.name).filter { read.relationships[$0] != current.relationships[$0] })
        switch policy {
        case .error:
            return .conflict(Self.conflict(e, read: read, current: current, changes, theirs: theirs))
        case .rollback:
            return .skip
        case .storeTrump:
            for name in mine.intersection(theirs) {
                changes.values.removeValue(forKey: name)
                changes.relationships.removeValue(forKey: name)
            }
        case .objectTrump:
            break
        case .overwrite:
            // The context's whole object: what it read, with its own changes on top. Not its
            // derived values: the save computes those (a count or sum read before another
            // process changed what it sums, written back, came out wrong by that change).
            for a in e.attributes where !a.isDerived && changes.values[a.name] == nil {
                changes.values[a.name] = read[a.name]
            }
            for r in e.toOneRelationships where changes.relationships[r.name] == nil {
                changes.relationships[r.name] = .some(read.relationships[r.name]?.primaryKey)
            }
        }
        return .write(changes)
    }

    /// Resolves an update of an object deleted in the store: it stays deleted (store trump,
    /// rollback), fails the save (error), or comes back (object trump, overwrite).
    func deleted(read: Snapshot) -> Deleted {
        switch policy {
        case .error:
            return .conflict(
                MergeConflict(
                    objectID: read.id, deletedInStore: true, properties: [], versionRead: read.version,
                    versionStored: nil))
        case .storeTrump, .rollback:
            return .skip
        case .objectTrump, .overwrite:
            return .restore
        }
    }

    /// What happens to a stored object whose unique key an insert repeats (under any policy but
    /// `.error`, where the insert goes on and fails on the constraint): the two become one.
    enum Duplicate {
        /// The stored object stays as it is (store trump, rollback).
        case keepStored
        /// The stored object takes these values (object trump; overwrite: defaults for the rest).
        case update([String: Value])
    }

    func duplicate(_ e: Entity, _ values: [String: Value]) -> Duplicate {
        switch policy {
        case .error, .storeTrump, .rollback:
            return .keepStored
        case .objectTrump:
            return .update(values)
        case .overwrite:
            var all = values
            // Defaults for the rest, but not for derived values: the save computes those.
            for a in e.attributes where !a.isDerived && all[a.name] == nil { all[a.name] = a.defaultValue }
            return .update(all)
        }
    }

    /// Whether a duplicate insert's references to objects inserted later in the save are set
    /// on the stored object too.
    var duplicateTakesReferences: Bool {
        switch policy {
        case .objectTrump, .overwrite: return true
        case .error, .storeTrump, .rollback: return false
        }
    }

    static func conflict(
        _ e: Entity, read: Snapshot, current: Snapshot, _ changes: PropertyChanges, theirs: Set<String>
    ) -> MergeConflict {
        func link(_ id: ObjectID?) -> Value { id.map { .string($0.description) } ?? .null }
        var properties: [MergeConflict.Property] = []
        for a in e.attributes {
            guard let v = changes.values[a.name] else { continue }
            properties.append(.init(name: a.name, read: read[a.name], stored: current[a.name], saving: v))
        }
        for r in e.toOneRelationships {
            guard let target = changes.relationships[r.name] else { continue }
            let saving: Value = target.map { .string("\(r.destination)/\($0)") } ?? .null
            properties.append(
                .init(
                    name: r.name, read: link(read.relationships[r.name]), stored: link(current.relationships[r.name]),
                    saving: saving))
        }
        properties.sort { (theirs.contains($0.name) ? 0 : 1, $0.name) < (theirs.contains($1.name) ? 0 : 1, $1.name) }
        return MergeConflict(
            objectID: read.id, deletedInStore: false, properties: properties, versionRead: read.version,
            versionStored: current.version)
    }
}
