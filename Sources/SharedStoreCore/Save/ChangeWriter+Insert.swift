import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// Inserts in the save path: a row validated and bound by position (``InsertRow``), the
/// lifecycle events of a new object, its derived values, its rules, and the references fixed
/// up after the objects of one save are all in.
extension ChangeWriter {
    /// A row for an object of `e`, nothing given, in the storage the last insert used (no
    /// allocation per row); ``keep(_:)`` gives the storage back. `clearingValues: false` leaves
    /// the values as the last insert left them, for a caller that replaces them whole.
    mutating func takeRow(for e: Entity, clearingValues: Bool = true) -> InsertRow {
        var row = spare
        spare = .empty
        if clearingValues {
            row.clear(for: e)
        } else {
            InsertRow.clear(&row.targets, to: e.toOneRelationships.count)
        }
        return row
    }

    /// Keeps `row`'s storage for the next insert.
    mutating func keep(_ row: InsertRow) { spare = row }

    /// Inserts a validated row and records the insert; returns the new primary key.
    mutating func insert(
        _ e: Entity, _ changes: PropertyChanges, object: @autoclosure () -> String, globalID: UUID? = nil
    ) throws -> Int64 {
        // `fill` sets every place of the row: the storage is taken as the last insert left it.
        var row = spare
        spare = .empty
        defer { keep(row) }
        row.fill(e, changes)
        return try insert(e, &row, object: object(), globalID: globalID)
    }

    /// Inserts `row` (of `e`), validated, and records the insert; returns the new primary key.
    /// What a hook sets and the derived values go into `row` in place.
    mutating func insert(
        _ e: Entity, _ row: inout InsertRow, object: @autoclosure () -> String, globalID: UUID? = nil
    ) throws -> Int64 {
        let index = model.index(of: e)
        let derived = !derivations.isEmpty
        let hook = hooks?[index]
        if let hook { try awaken(e, hook, &row, object: object()) }
        if derived && !derivations.own[index].isEmpty { try deriveForInsert(e, index, &row) }
        let stmt = try s.insertStatement(entity: index)
        var column: Int32 = 1
        // The attributes as the validator keeps them (one reference each, not a copy of each),
        // in the row's order.
        let validator = container.validator
        let rules = validator.rules(index)
        for i in rules.indices {
            let value = row.values[i] ?? rules[i].attribute.defaultValue
            try stmt.bind(try validator.validate(value, rules[i], object: object()), at: column)
            column += 1
        }
        for target in row.targets {
            try stmt.bind(target.map(SQLValue.integer) ?? .null, at: column)
            column += 1
        }
        let globalID = globalID ?? GlobalID.make()
        try stmt.bind(uuid: globalID, at: column)
        try unique(e, object(), values: { row.value($0, of: e) }) { try stmt.run() }
        let pk = s.lastInsertedKey
        var saved: Snapshot?
        if let h = hook, h.readsSaved {
            let object = snapshot(e, pk, row, version: 1)
            do {
                try h.hooks.check(object, .insert, object: "\(e.name)/\(pk)")
            } catch {
                // Refused: nothing of it stays, should the caller carry on with the batch (it
                // is recorded nowhere yet).
                try s.deleteRow(e, pk)
                throw error
            }
            saved = object
        }
        recorder.inserted(index, pk, globalID: globalID)
        if !e.keptCounts.isEmpty { counter.inserted(index, pk) }
        if derived { inserted(e, index, pk, row) }
        if let saved { hook?.hooks.didSave?(saved) }
        return pk
    }

    /// `awakeFromInsert` then `willSave` of a new object: what they set goes into its row.
    private func awaken(
        _ e: Entity, _ h: HookSet, _ row: inout InsertRow, object: @autoclosure () -> String
    ) throws {
        guard h.awakeFromInsert != nil || h.willSave != nil else { return }
        // The draft takes the row (moved, not shared: what the hooks set goes into it in place,
        // not into a copy) and gives it back with what the hooks set.
        var draft = ObjectDraft(entity: e, id: nil, storeID: container.storeID, row: row)
        row.values = []
        // The object's name only for an error: a batch names it by its line, built on demand.
        if let awake = h.awakeFromInsert {
            try EntityHooks.run("awakeFromInsert", object()) { try awake(&draft) }
            try Self.check(draft, of: e, by: "awakeFromInsert", object: object())
        }
        if let will = h.willSave {
            try EntityHooks.run("willSave", object()) { try will(&draft) }
            try Self.check(draft, of: e, by: "willSave", object: object())
        }
        row = draft.row
    }

    /// Throws unless `draft` is still a new object of `e` (a hook may keep a draft it was given
    /// and assign it to another's: its row would not fit this one).
    private static func check(_ draft: ObjectDraft, of e: Entity, by hook: String, object: @autoclosure () -> String)
        throws
    {
        guard draft.isInserted, draft.entity == e.name, draft.row.values.count == e.attributes.count,
            draft.row.targets.count == e.toOneRelationships.count
        else {
            throw StoreError(
                .invalidArgument,
                "\(object()): \(hook) of \(e.name) put another object's draft "
                    + "(\(draft.id?.description ?? "new \(draft.entity)")) in its place: a hook changes the draft "
                    + "it is given, it cannot replace it; nothing was saved")
        }
    }

    /// A new object as stored: its values (defaults for the ones not given) and relationships.
    func snapshot(_ e: Entity, _ pk: Int64, _ row: InsertRow, version: Int64) -> Snapshot {
        var values: [String: Value] = [:]
        for (i, a) in e.attributes.enumerated() { values[a.name] = row.values[i] ?? a.defaultValue }
        var rels: [String: ObjectID] = [:]
        for (i, r) in e.toOneRelationships.enumerated() {
            if let target = row.targets[i] {
                rels[r.name] = ObjectID(storeID: container.storeID, entity: r.destination, primaryKey: target)
            }
        }
        return Snapshot(
            id: ObjectID(storeID: container.storeID, entity: e.name, primaryKey: pk), version: version, values: values,
            relationships: rels)
    }

    /// A new object feeds the counts and sums it points at; one with counts or sums of its own
    /// is remembered (its insert is recorded already).
    mutating func inserted(_ e: Entity, _ index: Int, _ pk: Int64, _ row: InsertRow) {
        if derivations.own[index].contains(where: { if case .zero = $0 { return true } else { return false } }) {
            insertedTargets.insert(ObjectKey(entity: index, pk: pk))
        }
        if !derivations.feeds[index].isEmpty {
            feed(index, sign: 1, target: { row.target($0, of: e) }, value: { row.value($0, of: e) })
        }
    }

    /// Sets to-one `name` of an object this transaction inserted with it nil (a reference to an
    /// object inserted later in the same save), with what it derives and feeds.
    mutating func setRelationship(_ e: Entity, _ name: String, of pk: Int64, to target: Int64) throws {
        try s.setRelationship(e, name, of: pk, to: target)
        let index = model.index(of: e)
        guard !derivations.isEmpty else { return }
        for own in derivations.own[index] {
            guard case .related(let a, let via, let entity, let source) = own, via == name else { continue }
            let value = try related(entity, target)[source]
            guard let i = e.attributes.firstIndex(where: { $0.name == a }) else { continue }
            let sql = try SQLMapping.sqlValue(value, e.attributes[i].type, object: e.name, property: a)
            try s.updateRow(e, pk, columns: [a], properties: [i], values: [sql])
        }
        for f in derivations.feeds[index] where f.via == name {
            let amount = try f.sum.map { try related(index, pk)[$0] } ?? .integer(1)
            aggregates.add(ObjectKey(entity: f.target, pk: target), f.attribute, amount)
        }
    }
}
