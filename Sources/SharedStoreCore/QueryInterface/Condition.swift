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
        /// The pattern is kept as a ``Value``, whose == compares strings exactly: two conditions
        /// whose patterns differ only in normal form are two conditions (and two cache entries).
        case text(String, TextOperator, Value, TextOptions)
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
    /// How many conditions are nested here, this one included (a comparison is 1, `!c` one more
    /// than `c`, a list one more than its deepest member).
    let depth: Int

    init(_ node: Node) {
        self.node = node
        switch node {
        case .and(let cs), .or(let cs): depth = (cs.lazy.map(\.depth).max() ?? 0) + 1
        case .not(let c), .quantified(_, _, let c): depth = c.depth + 1
        default: depth = 1
        }
    }

    /// The deepest nesting a query takes. Every use of a condition walks it recursively, and
    /// SQLite refuses an expression past 1,000 levels: a condition built by `&&` or `!` one step
    /// at a time, thousands deep, ran the stack out (a crash, where an error was due).
    public static let maxDepth = 256

    /// Throws `.invalidArgument` when the condition nests deeper than ``maxDepth``: before any
    /// code walks it.
    package func checkDepth() throws {
        guard depth <= Self.maxDepth else {
            throw StoreError(
                .invalidArgument,
                "a condition nests \(depth) levels deep (NOT, AND, OR or ANY within one another), more than the "
                    + "\(Self.maxDepth) a query takes: join many conditions with Condition.all([…]) or "
                    + "Condition.any([…]) rather than one && or || at a time")
        }
    }

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
            return "\(path) \(op.rawValue)\(options(o)) \(pattern.canonicalText)"
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

    /// A comparison operator, as `Key` and `RelationshipCount` build it; its raw value is the
    /// operator's text in a condition's stored form.
    public enum Comparison: String, Sendable, Hashable {
        /// `==`, `!=`, `<`, `<=`, `>`, `>=`.
        case equal = "==", notEqual = "!=", less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
    }
    /// A string operator of ``Key`` (``Key/contains(_:_:)`` and the others); its raw value is Core
    /// Data's name for it.
    public enum TextOperator: String, Sendable, Hashable {
        /// `CONTAINS`, `BEGINSWITH`, `ENDSWITH`, `LIKE` (`*` and `?` wildcards) and `==`.
        case contains = "CONTAINS", beginsWith = "BEGINSWITH", endsWith = "ENDSWITH", like = "LIKE", equal = "=="
    }

    /// How a string operator compares: Core Data's `[c]` and `[d]` modifiers. Both fold the stored
    /// string and the pattern before comparing (Foundation's case and diacritic folding).
    public struct TextOptions: OptionSet, Sendable, Hashable {
        /// The options' bits (``caseInsensitive`` is 1, ``diacriticInsensitive`` 2).
        public let rawValue: Int
        /// Options from their bits.
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// `[c]`
        public static let caseInsensitive = TextOptions(rawValue: 1)
        /// `[d]`
        public static let diacriticInsensitive = TextOptions(rawValue: 2)
        static let all: TextOptions = [.caseInsensitive, .diacriticInsensitive]
    }

    /// Objects that match both `a` and `b` (`AND`).
    ///
    /// For example:
    /// ```swift
    /// Key("isRead") == false && Key("category.name") == "Swift"
    /// ```
    public static func && (a: Condition, b: Condition) -> Condition { Condition(.and([a, b])) }
    /// Objects that match `a`, `b` or both (`OR`).
    public static func || (a: Condition, b: Condition) -> Condition { Condition(.or([a, b])) }
    /// Objects that do not match `a` (`NOT`). Conditions are two-valued: an object that `a` does not
    /// match because it has no value (a nil compared with `<`, say) matches `!a`.
    public static prefix func ! (a: Condition) -> Condition { Condition(.not(a)) }
}
