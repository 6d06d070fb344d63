import Foundation
import SharedStoreSQLite

/// The SQL of one entity's hot statements, built once per container instead of on every save.
/// A class: a save reads it for every row, and a struct of eight strings copied each time showed
/// as retains and releases in profiles.
final class EntitySQL: Sendable {
    let index: Int
    /// The columns a snapshot is read from, and how (``columns(of:)``, ``RowLayout``).
    let columns: [String]
    let layout: RowLayout
    let insert: String
    let select: String
    let delete: String
    let exists: String
    /// The object's version and global id, without its values: what an update whose context
    /// read the whole row asks to know that the row is still as read.
    let version: String
    /// The 0-or-1 expression of each kept count over `t0` with their bindings, and the statement
    /// asking them of one object: an update or delete of a counted object runs it, row by row.
    let keptCounts: (expressions: [String], bindings: [SQLValue], flags: String)?

    init(_ e: Entity, index: Int, model: Model) {
        self.index = index
        let columns = Self.columns(of: e)
        self.columns = columns
        layout = RowLayout(e)
        let table = SQLMapping.quote(e.name)
        // Every stored property, then the object's global id.
        let names = e.storedPropertyNames.map(SQLMapping.quote) + [StoreColumn.globalID]
        let placeholders = Array(repeating: "?", count: names.count).joined(separator: ", ")
        let pk = StoreColumn.primaryKey
        insert = "INSERT INTO \(table)(\(names.joined(separator: ", "))) VALUES (\(placeholders))"
        // The snapshot's columns, then the global id (``RowLayout/globalIDColumn``): an update
        // reads the object and the id its history names in one statement.
        select = SelectFrame.select(
            columns + [SelectFrame.column(StoreColumn.globalID)], from: e, where: SelectFrame.byPrimaryKey)
        delete = "DELETE FROM \(table) WHERE \(pk) = ? RETURNING \(StoreColumn.globalID)"
        exists = "SELECT 1 FROM \(table) WHERE \(pk) = ?"
        version = "SELECT \(StoreColumn.version), \(StoreColumn.globalID) FROM \(table) WHERE \(pk) = ?"
        // A kept count reads only its entity's attributes (the model checks it): no store id is
        // ever bound. A condition that does not compile is compiled (and fails) when used.
        var q = QueryBuilder(model: model, entity: e, storeID: UUID())
        if !e.keptCounts.isEmpty, let expressions = try? e.keptCounts.map({ try q.sql($0.condition) }) {
            keptCounts = (
                expressions, q.bindings, SelectFrame.select(expressions, from: e, where: SelectFrame.byPrimaryKey)
            )
        } else {
            keptCounts = nil
        }
    }

    /// `t0.Z_PK, t0.Z_OPT, t0."attr"…, t0."toOne"…`: the columns a ``Snapshot`` is read from
    /// (``RowDecoder``).
    static func columns(of e: Entity) -> [String] {
        ([StoreColumn.primaryKey, StoreColumn.version] + e.storedPropertyNames.map(SQLMapping.quote))
            .map(SelectFrame.column)
    }

    func statement(_ kind: EntityStatement, _ c: SQLiteConnection) throws -> SQLiteStatement {
        let sql: String
        switch kind {
        case .insert: sql = insert
        case .select: sql = select
        case .delete: sql = delete
        case .exists: sql = exists
        case .version: sql = version
        }
        return try c.statement(slot: StoreStatement.entity(index, kind).slot, sql)
    }
}
