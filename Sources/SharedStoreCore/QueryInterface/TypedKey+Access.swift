import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// A record type's to-many relationship, by a name the compiler checks: declared once as a
/// static property of the type, used in its schema and in conditions.
///
/// For example:
/// ```swift
/// struct Category: Record {
///     static let articles = ToMany<Category, Article>("articles")
///     static let schema = RecordSchema<Category>([.toMany(articles, inverse: \.category)])
///     …
/// }
/// let busy = try context.fetch(Category.self, where: Category.articles.count > 0)
/// ```
public struct ToMany<Source: Record, Destination: Record>: Sendable, Hashable {
    /// The relationship's name in `Source`'s entity.
    public let name: String
    /// The to-many relationship `name` of `Source`, to `Destination`.
    public init(_ name: String) { self.name = name }

    /// The relationship as a key (``Key/any(_:)``, ``Key/count``).
    public var key: Key { Key(name) }
    /// Some object of the relationship matches `condition` (over `Destination`).
    public func any(_ condition: Condition) -> Condition { key.any(condition) }
    /// Every object of the relationship matches (true when it holds none).
    public func all(_ condition: Condition) -> Condition { key.all(condition) }
    /// No object of the relationship matches.
    public func none(_ condition: Condition) -> Condition { key.none(condition) }
    /// How many objects the relationship holds: `Category.articles.count > 3`.
    public var count: RelationshipCount { key.count }
}

extension RecordSchema.Rule {
    /// The to-many relationship `relationship`, the inverse of its destination's to-one `inverse`.
    public static func toMany<D: Record>(
        _ relationship: ToMany<R, D>, inverse: KeyPath<D, ObjectID?>, deleteRule: DeleteRule = .nullify
    ) -> Self {
        toMany(relationship.name, D.self, inverse: inverse, deleteRule: deleteRule)
    }
}

extension Snapshot {
    /// The value of the attribute a record's property holds (`snapshot[\Article.title]`), as
    /// ``subscript(_:)`` reads it by name. A key path of a record of another entity reads that name
    /// in this snapshot (`.null` when it has none): use the snapshot's own record type.
    public subscript<R: Record, V>(keyPath: KeyPath<R, V>) -> Value { self[R.storedName(keyPath)] }
}

extension ObjectDraft {
    /// The value of the attribute a record's property holds (`draft[\Article.title]`). A key path
    /// of a record of another entity reads that name in this draft: use the hook's own record type.
    public subscript<R: Record, V>(keyPath: KeyPath<R, V>) -> Value { self[R.storedName(keyPath)] }

    /// Sets the attribute a record's property holds to `value`, of the property's own type.
    ///
    /// - Throws: like ``set(_:_:)-(String,Value)``.
    public mutating func set<R: Record, V: ValueConvertible>(_ keyPath: KeyPath<R, V>, _ value: V) throws {
        guard R.entityName == entity else {
            throw StoreError(
                .invalidArgument,
                "\(R.self)'s key path set on a draft of \(entity): a hook sets its own entity's values")
        }
        try set(R.storedName(keyPath), value.storedValue)
    }
}

extension ObjectContext {
    /// ``aggregate(_:_:where:groupedBy:)-(String,_,_,_)`` over the objects of record type `R`,
    /// grouped by typed keys: `aggregate(Article.self, [.count], groupedBy: [Key(\Article.category,
    /// \Category.name)])`.
    ///
    /// - Throws: like ``aggregate(_:_:where:groupedBy:)-(String,_,_,_)``.
    public func aggregate<R: Record>(
        _ type: R.Type, _ aggregates: [Aggregate], where condition: Condition = .always, groupedBy: [Key] = []
    ) throws -> [AggregateRow] {
        try aggregate(R.entityName, aggregates, where: condition, groupedBy: groupedBy.map(\.path))
    }
}
