import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// A condition on objects of one entity: Core Data's fetch predicates, as a value.
///
/// Key paths are attribute names or a to-one relationship followed by an attribute of its
/// destination (`category.name`). Values are always bound, never spliced into SQL.
///
/// For example:
/// ```swift
/// let c: Condition = Key("title").contains("cafe", .caseInsensitive, .diacriticInsensitive)
///     && Key("isRead") == false && Key("category.name") == "Swift"
/// ```
public struct Condition: Sendable, Hashable {
    /// The condition's form; internal, so that it can grow (to-many predicates, say) without
    /// breaking code that builds conditions with ``Key`` and the operators.
    indirect enum Node: Sendable, Hashable {
        case always
        case compare(String, Comparison, Value)
        case among(String, [Value])
        case between(String, Value, Value)
        case text(String, TextOperator, String, TextOptions)
        /// A to-one relationship is the object (or nil).
        case related(String, ObjectID?)
        case and([Condition])
        case or([Condition])
        case not(Condition)
        /// Some, every or no object of a to-many relationship matches (Core Data's ANY, ALL, NONE).
        case quantified(String, Quantifier, Condition)
        /// How many objects a to-many relationship holds, compared.
        case count(String, Comparison, Int64)
    }

    /// How many objects of a to-many relationship must match.
    public enum Quantifier: String, Sendable, Hashable { case any = "ANY", all = "ALL", none = "NONE" }

    let node: Node

    init(_ node: Node) { self.node = node }

    /// Every object.
    public static let always = Condition(.always)

    /// The key paths the condition reads (a live query decides from them whether a change
    /// can matter).
    package var keyPaths: [String] {
        switch node {
        case .always: return []
        case .compare(let path, _, _), .among(let path, _), .between(let path, _, _), .text(let path, _, _, _),
            .related(let path, _):
            return [path]
        case .and(let cs), .or(let cs): return cs.flatMap(\.keyPaths)
        case .not(let c): return c.keyPaths
        case .quantified(let path, _, _), .count(let path, _, _): return [path]
        }
    }

    /// The to-many relationships the condition reads through ANY, ALL, NONE or a count: any
    /// change of their objects can change what it matches.
    package var toManyPaths: [String] {
        switch node {
        case .quantified(let path, _, _), .count(let path, _, _): return [path]
        case .and(let cs), .or(let cs): return cs.flatMap(\.toManyPaths)
        case .not(let c): return c.toManyPaths
        default: return []
        }
    }
    /// A fixed text of the condition, stored with the model (a kept count's condition): the same
    /// condition always gives the same text.
    var canonicalText: String {
        func options(_ o: TextOptions) -> String {
            o.isEmpty
                ? ""
                : "[" + (o.contains(.caseInsensitive) ? "c" : "") + (o.contains(.diacriticInsensitive) ? "d" : "") + "]"
        }
        switch node {
        case .always: return "TRUEPREDICATE"
        case .compare(let path, let op, let v): return "\(path) \(op.rawValue) \(v.canonicalText)"
        case .among(let path, let vs): return "\(path) IN {\(vs.map(\.canonicalText).joined(separator: ", "))}"
        case .between(let path, let a, let b): return "\(path) BETWEEN {\(a.canonicalText), \(b.canonicalText)}"
        case .text(let path, let op, let pattern, let o):
            return "\(path) \(op.rawValue)\(options(o)) \(Value.string(pattern).canonicalText)"
        case .related(let path, let id): return "\(path) == \(id.map { "\($0.entity)/\($0.primaryKey)" } ?? "nil")"
        case .and(let cs):
            return "(" + (cs.isEmpty ? "TRUEPREDICATE" : cs.map(\.canonicalText).joined(separator: " AND ")) + ")"
        case .or(let cs):
            return "(" + (cs.isEmpty ? "FALSEPREDICATE" : cs.map(\.canonicalText).joined(separator: " OR ")) + ")"
        case .not(let c): return "NOT \(c.canonicalText)"
        case .quantified(let path, let q, let c): return "\(q.rawValue) \(path) SATISFIES \(c.canonicalText)"
        case .count(let path, let op, let n): return "\(path).@count \(op.rawValue) \(n)"
        }
    }

    /// All of `conditions` (every object when there are none).
    public static func all(_ conditions: [Condition]) -> Condition { Condition(.and(conditions)) }
    /// Any of `conditions` (no object when there are none).
    public static func any(_ conditions: [Condition]) -> Condition { Condition(.or(conditions)) }

    public enum Comparison: String, Sendable, Hashable {
        case equal = "==", notEqual = "!=", less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
    }
    public enum TextOperator: String, Sendable, Hashable {
        case contains = "CONTAINS", beginsWith = "BEGINSWITH", endsWith = "ENDSWITH", like = "LIKE", equal = "=="
    }

    public struct TextOptions: OptionSet, Sendable, Hashable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// `[c]`
        public static let caseInsensitive = TextOptions(rawValue: 1)
        /// `[d]`
        public static let diacriticInsensitive = TextOptions(rawValue: 2)
        static let all: TextOptions = [.caseInsensitive, .diacriticInsensitive]
    }

    public static func && (a: Condition, b: Condition) -> Condition { Condition(.and([a, b])) }
    public static func || (a: Condition, b: Condition) -> Condition { Condition(.or([a, b])) }
    public static prefix func ! (a: Condition) -> Condition { Condition(.not(a)) }
}

/// A Swift value a condition can compare with directly (`Key("url") == url`): the standard
/// scalar types, `Date`, `Data`, `UUID`, `URL`, `Decimal`, ``Value``, and optionals of these.
/// An enum backed by a String or an Int joins with an empty conformance
/// (`extension Status: ValueConvertible {}`).
public protocol ValueConvertible: Sendable {
    /// The value as stored.
    var storedValue: Value { get }
}

extension Value: ValueConvertible { public var storedValue: Value { self } }
extension String: ValueConvertible { public var storedValue: Value { .string(self) } }
extension Int: ValueConvertible { public var storedValue: Value { .integer(Int64(self)) } }
extension Int64: ValueConvertible { public var storedValue: Value { .integer(self) } }
extension Int32: ValueConvertible { public var storedValue: Value { .integer(Int64(self)) } }
extension Double: ValueConvertible { public var storedValue: Value { .double(self) } }
extension Float: ValueConvertible { public var storedValue: Value { .double(Double(self)) } }
extension Bool: ValueConvertible { public var storedValue: Value { .bool(self) } }
extension Date: ValueConvertible { public var storedValue: Value { .date(self) } }
extension Data: ValueConvertible { public var storedValue: Value { .data(self) } }
extension UUID: ValueConvertible { public var storedValue: Value { .uuid(self) } }
extension URL: ValueConvertible { public var storedValue: Value { .string(absoluteString) } }
extension Decimal: ValueConvertible { public var storedValue: Value { .string(description) } }
extension Optional: ValueConvertible where Wrapped: ValueConvertible {
    public var storedValue: Value { self?.storedValue ?? .null }
}
extension RawRepresentable where Self: ValueConvertible, RawValue: ValueConvertible {
    public var storedValue: Value { rawValue.storedValue }
}

/// A key path in a condition or a sort: `Key("title")`, `Key("category.name")`, or a record's
/// coding key (`Key(Article.CodingKeys.title)`: a typed column, checked by the compiler).
public struct Key: Sendable, Hashable {
    public let path: String
    public init(_ path: String) { self.path = path }
    /// The attribute a record's coding key names (its string value, as the record maps it).
    public init(_ codingKey: some CodingKey) { self.path = codingKey.stringValue }

    public static func == <T: ValueConvertible>(k: Key, v: T) -> Condition {
        Condition(.compare(k.path, .equal, v.storedValue))
    }
    public static func != <T: ValueConvertible>(k: Key, v: T) -> Condition {
        Condition(.compare(k.path, .notEqual, v.storedValue))
    }
    public static func < <T: ValueConvertible>(k: Key, v: T) -> Condition {
        Condition(.compare(k.path, .less, v.storedValue))
    }
    public static func <= <T: ValueConvertible>(k: Key, v: T) -> Condition {
        Condition(.compare(k.path, .lessOrEqual, v.storedValue))
    }
    public static func > <T: ValueConvertible>(k: Key, v: T) -> Condition {
        Condition(.compare(k.path, .greater, v.storedValue))
    }
    public static func >= <T: ValueConvertible>(k: Key, v: T) -> Condition {
        Condition(.compare(k.path, .greaterOrEqual, v.storedValue))
    }

    public static func == (k: Key, v: Value) -> Condition { Condition(.compare(k.path, .equal, v)) }
    public static func != (k: Key, v: Value) -> Condition { Condition(.compare(k.path, .notEqual, v)) }
    public static func < (k: Key, v: Value) -> Condition { Condition(.compare(k.path, .less, v)) }
    public static func <= (k: Key, v: Value) -> Condition { Condition(.compare(k.path, .lessOrEqual, v)) }
    public static func > (k: Key, v: Value) -> Condition { Condition(.compare(k.path, .greater, v)) }
    public static func >= (k: Key, v: Value) -> Condition { Condition(.compare(k.path, .greaterOrEqual, v)) }
    public static func == (k: Key, id: ObjectID) -> Condition { Condition(.related(k.path, id)) }

    public func among(_ values: [Value]) -> Condition { Condition(.among(path, values)) }
    public func between(_ low: Value, _ high: Value) -> Condition { Condition(.between(path, low, high)) }
    public func contains(_ s: String, _ options: Condition.TextOptions...) -> Condition {
        Condition(.text(path, .contains, s, Condition.TextOptions(options)))
    }
    public func beginsWith(_ s: String, _ options: Condition.TextOptions...) -> Condition {
        Condition(.text(path, .beginsWith, s, Condition.TextOptions(options)))
    }
    public func endsWith(_ s: String, _ options: Condition.TextOptions...) -> Condition {
        Condition(.text(path, .endsWith, s, Condition.TextOptions(options)))
    }
    public func like(_ s: String, _ options: Condition.TextOptions...) -> Condition {
        Condition(.text(path, .like, s, Condition.TextOptions(options)))
    }
    public func equals(_ s: String, _ options: Condition.TextOptions...) -> Condition {
        Condition(.text(path, .equal, s, Condition.TextOptions(options)))
    }

    /// Some object of to-many relationship `path` matches `condition` (over its destination).
    public func any(_ condition: Condition) -> Condition { Condition(.quantified(path, .any, condition)) }
    /// Every object of to-many relationship `path` matches (true when it holds none).
    public func all(_ condition: Condition) -> Condition { Condition(.quantified(path, .all, condition)) }
    /// No object of to-many relationship `path` matches.
    public func none(_ condition: Condition) -> Condition { Condition(.quantified(path, .none, condition)) }
    /// How many objects to-many relationship `path` holds: `Key("articles").count > 3`.
    public var count: RelationshipCount { RelationshipCount(path: path) }

    public var ascending: SortKey { SortKey(path, ascending: true) }
    public var descending: SortKey { SortKey(path, ascending: false) }
}

/// The number of objects of a to-many relationship, in a condition (``Key/count``).
public struct RelationshipCount: Sendable, Hashable {
    let path: String
    public static func == (c: RelationshipCount, n: Int) -> Condition { Condition(.count(c.path, .equal, Int64(n))) }
    public static func != (c: RelationshipCount, n: Int) -> Condition { Condition(.count(c.path, .notEqual, Int64(n))) }
    public static func < (c: RelationshipCount, n: Int) -> Condition { Condition(.count(c.path, .less, Int64(n))) }
    public static func <= (c: RelationshipCount, n: Int) -> Condition {
        Condition(.count(c.path, .lessOrEqual, Int64(n)))
    }
    public static func > (c: RelationshipCount, n: Int) -> Condition { Condition(.count(c.path, .greater, Int64(n))) }
    public static func >= (c: RelationshipCount, n: Int) -> Condition {
        Condition(.count(c.path, .greaterOrEqual, Int64(n)))
    }
}

/// One sort criterion of a fetch.
public struct SortKey: Sendable, Hashable {
    public let path: String
    public let ascending: Bool
    public init(_ path: String, ascending: Bool = true) {
        self.path = path
        self.ascending = ascending
    }
}

/// What to fetch: an entity, a condition, an order, a window.
public struct FetchRequest: Sendable, Hashable {
    public var entity: String
    public var condition: Condition
    public var sort: [SortKey]
    public var limit: Int?
    public var offset: Int
    /// Whether a context's fetch sees its own unsaved inserts, updates and deletes of the
    /// entity (Core Data's `includesPendingChanges`, on by default).
    public var includesPendingChanges = true

    public init(
        _ entity: String, where condition: Condition = .always, sortedBy sort: [SortKey] = [], limit: Int? = nil,
        offset: Int = 0
    ) {
        self.entity = entity
        self.condition = condition
        self.sort = sort
        self.limit = limit
        self.offset = offset
    }
}
