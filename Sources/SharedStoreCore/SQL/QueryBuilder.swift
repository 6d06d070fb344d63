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
    /// Whether the expression being built sits under an odd number of NOTs. Only there can a
    /// comparison's NULL (a missing value compared with `<`) change which rows the WHERE keeps;
    /// elsewhere a NULL drops the row exactly as a 0 would, so the comparison stays plain and an
    /// index can serve it.
    private var negated = false
    /// False when only the bindings are wanted (the SQL of the request's shape is known): the
    /// conditions are checked and their values bound exactly as for the SQL, in the same order,
    /// but no text is built.
    private let writesSQL: Bool

    init(model: Model, entity: Entity, storeID: UUID, alias: String = SelectFrame.alias, writesSQL: Bool = true) {
        self.model = model
        self.entity = entity
        self.storeID = storeID
        self.alias = alias
        self.writesSQL = writesSQL
    }

    /// The SQL expression for a key path and its attribute (nil for a relationship itself).
    mutating func column(_ path: String) throws -> (sql: String, attribute: Attribute?) {
        // A typed key that names no column carries why, in angle brackets (``Key/init(_:)``).
        if path.utf8.first == UInt8(ascii: "<"), path.hasSuffix(">") {
            throw StoreError(.unknownProperty, "typed key: " + String(path.dropFirst().dropLast()))
        }
        // Most paths are one name: no split, no array.
        guard path.utf8.contains(UInt8(ascii: ".")) else { return try ownColumn(path) }
        let parts = path.split(separator: ".").map(String.init)
        guard parts.count == 1 || parts.count == 2 else {
            throw StoreError(.unknownProperty, "key path '\(path)' has more than two parts")
        }
        if parts.count == 1 { return try ownColumn(parts[0]) }
        guard let r = entity.relationship(named: parts[0]), !r.isToMany else {
            throw StoreError(.unknownProperty, "\(entity.name).\(parts[0]) is not a to-one relationship (in '\(path)')")
        }
        let dest = try model.entity(r.destination)
        guard let a = dest.attribute(named: parts[1]) else {
            throw StoreError(.unknownProperty, "\(dest.name) has no attribute '\(parts[1])' (in '\(path)')")
        }
        guard writesSQL else { return ("", a) }
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

    /// The column of `name`, an attribute or a to-one relationship of the entity itself.
    private func ownColumn(_ name: String) throws -> (sql: String, attribute: Attribute?) {
        if let a = entity.attribute(named: name) { return (writesSQL ? "\(alias).\(SQLMapping.quote(a.name))" : "", a) }
        if let r = entity.relationship(named: name), !r.isToMany {
            return (writesSQL ? "\(alias).\(SQLMapping.quote(r.name))" : "", nil)
        }
        throw StoreError(.unknownProperty, "\(entity.name) has no attribute or to-one relationship '\(name)'")
    }

    private mutating func bind(_ v: Value, _ a: Attribute, _ path: String) throws -> String {
        bindings.append(try SQLMapping.sqlValue(v, a.type, object: entity.name, property: path))
        return "?"
    }

    /// A WHERE expression that is never NULL, so that NOT and OR follow two-valued logic.
    ///
    /// - Throws: `.invalidArgument` for a condition nested past ``Condition/maxDepth``.
    mutating func sql(_ c: Condition) throws -> String {
        try c.checkDepth()
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
            return decided("\(col) IN (\(ps.joined(separator: ",")))")
        case .between(let path, let low, let high):
            let (col, attr) = try column(path)
            guard let attr else { throw StoreError(.invalidArgument, "BETWEEN on '\(path)' needs an attribute") }
            let a = try bind(low, attr, path)
            let b = try bind(high, attr, path)
            return decided("\(col) BETWEEN \(a) AND \(b)")
        case .text(let path, let op, let pattern, let options):
            return try text(path, op, pattern.stringValue ?? "", options)
        case .related(let path, let id):
            return try related(path, id)
        case .and(let cs):
            guard !cs.isEmpty else { return "1" }
            return try joined(Self.flattened(cs, and: true), " AND ")
        case .or(let cs):
            guard !cs.isEmpty else { return "0" }
            return try joined(Self.flattened(cs, and: false), " OR ")
        case .not(let inner):
            // NOT NOT x is x (two-valued): as x, an index can serve it.
            if case .not(let x) = inner.node { return try sql(x) }
            negated.toggle()
            defer { negated.toggle() }
            return "(NOT \(try sql(inner)))"
        case .quantified(let path, let quantifier, let inner):
            let (from, link, dest, sub) = try toMany(path)
            var q = QueryBuilder(model: model, entity: dest, storeID: storeID, alias: sub, writesSQL: writesSQL)
            // The subquery's own WHERE: ALL tests the condition under a NOT (no object fails it).
            q.negated = quantifier == .all
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

    /// `cs` joined by `separator`, in parentheses (only bound when no SQL is written).
    private mutating func joined(_ cs: [Condition], _ separator: String) throws -> String {
        guard writesSQL else {
            for c in cs { _ = try sql(c) }
            return ""
        }
        return Self.balanced(try cs.map { try sql($0) }[...], separator)
    }

    /// The members of `cs`, with those of a non-empty list of the same kind (AND in AND, OR in
    /// OR) in its place, in order: `a && b && c` is `(a AND b) AND c`, and a chain of a hundred
    /// such steps nested its SQL a hundred parentheses deep, past what SQLite's parser takes.
    static func flattened(_ cs: [Condition], and: Bool) -> [Condition] {
        func nests(_ c: Condition) -> Bool {
            switch c.node {
            case .and(let inner): return and && !inner.isEmpty
            case .or(let inner): return !and && !inner.isEmpty
            default: return false
            }
        }
        // Most lists hold none (every fetch binds its values through here): no copy then.
        guard cs.contains(where: nests) else { return cs }
        var out: [Condition] = []
        for c in cs {
            switch c.node {
            case .and(let inner) where and && !inner.isEmpty: out += flattened(inner, and: true)
            case .or(let inner) where !and && !inner.isEmpty: out += flattened(inner, and: false)
            default: out.append(c)
            }
        }
        return out
    }

    /// `parts` joined by `separator`, in order, as a balanced tree of parentheses past a few:
    /// SQLite parses `a OR b OR c …` as a chain as deep as the list is long, and refuses one past
    /// 1,000 ("Expression tree is too large"); balanced, a list of a million is 20 levels deep.
    static func balanced(_ parts: ArraySlice<String>, _ separator: String) -> String {
        guard parts.count > 8 else { return "(" + parts.joined(separator: separator) + ")" }
        let middle = parts.startIndex + parts.count / 2
        return "(" + balanced(parts[..<middle], separator) + separator + balanced(parts[middle...], separator) + ")"
    }

    /// A string operator on `path`, a string or URL attribute.
    private mutating func text(
        _ path: String, _ op: Condition.TextOperator, _ pattern: String,
        _ options: Condition.TextOptions
    ) throws -> String {
        let (col, attr) = try column(path)
        guard let attr, attr.type == .string || attr.type == .url else {
            throw StoreError(
                .invalidArgument, "\(op.rawValue) needs a string or URL attribute, '\(path)' is not one")
        }
        // Without options the operators compare the stored text as it is, as SQLite does: ==
        // and BEGINSWITH then run on the column's index (an equality, a range).
        if options.isEmpty, op == .equal {
            // As `==` compares it: a URL in its stored form (one that is not a URL equals none).
            guard attr.type == .url else {
                bindings.append(.text(pattern))
                return "(\(col) IS ?)"
            }
            guard let stored = try? SQLMapping.sqlValue(.string(pattern), .url, object: nil, property: path) else {
                return "0"
            }
            bindings.append(stored)
            return "(\(col) IS ?)"
        }
        if options.isEmpty, op == .beginsWith { return prefix(col, pattern) }
        bindings.append(.text(pattern))
        bindings.append(.integer(StringMatch(op, options).code))
        return "ss_strop(\(col), ?, ?)"
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
        case .less, .lessOrEqual, .greater, .greaterOrEqual: return decided("\(col) \(op.rawValue) \(p)")
        }
    }

    /// `expression`, which is NULL when a value is missing, as this place in the WHERE needs it:
    /// plain where a NULL drops the row as a 0 would (an index can serve it), made 0 under a NOT
    /// (so that `NOT` of it keeps the row, two-valued).
    private func decided(_ expression: String) -> String {
        negated ? "coalesce(\(expression), 0)" : "(\(expression))"
    }

    /// `col` begins with `prefix`, compared as stored: the range from `prefix` up to the first
    /// text past every text that begins with it, which an index on the column serves.
    private mutating func prefix(_ col: String, _ prefix: String) -> String {
        guard !prefix.isEmpty else { return "(\(col) IS NOT NULL)" }
        bindings.append(.text(prefix))
        guard let end = Self.textAfterPrefix(prefix) else { return decided("\(col) >= ?") }
        bindings.append(.text(end))
        return decided("\(col) >= ? AND \(col) < ?")
    }

    /// The smallest text greater than every text that begins with `prefix`, in SQLite's BINARY
    /// order (UTF-8 bytes, which is the order of Unicode scalars): `prefix` with its last scalar
    /// made the next one (past the surrogates, which no text holds). A last scalar that is the
    /// largest one goes and the one before it moves on instead; nil when every scalar is the
    /// largest (no text is past them all).
    static func textAfterPrefix(_ prefix: String) -> String? {
        // Most prefixes end in ASCII below DEL: that byte moves on, the rest stays as it is.
        var utf8 = Array(prefix.utf8)
        if let last = utf8.last, last < 0x7F {
            utf8[utf8.count - 1] = last + 1
            return String(decoding: utf8, as: UTF8.self)
        }
        var scalars = Array(prefix.unicodeScalars)
        while let last = scalars.popLast() {
            let next = last.value == 0xD7FF ? 0xE000 : last.value + 1
            if let s = Unicode.Scalar(next) {
                scalars.append(s)
                var out = ""
                out.unicodeScalars.append(contentsOf: scalars)
                return out
            }
        }
        return nil
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
        // The row id breaks ties. Every index ends with it, ascending: an index that holds the sort
        // keys (as its last parts, after any the WHERE fixes) serves the whole order when the
        // row id goes the way the index is read — ascending when it is read forward (the keys in
        // its own directions), descending when backward (every direction reversed).
        return " ORDER BY " + parts.joined(separator: ", ") + ", \(alias).\(StoreColumn.primaryKey)"
            + (Self.readsBackward(entity, keys) ? " DESC" : "")
    }

    /// Whether an order by `keys` reads an index of `e` backward: an index whose last parts are
    /// the keys, all in reverse (one in their own directions reads forward); with none, whether
    /// the last key descends (an ascending index on the keys then serves either direction).
    static func readsBackward(_ e: Entity, _ keys: [SortKey]) -> Bool {
        // An index of exactly the keys first: the one a plain sort uses.
        let candidates =
            e.indexes.filter { $0.parts.count == keys.count } + e.indexes.filter { $0.parts.count > keys.count }
        for index in candidates {
            let tail = index.parts.suffix(keys.count)
            guard zip(tail, keys).allSatisfy({ $0.property == $1.path }) else { continue }
            if zip(tail, keys).allSatisfy({ $0.ascending == $1.ascending }) { return false }
            if zip(tail, keys).allSatisfy({ $0.ascending != $1.ascending }) { return true }
        }
        return keys.last?.ascending == false
    }
}
