import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// Applies one remote transaction's changes inside the import's write transaction.
struct MirrorImporter {
    let s: TransactionSQL
    let sequence: Int64
    let unpushed: Set<UUID>
    let uploaded: [UUID: Int64]
    /// The rows this store's unpushed history names, by global id (``key(_:_:)``).
    var unpushedRows: [UUID: ObjectID] = [:] {
        didSet { unpushedEntities = Set(unpushedRows.values.map(\.entity)) }
    }
    /// The entities of those rows (asked for every change of an entity with a uniqueness
    /// constraint: not read from the rows each time).
    private var unpushedEntities = Set<String>()
    var w: ChangeWriter
    /// Objects whose relationships wait for the rest of the transaction (``relate()``).
    var related: [(Entity, Int64, MirrorObject)] = []
    /// The payload was made with an older model: names renamed since are read under their old
    /// names.
    var older = false
    /// Whether this store holds a state newer than the transaction of any object.
    let holdsNewer: Bool
    /// The sequence of this store's last upload of an object of each entity (nil: not known,
    /// taken as any entity's).
    var uploadedEntities: [String: Int64]?
    /// Set when this store may have applied the transaction otherwise than the server's order
    /// does: while it holds newer states, an object of an entity with a uniqueness constraint
    /// was made, deleted, merged or given other unique values (whether two objects collide here
    /// may differ from whether they collide in the server's order), or a remote delete of an
    /// object held newer here was not applied. The store is made the log's state once it
    /// settles (``Container/mirrorReconcile(to:known:aliases:unpushedAfter:author:contextName:)``).
    /// A change that leaves unique values as they are (a category's kept count) does not set it.
    var mayDiverge = false

    init(s: TransactionSQL, sequence: Int64, unpushed: Set<UUID>, uploaded: [UUID: Int64]) {
        self.s = s
        self.sequence = sequence
        self.unpushed = unpushed
        self.uploaded = uploaded
        holdsNewer = !unpushed.isEmpty || uploaded.values.contains { $0 > sequence }
        w = ChangeWriter(s, runsHooks: false, forMirror: true)
    }

    /// Notes a change of `e` that makes, deletes or merges an object, or gives one the unique
    /// values `holder` (the object here that holds them now, nil: none) does not match
    /// (see ``mayDiverge``).
    mutating func noteUniqueChange(of e: Entity, holder: Int64? = nil, own: Int64? = nil) {
        if holdsNewer(of: e) && !e.uniquenessConstraints.isEmpty && (own == nil || holder != own) { mayDiverge = true }
    }

    /// Whether this store holds a newer state of an object of `e`: only then can a collision of
    /// `e`'s objects here differ from the server's order.
    func holdsNewer(of e: Entity) -> Bool {
        guard holdsNewer else { return false }
        guard let uploadedEntities else { return true }
        return (uploadedEntities[e.name] ?? 0) > sequence || unpushedEntities.contains(e.name)
    }

    var model: Model { s.model }

    /// The entity a payload names (an older payload may name it as it was called before).
    func entity(named name: String) -> Entity? {
        if let e = model.entity(named: name) { return e }
        return older ? model.entities.first { $0.renamedFrom == name } : nil
    }

    /// The value of `a` a payload holds (an older payload may hold it under its former name).
    func value(_ object: MirrorObject, _ a: Attribute) -> Value? {
        if let v = object.values[a.name] { return v }
        return older ? a.renamedFrom.flatMap { object.values[$0] } : nil
    }

    /// The object `gid` stands for here (following aliases left by collisions).
    func resolve(_ gid: UUID) throws -> UUID { try Self.resolve(s, gid) }

    static func resolve(_ s: TransactionSQL, _ gid: UUID) throws -> UUID {
        // Chains are kept one step long (``TransactionSQL/setAlias(_:to:)``); a longer one, from a
        // store made before that, is followed for a while.
        var current = gid
        for _ in 0..<64 {
            guard let next = try s.alias(of: current), next != current else { return current }
            current = next
        }
        return current
    }

    /// The row of the object `gid` of `e` here: through the mirror's map, or for an object this
    /// store changed and has not recorded in it yet, the row its history names (recorded now).
    func key(_ e: Entity, _ gid: UUID) throws -> Int64? {
        if let pk = try s.mirroredKey(e, gid) { return pk }
        guard let row = unpushedRows[gid], row.entity == e.name, try s.globalID(e, row.primaryKey) == gid else {
            return nil
        }
        try s.mapID(gid, row.primaryKey)
        return row.primaryKey
    }

    /// Refuses a row that names `gid` as an object of `e` when `gid` names an object of another
    /// entity here (a row another program wrote; the pull quarantines it).
    /// (An object of this store's unpushed changes is not in the map yet: its row says.)
    func requireNotOtherEntity(_ e: Entity, _ gid: UUID) throws {
        let unmapped = unpushedRows[gid].flatMap { $0.entity == e.name ? nil : $0.entity }
        guard let other = try unmapped ?? s.mappedEntity(gid, other: e) else { return }
        throw StoreError.validation(
            "global id \(GlobalID.text(gid)) names a \(other) here, and the row makes it a \(e.name)",
            object: "\(e.name) \(GlobalID.text(gid))", property: nil, rule: .globalIDEntity(other))
    }

    /// Whether this store holds a state of `gid` newer in the server's order.
    func isNewerHere(_ gid: UUID) -> Bool {
        unpushed.contains(gid) || (uploaded[gid] ?? 0) > sequence
    }

    /// Applies one change. `again`: this store's own newer state of the object, put back after
    /// the transaction's changes (its relationships are set last, whatever the transaction did).
    mutating func apply(_ change: MirrorChange, again: Bool = false) throws {
        switch change {
        case .delete(let entity, let remote):
            // An entity this model does not have (a newer machine's): nothing to delete.
            guard let e = self.entity(named: entity) else { return }
            noteUniqueChange(of: e)
            let gid = try resolve(remote)
            // A remote delete of an object this store holds newer is not applied: it ends as the
            // server's order says only once this store's state went up.
            if !again && isNewerHere(gid) { mayDiverge = true }
            guard again || !isNewerHere(gid), let pk = try key(e, gid) else { return }
            try w.delete(e, pks: [pk])
        case .merge(let entity, let loser, let winner):
            try applyMerge(entity, loser, winner)
        case .upsert(let object):
            guard let e = self.entity(named: object.entity) else { return }
            let gid = try resolve(object.globalID)
            let changes = try propertyChanges(e, object)
            let applied: Int64?
            let known = try key(e, gid)
            if !e.uniquenessConstraints.isEmpty && holdsNewer(of: e) {
                noteUniqueChange(
                    of: e, holder: try w.existingUnique(e, changes, object: "\(e.name) \(gid)"), own: known)
            }
            // One global id never names two objects, not even of two entities.
            if known == nil { try requireNotOtherEntity(e, gid) }
            if let pk = known {
                if let other = try w.existingUnique(e, changes, object: "\(e.name) \(gid)"), other != pk {
                    applied = try merge(e, pk, gid, colliding: other, changes)
                } else {
                    try w.update(e, pk: pk, changes, object: "\(e.name) \(gid)")
                    applied = pk
                }
            } else if let pk = try w.existingUnique(e, changes, object: "\(e.name) \(gid)") {
                applied = try collide(e, pk, incoming: gid, changes)
            } else {
                let pk = try w.insert(e, changes, object: "\(e.name) \(gid)", globalID: gid)
                try s.mapID(gid, pk)
                applied = pk
            }
            if let applied,
                again || !object.toMany.isEmpty
                    || object.toOne.count > changes.relationships.values.count(where: { $0 != nil })
            {
                related.append((e, applied, object))
            }
        }
    }

    /// After every object of the transaction is in: the to-one relationships whose targets came
    /// later in it, and the many-to-many links.
    mutating func relate() throws {
        for (e, pk, object) in related {
            // Gone since (a later change of the transaction deleted it, or merged it away).
            guard try s.globalID(e, pk) != nil else { continue }
            var changes = PropertyChanges(values: [:], relationships: [:])
            // Every to-one, absent ones too: a later entry of the same object (this store's
            // newer state) settles what an earlier one set.
            for r in e.toOneRelationships {
                let target = try object.toOne[r.name].map { try resolve($0) }
                changes.relationships[r.name] = .some(
                    try target.flatMap { try key(try model.entity(r.destination), $0) })
            }
            if !changes.relationships.isEmpty {
                try w.update(e, pk: pk, changes, object: "\(e.name) \(object.globalID)")
            }
            try setLinks(e, pk, object)
        }
    }

    /// Makes the many-to-many links `object` owns those of row `pk` (targets this store does
    /// not have are left out).
    mutating func setLinks(_ e: Entity, _ pk: Int64, _ object: MirrorObject) throws {
        for (name, targets) in object.toMany {
            guard let r = e.relationship(named: name), let join = model.joinTable(e, r), join.isOwner else { continue }
            let destination = try model.entity(r.destination)
            let wanted = Set(try targets.compactMap { try key(destination, try resolve($0)) })
            let current = Set(try s.linked(join, to: pk))
            for t in current.subtracting(wanted).sorted() { try w.link(e, pk, r, t, linked: false) }
            for t in wanted.subtracting(current).sorted() { try w.link(e, pk, r, t, linked: true) }
        }
    }

    /// Two objects another store made one (a collision there that this store's order may not
    /// have met): the loser's references move to the winner and it goes; a winner this store
    /// does not have takes over the loser's row.
    mutating func applyMerge(_ entity: String, _ loser: UUID, _ winner: UUID) throws {
        guard let e = self.entity(named: entity) else { return }
        noteUniqueChange(of: e)
        let (l, w) = (try resolve(loser), try resolve(winner))
        guard l != w else { return }
        let (kl, kw) = (try key(e, l), try key(e, w))
        // A merge of objects of `e`: an id that names an object of another entity here would end
        // as two objects' id, or as an alias that turns that object's later rows away.
        if kl == nil { try requireNotOtherEntity(e, l) }
        if kw == nil { try requireNotOtherEntity(e, w) }
        switch (kl, kw) {
        case (let pl?, let pw?):
            try absorb(e, loser: pl, into: pw)
        case (let pl?, nil):
            try s.setGlobalID(e, pl, w)
            try s.mapID(w, pl)
        default:
            break
        }
        try s.setAlias(l, to: w)
    }

    /// A merge here that involves an object this store holds newer than the server's order
    /// (its unpushed change, or its upload further on): the other machines may not meet that
    /// collision where this store did, so the merge itself goes up with the next push.
    func noteMerge(_ e: Entity, loser: UUID, winner: UUID) throws {
        guard isNewerHere(loser) || isNewerHere(winner) else { return }
        try s.recordMerge(e.name, loser: loser, winner: winner)
    }

    /// An update that gives object `pk` (`gid`) the uniqueness values of another object here
    /// (a category renamed to the name another machine gave a new one): the two become one, the
    /// smaller global id, with its own state; the other's references move to it and it goes.
    /// Returns the row whose state the change became (nil: the other object's stays).
    mutating func merge(_ e: Entity, _ pk: Int64, _ gid: UUID, colliding other: Int64, _ changes: PropertyChanges)
        throws -> Int64?
    {
        let otherID = try s.globalID(e, other)
        if let otherID, GlobalID.precedes(otherID, gid) {
            try absorb(e, loser: pk, into: other)
            try s.setAlias(gid, to: otherID)
            try noteMerge(e, loser: gid, winner: otherID)
            return nil
        }
        try absorb(e, loser: other, into: pk)
        if let otherID {
            try s.setAlias(otherID, to: gid)
            try noteMerge(e, loser: otherID, winner: gid)
        }
        try w.update(e, pk: pk, changes, object: "\(e.name) \(gid)")
        return pk
    }

    /// Points every reference to `loser` at `winner` (saved as updates of the referring
    /// objects: their counts and derived attributes follow), then deletes `loser`.
    mutating func absorb(_ e: Entity, loser: Int64, into winner: Int64) throws {
        for x in model.entities {
            for r in x.relationships where r.destination == e.name {
                if !r.isToMany {
                    for ref in try s.objects(x, whose: r.name, is: loser) {
                        try w.update(
                            x, pk: ref, PropertyChanges(values: [:], relationships: [r.name: winner]),
                            object: "\(x.name)/\(ref)")
                    }
                } else if let inverse = e.relationship(named: r.inverse), inverse.isToMany,
                    let join = model.joinTable(e, inverse)
                {
                    // Many-to-many: the loser's links, read from its own side.
                    for ref in try s.linked(join, to: loser) {
                        try w.link(e, loser, inverse, ref, linked: false)
                        try w.link(e, winner, inverse, ref, linked: true)
                    }
                }
            }
        }
        try w.delete(e, pks: [loser])
    }

    /// The stored attributes this model knows and the to-one relationships, as keys here (a
    /// target this store does not have, deleted meanwhile, is nil).
    func propertyChanges(_ e: Entity, _ object: MirrorObject) throws -> PropertyChanges {
        var changes = PropertyChanges(values: [:], relationships: [:])
        for a in e.attributes where !a.isDerived {
            if let v = value(object, a) { changes.values[a.name] = v }
        }
        for r in e.toOneRelationships {
            let target = try object.toOne[r.name].map { try resolve($0) }
            let destination = try model.entity(r.destination)
            let pk = try target.flatMap { try key(destination, $0) }
            if pk == nil, let target, let other = try s.mappedEntity(target, other: destination) {
                throw StoreError.validation(
                    "\(e.name) \(GlobalID.text(object.globalID)).\(r.name) names \(GlobalID.text(target)), "
                        + "a \(other) here, not a \(destination.name)",
                    object: "\(e.name) \(GlobalID.text(object.globalID))", property: r.name,
                    rule: .globalIDEntity(other))
            }
            changes.relationships[r.name] = .some(pk)
        }
        return changes
    }

    /// A new object whose uniqueness constraint another object here holds (two machines made
    /// category "Swift"): one object stays, everywhere the same one — the smaller global id.
    /// The other id becomes an alias of it, so that later changes naming it land on the winner.
    /// Returns the row whose state the change became (nil: the local object's stays).
    mutating func collide(_ e: Entity, _ pk: Int64, incoming: UUID, _ changes: PropertyChanges) throws -> Int64? {
        let local = try s.globalID(e, pk)
        if let local, !GlobalID.precedes(incoming, local) {
            try s.setAlias(incoming, to: local)
            try noteMerge(e, loser: incoming, winner: local)
            return nil
        }
        try s.setGlobalID(e, pk, incoming)
        try s.mapID(incoming, pk)
        if let local {
            try s.setAlias(local, to: incoming)
            try noteMerge(e, loser: local, winner: incoming)
        }
        // The winner's state, as every other machine has it.
        try w.update(e, pk: pk, changes, object: "\(e.name) \(incoming)")
        return pk
    }
}
