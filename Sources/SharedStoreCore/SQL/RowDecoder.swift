import Foundation
import SharedStoreSQLite

/// Reads the rows of an entity's table into snapshots: the one place a row selected with
/// ``EntitySQL/columns`` (`t0.Z_PK, t0.Z_OPT`, the attributes, the to-one keys) becomes values.
///
/// A fetch reads every row into one array of values its snapshots share
/// (``readRow(_:_:into:)``); a streamed row becomes a snapshot of its own (``snapshot(_:_:)``).
struct RowDecoder {
    /// The store the ids of the snapshots name.
    let storeID: UUID

    /// Appends the attribute values of `row` to `values`, by a layout made once per entity (not
    /// worked out again for every row); returns the row's key, version and to-one relationships.
    func readRow(_ row: SQLiteRow, _ layout: RowLayout, into values: inout [Value])
        -> (Int64, Int64, [String: ObjectID])
    {
        var column: Int32 = 2
        for type in layout.types {
            values.append(SQLMapping.value(row, column, type))
            column += 1
        }
        var rels: [String: ObjectID] = [:]
        for (name, destination) in zip(layout.toOneNames, layout.toOneDestinations) {
            if !row.isNull(column) {
                rels[name] = ObjectID(storeID: storeID, entity: destination, primaryKey: row.int64(column))
            }
            column += 1
        }
        return (row.int64(0), row.int64(1), rels)
    }

    /// `row` as a snapshot of its own (a streamed row, a row read by its key).
    func snapshot(_ row: SQLiteRow, _ layout: RowLayout) -> Snapshot {
        var values: [Value] = []
        values.reserveCapacity(layout.names.count)
        let (pk, version, rels) = readRow(row, layout, into: &values)
        return Snapshot(
            id: ObjectID(storeID: storeID, entity: layout.entity, primaryKey: pk), version: version,
            names: layout.names, columns: values, relationships: rels)
    }
}

/// What a row of an entity holds, in column order: names and types only (an `Attribute` holds
/// its rules too, and copying it for every column of every row showed in profiles).
struct RowLayout {
    let entity: String
    let names: [String]
    let types: [AttributeType]
    let toOneNames: [String]
    let toOneDestinations: [String]

    /// The layout of the rows of `e`.
    init(_ e: Entity) {
        entity = e.name
        names = e.attributes.map(\.name)
        types = e.attributes.map(\.type)
        let toOne = e.toOneRelationships
        toOneNames = toOne.map(\.name)
        toOneDestinations = toOne.map(\.destination)
    }

    /// The column after the attributes and the to-one keys: where a statement that selects a
    /// row's global id too puts it.
    var globalIDColumn: Int32 { Int32(2 + types.count + toOneNames.count) }
}
