import Foundation
import SharedStoreSQLite
import SharedStoreSupport

extension Key {
    /// The attribute or to-one relationship a record's stored property holds: `Key(\Article.title)`.
    /// A misspelled property does not compile.
    ///
    /// The key is the property's stored name, its coding key (`Category.name` coded as `label`
    /// gives `label`). A key path that is not one stored, coded property of `R` (a computed
    /// property, a path through another value) gives a key no model has: the fetch fails with
    /// `.unknownProperty`, naming the key path and why.
    ///
    /// The compiler checks that the property exists and that a compared value has its type; a
    /// condition does not know which record type it will filter, so use key paths of the fetched
    /// type (a key path of another type names its property's column in the fetched entity).
    ///
    /// For example:
    /// ```swift
    /// let unread = try context.fetch(Article.self, where: \Article.isRead == false,
    ///                                sortedBy: [.descending(\Article.createdAt)])
    /// let swift = try context.fetch(Article.self, where: Key(\Article.title).beginsWith("Swift"))
    /// ```
    public init<R: Record, V>(_ keyPath: KeyPath<R, V>) { self.init(R.storedName(keyPath)) }

    /// An attribute of the object a record's to-one relationship points at:
    /// `Key(\Article.category, \Category.name)` is `category.name`.
    public init<R: Record, D: Record, V>(_ relationship: KeyPath<R, ObjectID?>, _ keyPath: KeyPath<D, V>) {
        self.init(R.storedName(relationship) + "." + D.storedName(keyPath))
    }

    /// Objects whose value at the key is one of `values` (``among(_:)-([Value])`` with Swift values).
    public func among<T: ValueConvertible>(_ values: [T]) -> Condition { among(values.map(\.storedValue)) }
    /// Objects whose value at the key lies between `low` and `high`, both included
    /// (``between(_:_:)-(Value,Value)`` with Swift values).
    public func between<T: ValueConvertible>(_ low: T, _ high: T) -> Condition {
        between(low.storedValue, high.storedValue)
    }
}

extension Record {
    /// The stored name (coding key) of the property `keyPath` reads; a key path that is not one
    /// stored property gives a text no model has as a property, naming the problem.
    package static func storedName(_ keyPath: PartialKeyPath<Self>) -> String {
        switch resolvedName(keyPath) {
        case .success(let name): return name
        case .failure(let e): return "<\(e.message)>"
        }
    }

    /// The stored name of the property `keyPath` reads, or why it has none.
    package static func resolvedName(_ keyPath: PartialKeyPath<Self>) -> Result<String, StoreError> {
        if let known = typedKeyNames.withLock({ $0[keyPath] }) { return known }
        var resolved: Result<String, StoreError>
        do {
            resolved = try RecordShape.of(Self.self).storedName(keyPath, of: Self.self)
        } catch {
            resolved = .failure(error as? StoreError ?? StoreError(.unknownProperty, "\(error)"))
        }
        if case .success("id") = resolved {
            resolved = .failure(
                StoreError(
                    .unknownProperty,
                    "\(Self.self).id is the object's id, not an attribute: compare ObjectIDs, or read the record with "
                        + "record(_:with:)"))
        }
        typedKeyNames.withLock { $0[keyPath] = resolved }
        return resolved
    }
}

/// Key path → stored name, for every typed key made (a handful per record type).
private let typedKeyNames = Protected<[AnyKeyPath: Result<String, StoreError>]>([:])

extension SortKey {
    /// A sort on a record's property, smallest first: `.ascending(\Article.createdAt)`.
    public static func ascending<R: Record, V>(_ keyPath: KeyPath<R, V>) -> SortKey { Key(keyPath).ascending }
    /// A sort on a record's property, largest first: `.descending(\Article.createdAt)`.
    public static func descending<R: Record, V>(_ keyPath: KeyPath<R, V>) -> SortKey { Key(keyPath).descending }
}

/// Records whose property equals `value`, a value of the property's own type (another type does
/// not compile): `\Article.isRead == false`, `\Article.note == nil` (`IS NULL`). See
/// ``Key/==(_:_:)-(Key,T)``.
public func == <R: Record, V: ValueConvertible>(keyPath: KeyPath<R, V>, value: V) -> Condition { Key(keyPath) == value }
/// Records whose property is not `value` (SQL's `IS NOT`: records without a value match).
public func != <R: Record, V: ValueConvertible>(keyPath: KeyPath<R, V>, value: V) -> Condition { Key(keyPath) != value }
/// Records whose property is less than `value`; records without a value never match.
public func < <R: Record, V: ValueConvertible>(keyPath: KeyPath<R, V>, value: V) -> Condition { Key(keyPath) < value }
/// Records whose property is at most `value`; records without a value never match.
public func <= <R: Record, V: ValueConvertible>(keyPath: KeyPath<R, V>, value: V) -> Condition { Key(keyPath) <= value }
/// Records whose property is greater than `value`; records without a value never match.
public func > <R: Record, V: ValueConvertible>(keyPath: KeyPath<R, V>, value: V) -> Condition { Key(keyPath) > value }
/// Records whose property is at least `value`; records without a value never match.
public func >= <R: Record, V: ValueConvertible>(keyPath: KeyPath<R, V>, value: V) -> Condition { Key(keyPath) >= value }

/// Records whose to-one relationship points at `id` (`\Article.category == swift`), or at nothing
/// when `id` is nil.
public func == <R: Record>(keyPath: KeyPath<R, ObjectID?>, id: ObjectID?) -> Condition {
    guard let id else { return Key(keyPath) == Value.null }
    return Key(keyPath) == id
}
/// Records whose to-one relationship does not point at `id` (records pointing at nothing
/// included), or points at something when `id` is nil.
public func != <R: Record>(keyPath: KeyPath<R, ObjectID?>, id: ObjectID?) -> Condition {
    guard let id else { return Key(keyPath) != Value.null }
    return !(Key(keyPath) == id)
}

extension FetchRequest {
    /// A request for the objects of record type `R`'s entity (``init(_:where:sortedBy:limit:offset:)``
    /// naming the entity by its type): for a live query or a count of records.
    ///
    /// For example:
    /// ```swift
    /// let unread = FetchRequest(Article.self, where: \Article.isRead == false,
    ///                           sortedBy: [.descending(\Article.createdAt)], limit: 20)
    /// ```
    public init<R: Record>(
        _ type: R.Type, where condition: Condition = .always, sortedBy sort: [SortKey] = [], limit: Int? = nil,
        offset: Int = 0
    ) {
        self.init(R.entityName, where: condition, sortedBy: sort, limit: limit, offset: offset)
    }
}

// A decimal is stored as its exact text, and SQLite orders text by its bytes ("10" < "9.5"): an
// ordering of a decimal property would look numeric and be wrong. These overloads, more specific
// than the generic ones, make it a compile error; compare and sort a decimal in Swift, or keep a
// `Double` beside it for queries.

/// Unavailable: a decimal is stored as text, which does not order as numbers.
@available(*, unavailable, message: "a Decimal is stored as text, which SQLite orders by its bytes, not as numbers")
public func < <R: Record>(keyPath: KeyPath<R, Decimal>, value: Decimal) -> Condition { Key(keyPath) < value }
/// Unavailable: a decimal is stored as text, which does not order as numbers.
@available(*, unavailable, message: "a Decimal is stored as text, which SQLite orders by its bytes, not as numbers")
public func <= <R: Record>(keyPath: KeyPath<R, Decimal>, value: Decimal) -> Condition { Key(keyPath) <= value }
/// Unavailable: a decimal is stored as text, which does not order as numbers.
@available(*, unavailable, message: "a Decimal is stored as text, which SQLite orders by its bytes, not as numbers")
public func > <R: Record>(keyPath: KeyPath<R, Decimal>, value: Decimal) -> Condition { Key(keyPath) > value }
/// Unavailable: a decimal is stored as text, which does not order as numbers.
@available(*, unavailable, message: "a Decimal is stored as text, which SQLite orders by its bytes, not as numbers")
public func >= <R: Record>(keyPath: KeyPath<R, Decimal>, value: Decimal) -> Condition { Key(keyPath) >= value }

extension SortKey {
    /// Unavailable: a decimal is stored as text, which does not sort as numbers.
    @available(*, unavailable, message: "a Decimal is stored as text, which SQLite sorts by its bytes, not as numbers")
    public static func ascending<R: Record>(_ keyPath: KeyPath<R, Decimal>) -> SortKey { Key(keyPath).ascending }
    /// Unavailable: a decimal is stored as text, which does not sort as numbers.
    @available(*, unavailable, message: "a Decimal is stored as text, which SQLite sorts by its bytes, not as numbers")
    public static func descending<R: Record>(_ keyPath: KeyPath<R, Decimal>) -> SortKey { Key(keyPath).descending }
}
