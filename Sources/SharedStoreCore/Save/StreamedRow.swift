import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// One object of ``ObjectContext/forEachRow(_:_:)``, read where the store's cursor stands: a
/// value is decoded when it is asked for, and nothing else of the row is copied out. It is not
/// copyable, so it cannot outlive the call of the body it is lent to: storing it or copying it
/// does not compile. (Swift 6.3's compiler crashes on a closure that would keep it, where it
/// should refuse it; a closure passed as an argument and run at once may use it.) Like
/// ``ObjectContext/forEach(_:_:)``'s objects, a streamed object is not remembered as read: a
/// later save of it is not checked against this version.
///
/// For example, the titles of the unread articles, no ``Snapshot`` made for any:
/// ```swift
/// try context.forEachRow(FetchRequest(Article.self, where: \Article.isRead == false)) { row in
///     print(row[\Article.title])
/// }
/// ```
public struct StreamedRow: ~Copyable {
    let row: SQLiteRow
    let sql: EntitySQL
    let storeID: UUID

    /// The object's id.
    public var id: ObjectID { ObjectID(storeID: storeID, entity: sql.layout.entity, primaryKey: row.int64(0)) }

    /// The object's version (what a ``Snapshot`` read now would have).
    public var version: Int64 { row.int64(1) }

    /// The object's global id; nil for a row a foreign tool inserted without one.
    public var globalID: UUID? { GlobalID.uuid(row.blob(sql.layout.globalIDColumn)) }

    /// The value of attribute `name`, as a ``Snapshot`` read now would hold it (`.null` when the
    /// entity has no such attribute).
    public subscript(_ name: String) -> Value {
        guard let i = sql.layout.names.firstIndex(of: name) else { return .null }
        return SQLMapping.value(row, Int32(2 + i), sql.layout.types[i])
    }

    /// The value of the attribute `key` names. Its stored name is looked up by key path on
    /// each call (a table the type keeps); a loop over many rows reads faster by the name, found
    /// once with `Key(\Article.title).path`.
    public subscript<Root: Record, V>(_ key: KeyPath<Root, V>) -> Value { self[Key(key).path] }

    /// The object to-one relationship `name` points at; nil when it points at none, or the
    /// entity has no such relationship.
    public func target(_ name: String) -> ObjectID? {
        let layout = sql.layout
        guard let i = layout.toOneNames.firstIndex(of: name) else { return nil }
        let column = Int32(2 + layout.types.count + i)
        guard !row.isNull(column) else { return nil }
        return ObjectID(storeID: storeID, entity: layout.toOneDestinations[i], primaryKey: row.int64(column))
    }

    /// The whole object as a snapshot (what ``ObjectContext/forEach(_:_:)`` gives).
    public var snapshot: Snapshot { RowDecoder(storeID: storeID).snapshot(row, sql.layout) }
}

extension ObjectContext {
    /// Streams the objects matching `request` as ``forEach(_:_:)`` does, each lent to `body` as a
    /// ``StreamedRow``: what `body` asks of a row is read from it in place, and no ``Snapshot`` is
    /// made (a million rows written out as JSON, say, decode only the columns written). An
    /// entity with an `awakeFromFetch` hook still gets a snapshot of each row for it. As with
    /// ``forEach(_:_:)``, `body` must not read this container (its reader is busy until the
    /// stream ends): such a read fails with `.invalidArgument`.
    ///
    /// - Throws: like ``forEach(_:_:)``.
    public func forEachRow(_ request: FetchRequest, _ body: (borrowing StreamedRow) throws -> Void) throws {
        checkOwner()
        let awake = container.awakeFromFetch(request.entity)
        let storeID = container.storeID
        try readStatement { s in
            try s.forEachRow(request) { row, sql in
                let streamed = StreamedRow(row: row, sql: sql, storeID: storeID)
                if let awake { awake(streamed.snapshot) }
                try body(streamed)
            }
        }
    }
}

extension JSONObjectWriter {
    /// `"key":` and attribute `name` of `row`, as ``field(_:_:)`` writes `row[name]`: text
    /// attributes are written from the row's bytes in place.
    public mutating func field(_ key: StaticString, _ row: borrowing StreamedRow, _ name: String) {
        let layout = row.sql.layout
        guard let i = layout.names.firstIndex(of: name) else { return null(key) }
        switch layout.types[i] {
        case .string, .url, .decimal, .json:
            row.row.withTextOrNil(Int32(2 + i)) { bytes in
                if let bytes { string(key, utf8: bytes) } else { null(key) }
            }
        default:
            field(key, row[name])
        }
    }
}
