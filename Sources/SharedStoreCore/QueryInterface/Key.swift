import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// A key path in a condition or a sort: `Key("title")`, `Key("category.name")`, or a record's
/// coding key (`Key(Article.CodingKeys.title)`: a typed column, checked by the compiler).
public struct Key: Sendable, Hashable {
    /// The key path: an attribute or to-one relationship of the fetched entity, or a to-one
    /// relationship and an attribute of its destination (`category.name`). It is resolved when the
    /// request runs: a path of more than two parts or a name the model lacks fails the fetch with
    /// `.unknownProperty`.
    public let path: String
    /// The key path `path` (`"title"`, `"category.name"`).
    public init(_ path: String) { self.path = path }
    /// The attribute a record's coding key names (its string value, as the record maps it).
    public init(_ codingKey: some CodingKey) { self.path = codingKey.stringValue }

    /// Objects whose value at `k` equals `v`, a Swift value (`String`, `Int`, `Bool`, `Date`, `URL`,
    /// a raw-valued enum, …; see ``ValueConvertible``).
    ///
    /// Equality never leaves NULL undecided (SQL's `IS`): an optional `v` that is nil becomes
    /// `IS NULL` and matches the objects without a value.
    ///
    /// For example:
    /// ```swift
    /// Key("isRead") == false
    /// Key("url") == URL(string: "https://sqlite.org/wal.html")!
    /// Key("category.name") == "Swift"          // through a to-one relationship
    /// Key("note") == (nil as String?)          // IS NULL
    /// ```
    ///
    /// The fetch fails with `.validation` when `v` does not fit the attribute's type, and with
    /// `.invalidArgument` when `k` names a relationship (compare it with an ``ObjectID`` instead).
    public static func == <T: ValueConvertible>(k: Key, v: T) -> Condition {
        Condition(.compare(k.path, .equal, v.storedValue))
    }
    /// Objects whose value at `k` is not `v` (SQL's `IS NOT`): objects without a value match, and
    /// a nil `v` becomes `IS NOT NULL`.
    ///
    /// For example:
    /// ```swift
    /// Key("category.name") != "Swift"          // also matches articles without a category
    /// ```
    public static func != <T: ValueConvertible>(k: Key, v: T) -> Condition {
        Condition(.compare(k.path, .notEqual, v.storedValue))
    }
    /// Objects whose value at `k` is less than `v`; objects without a value never match.
    ///
    /// Strings compare by their UTF-8 bytes (SQLite's BINARY), dates by time, booleans as 0 and 1.
    /// For example:
    /// ```swift
    /// Key("createdAt") < Date(timeIntervalSinceNow: -86_400)
    /// ```
    ///
    /// A nil `v` fails the fetch with `.invalidArgument` (`< nil` has no meaning).
    public static func < <T: ValueConvertible>(k: Key, v: T) -> Condition {
        Condition(.compare(k.path, .less, v.storedValue))
    }
    /// Objects whose value at `k` is at most `v`; objects without a value never match. A nil `v`
    /// fails the fetch with `.invalidArgument`.
    public static func <= <T: ValueConvertible>(k: Key, v: T) -> Condition {
        Condition(.compare(k.path, .lessOrEqual, v.storedValue))
    }
    /// Objects whose value at `k` is greater than `v`; objects without a value never match. A nil
    /// `v` fails the fetch with `.invalidArgument`.
    public static func > <T: ValueConvertible>(k: Key, v: T) -> Condition {
        Condition(.compare(k.path, .greater, v.storedValue))
    }
    /// Objects whose value at `k` is at least `v`; objects without a value never match. A nil `v`
    /// fails the fetch with `.invalidArgument`.
    public static func >= <T: ValueConvertible>(k: Key, v: T) -> Condition {
        Condition(.compare(k.path, .greaterOrEqual, v.storedValue))
    }

    /// Objects whose value at `k` equals the stored value `v` (SQL's `IS`).
    ///
    /// `nil` is ``Value/null`` here: `Key("note") == nil` becomes `IS NULL`, the objects without a
    /// value. It also works on a to-one relationship: `Key("category") == nil` matches the objects
    /// that point at nothing.
    public static func == (k: Key, v: Value) -> Condition { Condition(.compare(k.path, .equal, v)) }
    /// Objects whose value at `k` is not `v` (SQL's `IS NOT`); `Key("note") != nil` becomes
    /// `IS NOT NULL`.
    public static func != (k: Key, v: Value) -> Condition { Condition(.compare(k.path, .notEqual, v)) }
    /// Objects whose value at `k` is less than `v`; objects without a value never match, and a
    /// ``Value/null`` `v` fails the fetch with `.invalidArgument`.
    public static func < (k: Key, v: Value) -> Condition { Condition(.compare(k.path, .less, v)) }
    /// Objects whose value at `k` is at most `v`; objects without a value never match, and a
    /// ``Value/null`` `v` fails the fetch with `.invalidArgument`.
    public static func <= (k: Key, v: Value) -> Condition { Condition(.compare(k.path, .lessOrEqual, v)) }
    /// Objects whose value at `k` is greater than `v`; objects without a value never match, and a
    /// ``Value/null`` `v` fails the fetch with `.invalidArgument`.
    public static func > (k: Key, v: Value) -> Condition { Condition(.compare(k.path, .greater, v)) }
    /// Objects whose value at `k` is at least `v`; objects without a value never match, and a
    /// ``Value/null`` `v` fails the fetch with `.invalidArgument`.
    public static func >= (k: Key, v: Value) -> Condition { Condition(.compare(k.path, .greaterOrEqual, v)) }
    /// Objects whose to-one relationship `k` points at the object `id`.
    ///
    /// For example:
    /// ```swift
    /// let swift = try context.insert("Category", ["name": "Swift"])
    /// let saved = try context.save()
    /// let inSwift = FetchRequest("Article", where: Key("category") == saved.permanentID(for: swift))
    /// ```
    ///
    /// The fetch fails with `.invalidArgument` when `k` is not a to-one relationship, or when `id` is
    /// of another entity than its destination, of another store, or temporary (not saved yet).
    public static func == (k: Key, id: ObjectID) -> Condition { Condition(.related(k.path, id)) }

    /// Objects whose value at the key is one of `values` (SQL's `IN`; Core Data's `IN`). An empty
    /// list matches nothing; objects without a value never match.
    ///
    /// For example:
    /// ```swift
    /// Key("status").among(["new", "read"])
    /// ```
    public func among(_ values: [Value]) -> Condition { Condition(.among(path, values)) }
    /// Objects whose value at the key lies between `low` and `high`, both included (SQL's
    /// `BETWEEN`); objects without a value never match.
    public func between(_ low: Value, _ high: Value) -> Condition { Condition(.between(path, low, high)) }
    /// Objects whose string at the key contains `s` (Core Data's `CONTAINS`, with `[c]`, `[d]` as
    /// ``Condition/TextOptions``). An empty `s` matches every object that has a value.
    ///
    /// The string operators work on string and URL attributes. Without options they compare the
    /// text as stored, Unicode scalar by scalar, as `==` does (`"e\u{301}"` does not begin with
    /// `"é"`); with `[c]` or `[d]` both sides are folded and compared as Swift compares strings.
    /// A URL is stored in its absolute, percent-encoded form (`https://a.example/%C3%A9`): the
    /// operators compare with that text (``equals(_:_:)`` with no option, like `==`, first puts
    /// its argument in that form).
    ///
    /// For example:
    /// ```swift
    /// Key("title").contains("cafe", .caseInsensitive, .diacriticInsensitive)   // matches "Café Swift"
    /// ```
    ///
    /// The match is a function SQLite calls row by row, which no index serves: a search over many
    /// objects is faster on a `canonical` derived attribute with an index (``Attribute/canonical(_:)``
    /// folds the search text the same way). The fetch fails with
    /// `.invalidArgument` when the key is not a string or URL attribute.
    public func contains(_ s: String, _ options: Condition.TextOptions...) -> Condition {
        Condition(.text(path, .contains, .string(s), Condition.TextOptions(options)))
    }
    /// Objects whose string at the key begins with `s` (Core Data's `BEGINSWITH`), with the given
    /// options.
    ///
    /// Without options it runs as a range of the column (`>= s` and below the first text past
    /// every text that begins with `s`), which an index on the attribute serves: a prefix search
    /// over many objects is fast on a `canonical` derived attribute with an index, given the
    /// search text folded by ``Attribute/canonical(_:)``. With options it is a function SQLite
    /// calls row by row. The fetch fails with `.invalidArgument` when the key is not a string or
    /// URL attribute.
    public func beginsWith(_ s: String, _ options: Condition.TextOptions...) -> Condition {
        Condition(.text(path, .beginsWith, .string(s), Condition.TextOptions(options)))
    }
    /// Objects whose string at the key ends with `s` (Core Data's `ENDSWITH`), with the given
    /// options. The fetch fails with `.invalidArgument` when the key is not a string or URL
    /// attribute.
    public func endsWith(_ s: String, _ options: Condition.TextOptions...) -> Condition {
        Condition(.text(path, .endsWith, .string(s), Condition.TextOptions(options)))
    }
    /// Objects whose string at the key matches the wildcard pattern `s` (Core Data's `LIKE`): `*`
    /// matches any run of characters, `?` one character, and the whole string must match.
    ///
    /// For example:
    /// ```swift
    /// Key("url").like("https://*.swift.org/*")
    /// ```
    ///
    /// The fetch fails with `.invalidArgument` when the key is not a string or URL attribute.
    public func like(_ s: String, _ options: Condition.TextOptions...) -> Condition {
        Condition(.text(path, .like, .string(s), Condition.TextOptions(options)))
    }
    /// Objects whose string at the key equals `s` under `options` (Core Data's `==[cd]`); with no
    /// option it is the same as `==`, served by an index on the attribute. The fetch fails with
    /// `.invalidArgument` when the key is not a string or URL attribute.
    public func equals(_ s: String, _ options: Condition.TextOptions...) -> Condition {
        Condition(.text(path, .equal, .string(s), Condition.TextOptions(options)))
    }

    /// Some object of to-many relationship `path` matches `condition` (over its destination).
    public func any(_ condition: Condition) -> Condition { Condition(.quantified(path, .any, condition)) }
    /// Every object of to-many relationship `path` matches (true when it holds none).
    public func all(_ condition: Condition) -> Condition { Condition(.quantified(path, .all, condition)) }
    /// No object of to-many relationship `path` matches.
    public func none(_ condition: Condition) -> Condition { Condition(.quantified(path, .none, condition)) }
    /// How many objects to-many relationship `path` holds: `Key("articles").count > 3`.
    public var count: RelationshipCount { RelationshipCount(path: path) }

    /// A sort on this key, smallest first (objects without a value come first).
    public var ascending: SortKey { SortKey(path, ascending: true) }
    /// A sort on this key, largest first (objects without a value come last).
    public var descending: SortKey { SortKey(path, ascending: false) }
}

/// The number of objects of a to-many relationship, in a condition (``Key/count``).
public struct RelationshipCount: Sendable, Hashable {
    let path: String
    /// Objects whose to-many relationship holds exactly `n` objects (`Key("articles").count == 0`).
    public static func == (c: RelationshipCount, n: Int) -> Condition { Condition(.count(c.path, .equal, Int64(n))) }
    /// Objects whose to-many relationship does not hold exactly `n` objects.
    public static func != (c: RelationshipCount, n: Int) -> Condition { Condition(.count(c.path, .notEqual, Int64(n))) }
    /// Objects whose to-many relationship holds fewer than `n` objects.
    public static func < (c: RelationshipCount, n: Int) -> Condition { Condition(.count(c.path, .less, Int64(n))) }
    /// Objects whose to-many relationship holds at most `n` objects.
    public static func <= (c: RelationshipCount, n: Int) -> Condition {
        Condition(.count(c.path, .lessOrEqual, Int64(n)))
    }
    /// Objects whose to-many relationship holds more than `n` objects (`Key("articles").count > 3`).
    public static func > (c: RelationshipCount, n: Int) -> Condition { Condition(.count(c.path, .greater, Int64(n))) }
    /// Objects whose to-many relationship holds at least `n` objects.
    public static func >= (c: RelationshipCount, n: Int) -> Condition {
        Condition(.count(c.path, .greaterOrEqual, Int64(n)))
    }
}
