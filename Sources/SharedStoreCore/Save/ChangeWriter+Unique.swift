import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// A write that breaks a uniqueness constraint, as an error that says which constraint, with
/// which values, and which stored object holds them (``UniquenessConflict``).
extension ChangeWriter {
    /// Runs a write of `object` (of `e`), turning a broken uniqueness constraint into a
    /// `.uniqueness` error that names the object; `values` gives the value the write gives each
    /// property (a to-one relationship's as the key it points at).
    ///
    /// - Throws: `.uniqueness` with its ``StoreError/uniqueness``; what `body` throws otherwise.
    func unique<T>(
        _ e: Entity, _ object: @autoclosure () -> String, values: (String) -> Value, _ body: () throws -> T
    ) throws -> T {
        do {
            return try body()
        } catch let error as SQLiteError where error.isUniqueViolation {
            let columns = error.message.components(separatedBy: "failed: ").last ?? error.message
            let object = object()
            throw StoreError(
                .uniqueness,
                "\(object) breaks a uniqueness constraint: another object already has the same \(columns)",
                resultCode: error.resultCode,
                details: .uniqueness(conflict(e, object: object, reported: columns, values: values)))
        }
    }

    /// The constraint SQLite reported (`Folder.name, Folder.x`) as the model declares it, the
    /// values the write gave it, and the stored object that holds them. Read inside the
    /// transaction, which a failed statement leaves as it was.
    private func conflict(_ e: Entity, object: String, reported: String, values: (String) -> Value)
        -> UniquenessConflict
    {
        let names = reported.components(separatedBy: ", ").map { column in
            column.hasPrefix("\(e.name).") ? String(column.dropFirst(e.name.count + 1)) : column
        }
        let constraint = e.uniquenessConstraints.first { Set($0) == Set(names) } ?? names
        var shown: [Value] = []
        var stored: [SQLValue] = []
        for name in constraint {
            let value = values(name)
            if let r = e.relationship(named: name), case .integer(let pk) = value {
                shown.append(
                    .string(ObjectID(storeID: container.storeID, entity: r.destination, primaryKey: pk).description))
                stored.append(.integer(pk))
            } else {
                shown.append(value)
                let type = e.attribute(named: name)?.type
                stored.append(
                    type.flatMap { try? SQLMapping.sqlValue(value, $0, object: object, property: name) } ?? .null)
            }
        }
        // An object inserted earlier in this save, or whose constrained properties it updated,
        // holds those values only in this save, which rolls back: no stored object holds them.
        // One it updated otherwise still held them before.
        let found =
            stored.contains(.null) ? nil : (try? s.objectMatching(e, columns: constraint, values: stored)) ?? nil
        let indexes = Set(constraint.compactMap { e.historyPropertyNames.firstIndex(of: $0) })
        let existing = found.flatMap { pk in
            recorder.hasWritten(model.index(of: e), pk, properties: indexes)
                ? nil : ObjectID(storeID: container.storeID, entity: e.name, primaryKey: pk)
        }
        return UniquenessConflict(
            entity: e.name, constraint: constraint, values: shown, existing: existing, object: object)
    }
}

extension PropertyChanges {
    /// The value property `name` of `e` has after an update of `current` with these changes and
    /// the `derived` values it computed.
    func value(_ name: String, of e: Entity, derived: [String: Value], current: Snapshot) -> Value {
        if e.attribute(named: name) != nil { return values[name] ?? derived[name] ?? current[name] }
        let key = relationships[name] ?? current.relationships[name]?.primaryKey
        return key.map(Value.integer) ?? .null
    }
}
