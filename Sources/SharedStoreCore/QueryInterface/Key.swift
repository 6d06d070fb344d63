import Foundation
import SharedStoreSQLite
import SharedStoreSupport

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
