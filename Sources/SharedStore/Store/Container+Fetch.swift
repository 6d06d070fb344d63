import Foundation

extension Container {
    /// `t0.Z_PK, t0.Z_OPT, t0."attr"…, t0."toOne"…` for an entity.
    func selectColumns(_ e: Entity) -> String {
        (["t0.Z_PK", "t0.Z_OPT"] + e.storedPropertyNames.map { "t0.\(SQLMapping.quote($0))" }).joined(separator: ", ")
    }

    /// Reads a row selected with ``selectColumns(_:)``.
    func snapshot(_ row: SQLiteRow, _ e: Entity) -> Snapshot {
        var values: [String: Value] = [:]
        values.reserveCapacity(e.attributes.count)
        var column: Int32 = 2
        for a in e.attributes {
            values[a.name] = SQLMapping.value(row, column, a.type)
            column += 1
        }
        var rels: [String: ObjectID] = [:]
        for r in e.toOneRelationships {
            if !row.isNull(column) {
                rels[r.name] = ObjectID(storeID: storeID, entity: r.destination, primaryKey: row.int64(column))
            }
            column += 1
        }
        return Snapshot(id: ObjectID(storeID: storeID, entity: e.name, primaryKey: row.int64(0)),
                        version: row.int64(1), values: values, relationships: rels)
    }

    func snapshot(_ e: Entity, primaryKey: Int64, _ c: SQLiteConnection) throws -> Snapshot? {
        guard let i = model.entityIndex[e.name] else { return nil }
        return try entitySQL[i].statement(EntitySQL.selectKind, c).firstRow([.integer(primaryKey)]) { snapshot($0, e) }
    }

    func fetch(_ request: FetchRequest, _ c: SQLiteConnection) throws -> [Snapshot] {
        let e = try model.entity(request.entity)
        var q = QueryBuilder(model: model, entity: e, storeID: storeID)
        let whereSQL = try q.sql(request.condition)
        let order = try q.orderBy(request.sort)
        var sql = "SELECT \(selectColumns(e)) FROM \(SQLMapping.quote(e.name)) AS t0 \(q.joins.joined(separator: " ")) WHERE \(whereSQL)\(order)"
        var bindings = q.bindings
        try appendWindow(request, &sql, &bindings)
        return try c.cached(sql).rows(bindings) { snapshot($0, e) }
    }

    func count(_ request: FetchRequest, _ c: SQLiteConnection) throws -> Int {
        let e = try model.entity(request.entity)
        var q = QueryBuilder(model: model, entity: e, storeID: storeID)
        let whereSQL = try q.sql(request.condition)
        var sql = "SELECT t0.Z_PK FROM \(SQLMapping.quote(e.name)) AS t0 \(q.joins.joined(separator: " ")) WHERE \(whereSQL)"
        var bindings = q.bindings
        try appendWindow(request, &sql, &bindings)
        return try c.cached("SELECT count(*) FROM (\(sql))").firstRow(bindings) { Int($0.int64(0)) } ?? 0
    }

    /// The primary keys matching a condition (batch update and delete).
    func primaryKeys(_ e: Entity, _ condition: Condition, _ c: SQLiteConnection) throws -> [Int64] {
        var q = QueryBuilder(model: model, entity: e, storeID: storeID)
        let whereSQL = try q.sql(condition)
        let sql = "SELECT t0.Z_PK FROM \(SQLMapping.quote(e.name)) AS t0 \(q.joins.joined(separator: " ")) WHERE \(whereSQL) ORDER BY t0.Z_PK"
        return try c.cached(sql).rows(q.bindings) { $0.int64(0) }
    }

    private func appendWindow(_ request: FetchRequest, _ sql: inout String, _ bindings: inout [SQLValue]) throws {
        guard request.offset >= 0, (request.limit ?? 0) >= 0 else {
            throw StoreError(.invalidArgument, "fetch limit and offset must not be negative")
        }
        if request.limit != nil || request.offset > 0 {
            sql += " LIMIT ? OFFSET ?"
            bindings.append(.integer(Int64(request.limit ?? -1)))
            bindings.append(.integer(Int64(request.offset)))
        }
    }
}
