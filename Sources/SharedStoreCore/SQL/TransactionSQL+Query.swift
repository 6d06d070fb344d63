import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// Fetches: `SELECT … FROM entity AS t0 <joins> WHERE … ORDER BY … LIMIT … OFFSET …`, built by
/// ``QueryBuilder`` with every value bound, in the frame of ``SelectFrame``.
extension TransactionSQL {
    /// The objects matching `request`, in its order and window.
    func fetch(_ request: FetchRequest) throws -> [Snapshot] {
        let unordered = Self.sortsByKeyItself(request)
        let q = try compiledFetch(request, unordered: unordered)
        let layout = entitySQL[q.entity].layout
        // Every row's values go into one array the snapshots share (one allocation per fetch,
        // not one per object), with room at once for what the statement returned last time (a
        // query run again with other values mostly returns as many), within the window's limit.
        let width = layout.types.count
        let statement = try c.cached(q.sql)
        let expected = min(request.limit ?? Int.max, statement.rowsLastRead, 4096)
        var values: [Value] = []
        values.reserveCapacity(expected * width)
        var heads: [(Int64, Int64, [String: ObjectID])] = []
        heads.reserveCapacity(expected)
        let decoder = rows
        try statement.forEachRow(q.bindings) { row in
            heads.append(decoder.readRow(row, layout, into: &values))
        }
        statement.rowsLastRead = heads.count
        let shared = SharedRows(values)
        func snapshot(_ i: Int) -> Snapshot {
            let head = heads[i]
            return Snapshot(
                id: ObjectID(storeID: storeID, entity: layout.entity, primaryKey: head.0), version: head.1,
                names: layout.names, shared: shared, offset: i * width, relationships: head.2)
        }
        // By key, as a fetch with no sort returns its objects: rows read in the table's order
        // are in it already (one pass says so); rows an index found are put in it here.
        if unordered, !heads.indices.dropFirst().allSatisfy({ heads[$0 - 1].0 < heads[$0].0 }) {
            return heads.indices.sorted { heads[$0].0 < heads[$1].0 }.map(snapshot)
        }
        return heads.indices.map(snapshot)
    }

    /// Whether a fetch of `request` leaves the order to SQLite and sorts the rows by key itself:
    /// with no sort and no window. An ORDER BY the key made SQLite read a one-sided range
    /// (`n < 3`) by scanning the table in key order rather than search the range's index and
    /// sort what it found (with no statistics it takes a range to keep a quarter of the rows):
    /// 22 ms against 0.3 ms for 50 rows of 300,000.
    static func sortsByKeyItself(_ request: FetchRequest) -> Bool {
        request.sort.isEmpty && request.limit == nil && request.offset == 0
    }

    /// Calls `body` with each object matching `request`, in order, as the rows are read: memory
    /// stays that of one object, whatever the result's size.
    func forEach(_ request: FetchRequest, _ body: (Snapshot) throws -> Void) throws {
        let q = try compiledFetch(request, unordered: false)
        let layout = entitySQL[q.entity].layout
        let decoder = rows
        try c.cached(q.sql).forEachRow(q.bindings) { try body(decoder.snapshot($0, layout)) }
    }

    /// ``forEach(_:_:)`` with each object's global id (read in the same statement).
    func forEachWithGlobalID(_ request: FetchRequest, _ body: (Snapshot, UUID?) throws -> Void) throws {
        let decoder = rows
        try forEachRow(request) { row, sql in
            try body(decoder.snapshot(row, sql.layout), GlobalID.uuid(row.blob(sql.layout.globalIDColumn)))
        }
    }

    /// Calls `body` with each row matching `request`, in order, as the statement reads it: its
    /// columns as a snapshot's (``EntitySQL/columns``), then the global id.
    func forEachRow(_ request: FetchRequest, _ body: (SQLiteRow, EntitySQL) throws -> Void) throws {
        let e = try model.entity(request.entity)
        let sql = entitySQL(e)
        let (text, bindings) = try query(
            e, columns: sql.columns + [SelectFrame.column(StoreColumn.globalID)], where: request.condition,
            sort: request.sort, window: request)
        try c.cached(text).forEachRow(bindings) { row in try body(row, sql) }
    }

    /// The SQL of a fetch of `request`, made once and kept by the container.
    private func compiledFetch(_ request: FetchRequest, unordered: Bool) throws -> CompiledQuery {
        // Before the cache compares or hashes it (both walk the condition).
        try request.condition.checkDepth()
        return try container.fetchCache.query(
            request, unordered: unordered,
            compile: {
                let e = try model.entity(request.entity)
                let (sql, bindings) = try query(
                    e, columns: entitySQL(e).columns, where: request.condition,
                    sort: unordered ? nil : request.sort, window: request)
                return CompiledQuery(entity: model.index(of: e), sql: sql, bindings: bindings)
            },
            bind: { try fetchBindings(request) })
    }

    /// The bindings of `request`, in the order of its SQL, checked as its SQL is, without making
    /// the SQL (one of its shape is known).
    func fetchBindings(_ request: FetchRequest) throws -> [SQLValue] {
        var q = QueryBuilder(model: model, entity: try model.entity(request.entity), storeID: storeID, writesSQL: false)
        _ = try q.sql(request.condition)
        return q.bindings + (try windowBindings(request))
    }

    /// How many objects match `request` (within its window).
    func count(_ request: FetchRequest) throws -> Int {
        try request.condition.checkDepth()
        let e = try model.entity(request.entity)
        // A kept count with the same condition is the answer, in one row.
        if request.limit == nil, request.offset == 0,
            let k = e.keptCounts.first(where: { $0.condition == request.condition }),
            let n = try keptCount(SchemaSQL.keptCountName(e, k))
        {
            return Int(n)
        }
        let (sql, bindings) = try query(
            e, columns: [SelectFrame.column(StoreColumn.primaryKey)], where: request.condition, sort: nil,
            window: request)
        return try c.cached("SELECT count(*) FROM (\(sql))").firstRow(bindings) { Int($0.int64(0)) } ?? 0
    }

    /// The primary keys matching a condition (batch update and delete).
    func primaryKeys(_ e: Entity, _ condition: Condition) throws -> [Int64] {
        let (sql, bindings) = try query(
            e, columns: [SelectFrame.column(StoreColumn.primaryKey)], where: condition, sort: [], window: nil)
        return try c.cached(sql).rows(bindings) { $0.int64(0) }
    }

    /// `SELECT columns FROM entity AS t0 <joins> WHERE condition [ORDER BY …] [LIMIT … OFFSET …]`
    /// and its bindings; `sort` nil leaves the order to SQLite.
    ///
    /// - Throws: `.unknownProperty` or `.invalidArgument` for a condition or sort that does not
    ///   compile; `.invalidArgument` for a negative limit or offset.
    func query(
        _ e: Entity, columns: [String], where condition: Condition, sort: [SortKey]?,
        window: FetchRequest?
    ) throws -> (String, [SQLValue]) {
        var q = QueryBuilder(model: model, entity: e, storeID: storeID)
        let whereSQL = try q.sql(condition)
        let order = try sort.map { try q.orderBy($0) } ?? ""
        var sql = SelectFrame.select(columns, from: e, joins: q.joins, where: whereSQL) + order
        var bindings = q.bindings
        if let window {
            let limits = try windowBindings(window)
            if !limits.isEmpty { sql += " LIMIT ? OFFSET ?" }
            bindings += limits
        }
        return (sql, bindings)
    }

    /// The limit and offset of `request` (none without a window).
    private func windowBindings(_ request: FetchRequest) throws -> [SQLValue] {
        guard request.offset >= 0, (request.limit ?? 0) >= 0 else {
            throw StoreError(.invalidArgument, "fetch limit and offset must not be negative")
        }
        guard request.limit != nil || request.offset > 0 else { return [] }
        return [.integer(Int64(request.limit ?? -1)), .integer(Int64(request.offset))]
    }

    /// How SQLite runs a fetch: the `detail` column of `EXPLAIN QUERY PLAN`, one line per step.
    func queryPlan(_ request: FetchRequest) throws -> [String] {
        let e = try model.entity(request.entity)
        // The SQL a fetch of it runs.
        let (sql, bindings) = try query(
            e, columns: entitySQL(e).columns, where: request.condition,
            sort: Self.sortsByKeyItself(request) ? nil : request.sort, window: request)
        return try c.cached("EXPLAIN QUERY PLAN " + sql).rows(bindings) { $0.text(3) }
    }
}

extension TransactionSQL {
    /// Every entity's hot SQL, by entity index.
    var entitySQL: [EntitySQL] { container.entitySQL }

    /// The hot SQL of `e` (an entity of the container's model).
    func entitySQL(_ e: Entity) -> EntitySQL { container.entitySQL[model.index(of: e)] }

    /// Reads rows of this store's tables into snapshots.
    var rows: RowDecoder { RowDecoder(storeID: storeID) }
}

extension TransactionSQL {
    /// `SELECT groups, aggregates FROM entity WHERE condition GROUP BY groups ORDER BY groups`.
    func aggregate(_ e: Entity, _ aggregates: [Aggregate], where condition: Condition, groupedBy groups: [String])
        throws -> [AggregateRow]
    {
        var q = QueryBuilder(model: model, entity: e, storeID: storeID)
        var groupColumns: [(String, AttributeType)] = []
        for path in groups {
            let (col, attr) = try q.column(path)
            guard let attr else { throw StoreError(.invalidArgument, "group by '\(path)' needs an attribute") }
            groupColumns.append((col, attr.type))
        }
        var exprs: [(String, AttributeType?)] = []
        for a in aggregates {
            switch a {
            case .count: exprs.append(("count(*)", .integer))
            case .sum(let path), .min(let path), .max(let path), .average(let path):
                let (col, attr) = try q.column(path)
                guard let attr, [.integer, .double, .date, .string, .decimal].contains(attr.type) else {
                    throw StoreError(.invalidArgument, "aggregate over '\(path)' needs a stored attribute")
                }
                switch a {
                case .sum:
                    guard attr.type == .integer || attr.type == .double else {
                        throw StoreError(.invalidArgument, "sum of '\(path)' needs a number")
                    }
                    exprs.append((attr.type == .double ? "total(\(col))" : "coalesce(sum(\(col)), 0)", attr.type))
                case .average: exprs.append(("avg(\(col))", .double))
                case .min: exprs.append(("min(\(col))", attr.type))
                default: exprs.append(("max(\(col))", attr.type))
                }
            }
        }
        let whereSQL = try q.sql(condition)
        let keys = groupColumns.map(\.0).joined(separator: ", ")
        var sql = SelectFrame.select(groupColumns.map(\.0) + exprs.map(\.0), from: e, joins: q.joins, where: whereSQL)
        if !groups.isEmpty { sql += " GROUP BY \(keys) ORDER BY \(keys)" }
        let n = Int32(groupColumns.count)
        return try c.cached(sql).rows(q.bindings) { row in
            AggregateRow(
                group: groupColumns.enumerated().map { SQLMapping.value(row, Int32($0.offset), $0.element.1) },
                values: exprs.enumerated().map { SQLMapping.value(row, n + Int32($0.offset), $0.element.1 ?? .double) })
        }
    }
}

/// Pending changes in a fetch (``FetchRequest/includesPendingChanges``): stored rows with their
/// sort keys, and an unsaved object tested against the condition by SQL itself, as a one-row
/// table, so that it matches exactly as a stored one would.
extension TransactionSQL {
    /// The first `limit` rows matching `request` in its order (all of them for nil), ignoring
    /// its window, each with the values of its sort keys.
    func fetchWithSortKeys(_ request: FetchRequest, limit: Int?) throws -> [(Snapshot, [SQLValue])] {
        let e = try model.entity(request.entity)
        var q = QueryBuilder(model: model, entity: e, storeID: storeID)
        let keys = try request.sort.map { try q.column($0.path).sql }
        let whereSQL = try q.sql(request.condition)
        let order = try q.orderBy(request.sort)
        let sql = SelectFrame.select(entitySQL(e).columns + keys, from: e, joins: q.joins, where: whereSQL) + order
        let (layout, decoder) = (entitySQL(e).layout, rows)
        let first = Int32(2 + e.storedPropertyNames.count)
        return try c.cached(sql + " LIMIT ?").rows(q.bindings + [.integer(Int64(limit ?? -1))]) { row in
            (decoder.snapshot(row, layout), (0..<Int32(keys.count)).map { row.value(first + $0) })
        }
    }

    /// Whether an object with `values` and to-one `keys` (not stored, or stored with unsaved
    /// changes) matches `request`'s condition, and the values of its sort keys.
    func evaluate(_ e: Entity, pk: Int64, values: [String: Value], keys: [String: Int64?], _ request: FetchRequest)
        throws -> (Bool, [SQLValue])
    {
        var row = ["? AS \(StoreColumn.primaryKey)", "1 AS \(StoreColumn.version)"]
        var bindings: [SQLValue] = [.integer(pk)]
        for a in e.attributes {
            row.append("? AS \(SQLMapping.quote(a.name))")
            bindings.append(
                (try? SQLMapping.sqlValue(values[a.name] ?? a.defaultValue, a.type, object: e.name, property: a.name))
                    ?? .null)
        }
        for r in e.toOneRelationships {
            row.append("? AS \(SQLMapping.quote(r.name))")
            bindings.append((keys[r.name] ?? nil).map(SQLValue.integer) ?? .null)
        }
        var q = QueryBuilder(model: model, entity: e, storeID: storeID)
        let sortKeys = try request.sort.map { try q.column($0.path).sql }
        let test = try q.sql(request.condition)
        let sql = SelectFrame.select(
            [test] + sortKeys, from: "(SELECT \(row.joined(separator: ", ")))", joins: q.joins, where: nil)
        // The condition's placeholders come first in the text (the select list), the row's after.
        return try c.cached(sql).firstRow(q.bindings + bindings) { r in
            (r.int64(0) != 0, (0..<Int32(sortKeys.count)).map { r.value(1 + $0) })
        } ?? (false, [])
    }
}

extension SQLValue {
    /// SQLite's order of values (NULL, numbers, text by bytes, blobs by bytes).
    static func precedes(_ a: SQLValue, _ b: SQLValue) -> Bool {
        func rank(_ v: SQLValue) -> Int {
            switch v {
            case .null: return 0
            case .integer, .double: return 1
            case .text: return 2
            case .blob: return 3
            }
        }
        switch (a, b) {
        case (.integer(let x), .integer(let y)): return x < y
        case (.integer, .double), (.double, .integer), (.double, .double):
            return (a.number ?? 0) < (b.number ?? 0)
        case (.text(let x), .text(let y)): return x.utf8.lexicographicallyPrecedes(y.utf8)
        case (.blob(let x), .blob(let y)): return x.lexicographicallyPrecedes(y)
        default: return rank(a) < rank(b)
        }
    }

    private var number: Double? {
        switch self {
        case .integer(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }
}
