import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// Builds the SQL of a fetch: columns, joins for to-one key paths, WHERE, ORDER BY.
struct QueryBuilder {
    let model: Model
    let entity: Entity
    let storeID: UUID
    /// The entity's alias: `t0`, or a subquery's for a to-many predicate.
    let alias: String
    private(set) var joins: [String] = []
    private var aliases: [String: String] = [:]
    private(set) var bindings: [SQLValue] = []
    private var subqueries = 0

    init(model: Model, entity: Entity, storeID: UUID, alias: String = SelectFrame.alias) {
        self.model = model
        self.entity = entity
        self.storeID = storeID
        self.alias = alias
    }

    /// The SQL expression for a key path and its attribute (nil for a relationship itself).
    mutating func column(_ path: String) throws -> (sql: String, attribute: Attribute?) {
        let parts = path.split(separator: ".").map(String.init)
        guard parts.count == 1 || parts.count == 2 else {
            throw StoreError(.unknownProperty, "key path '\(path)' has more than two parts")
        }
        if parts.count == 1 {
            if let a = entity.attribute(named: parts[0]) { return ("\(alias).\(SQLMapping.quote(a.name))", a) }
            if let r = entity.relationship(named: parts[0]), !r.isToMany {
                return ("\(alias).\(SQLMapping.quote(r.name))", nil)
            }
            throw StoreError(.unknownProperty, "\(entity.name) has no attribute or to-one relationship '\(parts[0])'")
        }
        guard let r = entity.relationship(named: parts[0]), !r.isToMany else {
            throw StoreError(.unknownProperty, "\(entity.name).\(parts[0]) is not a to-one relationship (in '\(path)')")
        }
        let dest = try model.entity(r.destination)
        guard let a = dest.attribute(named: parts[1]) else {
            throw StoreError(.unknownProperty, "\(dest.name) has no attribute '\(parts[1])' (in '\(path)')")
        }
        let joined: String
        if let existing = aliases[r.name] {
            joined = existing
        } else {
            joined = (alias == SelectFrame.alias ? "j" : "\(alias)j") + "\(aliases.count + 1)"
            aliases[r.name] = joined
            joins.append(
                "LEFT JOIN \(SQLMapping.quote(dest.name)) AS \(joined) "
                    + "ON \(joined).\(StoreColumn.primaryKey) = \(alias).\(SQLMapping.quote(r.name))"
            )
        }
        return ("\(joined).\(SQLMapping.quote(a.name))", a)
    }

    private mutating func bind(_ v: Value, _ a: Attribute, _ path: String) throws -> String {
        bindings.append(try SQLMapping.sqlValue(v, a.type, object: entity.name, property: path))
        return "?"
    }

    /// A WHERE expression that is never NULL, so that NOT and OR follow two-valued logic.
    mutating func sql(_ c: Condition) throws -> String {
        switch c.node {
        case .always:
            return "1"
        case .compare(let path, let op, let v):
            return try compare(path, op, v)
        case .among(let path, let values):
            let (col, attr) = try column(path)
            guard let attr else { throw StoreError(.invalidArgument, "IN on '\(path)' needs an attribute") }
            guard !values.isEmpty else { return "0" }
            let ps = try values.map { try bind($0, attr, path) }
            return "coalesce(\(col) IN (\(ps.joined(separator: ","))), 0)"
        case .between(let path, let low, let high):
            let (col, attr) = try column(path)
            guard let attr else { throw StoreError(.invalidArgument, "BETWEEN on '\(path)' needs an attribute") }
            let a = try bind(low, attr, path)
            let b = try bind(high, attr, path)
            return "coalesce(\(col) BETWEEN \(a) AND \(b), 0)"
        case .text(let path, let op, let pattern, let options):
            let (col, attr) = try column(path)
            guard attr?.type == .string else {
                throw StoreError(.invalidArgument, "\(op.rawValue) needs a string attribute, '\(path)' is not one")
            }
            bindings.append(.text(pattern))
            bindings.append(.integer(StringMatch(op, options).code))
            return "ss_strop(\(col), ?, ?)"
        case .related(let path, let id):
            return try related(path, id)
        case .and(let cs):
            guard !cs.isEmpty else { return "1" }
            return "(" + (try cs.map { try sql($0) }).joined(separator: " AND ") + ")"
        case .or(let cs):
            guard !cs.isEmpty else { return "0" }
            return "(" + (try cs.map { try sql($0) }).joined(separator: " OR ") + ")"
        case .not(let inner):
            return "(NOT \(try sql(inner)))"
        case .quantified(let path, let quantifier, let inner):
            let (from, link, dest, sub) = try toMany(path)
            var q = QueryBuilder(model: model, entity: dest, storeID: storeID, alias: sub)
            let test = try q.sql(inner)
            let rows = "SELECT 1 FROM \(from) \(q.joins.joined(separator: " ")) WHERE \(link)"
            bindings += q.bindings
            switch quantifier {
            case .any: return "EXISTS (\(rows) AND \(test))"
            case .all: return "(NOT EXISTS (\(rows) AND NOT \(test)))"
            case .none: return "(NOT EXISTS (\(rows) AND \(test)))"
            }
        case .count(let path, let op, let n):
            let (from, link, _, _) = try toMany(path)
            bindings.append(.integer(n))
            return "((SELECT count(*) FROM \(from) WHERE \(link)) \(op == .equal ? "=" : op.rawValue) ?)"
        }
    }

    /// The rows of to-many relationship `path` of the row `alias`: the FROM of a subquery, the
    /// condition linking it, the destination and its alias.
    private mutating func toMany(_ path: String) throws -> (String, String, Entity, String) {
        guard let r = entity.relationship(named: path), r.isToMany else {
            throw StoreError(.unknownProperty, "\(entity.name) has no to-many relationship '\(path)'")
        }
        let dest = try model.entity(r.destination)
        subqueries += 1
        let sub = "\(alias)s\(subqueries)"
        let (q, key) = (SQLMapping.quote, StoreColumn.primaryKey)
        if let join = model.joinTable(entity, r) {
            let links = "\(sub)l"
            return (
                "\(q(join.name)) AS \(links) JOIN \(q(dest.name)) AS \(sub) ON \(sub).\(key) = \(links).\(join.theirs)",
                "\(links).\(join.mine) = \(alias).\(key)", dest, sub
            )
        }
        return ("\(q(dest.name)) AS \(sub)", "\(sub).\(q(r.inverse)) = \(alias).\(key)", dest, sub)
    }

    /// `path op value`; a nil value only with == and != (IS NULL, IS NOT NULL).
    private mutating func compare(_ path: String, _ op: Condition.Comparison, _ v: Value) throws -> String {
        let (col, attr) = try column(path)
        if v.isNull {
            switch op {
            case .equal: return "(\(col) IS NULL)"
            case .notEqual: return "(\(col) IS NOT NULL)"
            case .less, .lessOrEqual, .greater, .greaterOrEqual:
                throw StoreError(.invalidArgument, "'\(path) \(op.rawValue) nil' has no meaning")
            }
        }
        guard let attr else {
            throw StoreError(.invalidArgument, "compare '\(path)' to an object id or nil, not a value")
        }
        let p = try bind(v, attr, path)
        switch op {
        case .equal: return "(\(col) IS \(p))"
        case .notEqual: return "(\(col) IS NOT \(p))"
        case .less, .lessOrEqual, .greater, .greaterOrEqual: return "coalesce(\(col) \(op.rawValue) \(p), 0)"
        }
    }

    /// A to-one relationship is the object `id` (or nil).
    private mutating func related(_ path: String, _ id: ObjectID?) throws -> String {
        let (col, attr) = try column(path)
        guard attr == nil, let r = entity.relationship(named: path) else {
            throw StoreError(.invalidArgument, "'\(path)' is not a to-one relationship")
        }
        guard let id else { return "(\(col) IS NULL)" }
        guard id.entity == r.destination, id.storeID == storeID, !id.isTemporary else {
            throw StoreError(.invalidArgument, "\(id) cannot be the \(entity.name).\(path) of a stored object")
        }
        bindings.append(.integer(id.primaryKey))
        return "(\(col) IS ?)"
    }

    mutating func orderBy(_ keys: [SortKey]) throws -> String {
        guard !keys.isEmpty else { return " ORDER BY \(alias).\(StoreColumn.primaryKey)" }
        let parts = try keys.map { k -> String in
            let (col, _) = try column(k.path)
            return "\(col) \(k.ascending ? "ASC" : "DESC")"
        }
        // The key breaks ties in the direction of the last sort key: an index on the sort keys
        // (which ends with the row id) then serves the whole order, either way.
        return " ORDER BY " + parts.joined(separator: ", ") + ", \(alias).\(StoreColumn.primaryKey)"
            + (keys.last?.ascending == false ? " DESC" : "")
    }
}
