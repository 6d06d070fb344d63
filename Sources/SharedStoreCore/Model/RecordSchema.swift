import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// What a record type says about its entity beyond its properties, for a types-first model
/// (``Model/init(version:records:)``): validation rules, relationships, uniqueness, indexes,
/// kept counts, derived attributes, renames and hooks, each naming its property by a typed key.
///
/// The entity's attributes, their types and whether they are optional come from the type's
/// properties (see <doc:TypesFirstModels> for the mapping); an `ObjectID?` property is a to-one
/// relationship, declared here with its destination.
///
/// For example:
/// ```swift
/// struct Bookmark: Record {
///     static let entityName = "Bookmark"
///     static let schema = RecordSchema<Bookmark>([
///         .attribute(\.title, minLength: 1, maxLength: 500, singleLine: true),
///         .attribute(\.visits, default: 0),
///         .toOne(\.folder, Folder.self, inverse: "bookmarks"),
///         .unique(\.url), .index(\.createdAt),
///         .keptCount("unvisited", where: \Bookmark.visits == 0),
///     ])
///     var id: ObjectID?
///     var title: String
///     var url: URL
///     var visits: Int
///     var createdAt: Date
///     var folder: ObjectID?
/// }
/// ```
public struct RecordSchema<R: Record>: Sendable {
    /// One declaration about the entity; its key paths are resolved to stored names when made.
    public struct Rule: Sendable {
        enum Kind: Sendable {
            case attribute(String, AttributeRules)
            case derived(String, Derivation)
            case relationship(Relationship)
            case unique([String])
            case index(Index)
            case keptCount(KeptCount)
            /// A key path that names no stored property: the model refuses it.
            case failed(StoreError)
        }
        let kind: Kind
    }

    /// The declarations, in order (to-many relationships follow the to-ones in this order).
    let rules: [Rule]
    /// The entity's name in the model version before (a migration renames its table).
    let renamedFrom: String?
    /// The entity's hooks and rules, run by every process that opens a store with the model.
    let hooks: EntityHooks?

    /// A record type's declarations: `rules`, a previous name of the entity, and its hooks.
    public init(_ rules: [Rule] = [], renamedFrom: String? = nil, hooks: EntityHooks? = nil) {
        self.rules = rules
        self.renamedFrom = renamedFrom
        self.hooks = hooks
    }
}

/// The validation and history settings of one attribute (``Attribute``'s, without name and type).
struct AttributeRules: Sendable {
    var defaultValue: Value = .null
    var minLength: Int?, maxLength: Int?, pattern: String?
    var minValue: Double?, maxValue: Double?
    var singleLine = false, preservedInHistory = false
    var renamedFrom: String?
}

extension RecordSchema.Rule {
    /// A name for `keyPath`, or the rule that refuses the model.
    private static func named(_ keyPath: PartialKeyPath<R>, _ make: (String) -> Kind) -> Self {
        switch R.resolvedName(keyPath) {
        case .success(let name): return Self(kind: make(name))
        case .failure(let e): return Self(kind: .failed(e))
        }
    }

    /// The rules of the attribute `keyPath` holds, as ``Attribute``'s initializer takes them; its
    /// type and whether it is optional come from the property.
    public static func attribute<V: ValueConvertible>(
        _ keyPath: KeyPath<R, V>, default defaultValue: V? = nil, minLength: Int? = nil, maxLength: Int? = nil,
        pattern: String? = nil, minValue: Double? = nil, maxValue: Double? = nil, singleLine: Bool = false,
        preservedInHistory: Bool = false, renamedFrom: String? = nil
    ) -> Self {
        let rules = AttributeRules(
            defaultValue: defaultValue?.storedValue ?? .null, minLength: minLength, maxLength: maxLength,
            pattern: pattern, minValue: minValue, maxValue: maxValue, singleLine: singleLine,
            preservedInHistory: preservedInHistory, renamedFrom: renamedFrom)
        return named(keyPath) { .attribute($0, rules) }
    }

    /// The history and migration settings of an attribute of any type (a `[String]` kept as JSON, a
    /// `Codable` value, an enum): whether a delete keeps its value in history, and its name in the
    /// previous model version.
    public static func attribute<V>(
        _ keyPath: KeyPath<R, V>, preservedInHistory: Bool = false, renamedFrom: String? = nil
    ) -> Self {
        let rules = AttributeRules(preservedInHistory: preservedInHistory, renamedFrom: renamedFrom)
        return named(keyPath) { .attribute($0, rules) }
    }

    /// The attribute `keyPath` holds is derived (``Attribute/derived(_:_:_:)``): every save
    /// computes it, none sets it.
    public static func derived<V>(_ keyPath: KeyPath<R, V>, _ derivation: Derivation) -> Self {
        named(keyPath) { .derived($0, derivation) }
    }

    /// The attribute `keyPath` holds is the text of `source` lowercased without diacritics
    /// (``Derivation/canonical(_:)``).
    public static func canonical(_ keyPath: KeyPath<R, String?>, of source: KeyPath<R, String>) -> Self {
        switch R.resolvedName(source) {
        case .success(let name): return derived(keyPath, .canonical(name))
        case .failure(let e): return Self(kind: .failed(e))
        }
    }

    /// The `ObjectID?` property `keyPath` is a to-one relationship to `destination`, whose to-many
    /// relationship `inverse` points back.
    public static func toOne<D: Record>(
        _ keyPath: KeyPath<R, ObjectID?>, _ destination: D.Type, inverse: String, deleteRule: DeleteRule = .nullify
    ) -> Self {
        named(keyPath) { .relationship(.toOne($0, D.entityName, inverse: inverse, deleteRule: deleteRule)) }
    }

    /// A to-many relationship `name` (it has no property: fetch its objects by their to-one),
    /// the inverse of `destination`'s to-one `inverse`.
    public static func toMany<D: Record>(
        _ name: String, _ destination: D.Type, inverse: KeyPath<D, ObjectID?>, deleteRule: DeleteRule = .nullify
    ) -> Self {
        switch D.resolvedName(inverse) {
        case .success(let back):
            return Self(kind: .relationship(.toMany(name, D.entityName, inverse: back, deleteRule: deleteRule)))
        case .failure(let e): return Self(kind: .failed(e))
        }
    }

    /// A many-to-many relationship `name` to `destination`, whose many-to-many `inverse` points
    /// back (linked with ``ObjectContext/relate(_:_:to:)``).
    public static func manyToMany<D: Record>(
        _ name: String, _ destination: D.Type, inverse: String, deleteRule: DeleteRule = .nullify
    ) -> Self {
        Self(kind: .relationship(.toMany(name, D.entityName, inverse: inverse, deleteRule: deleteRule)))
    }

    /// No two objects share the values of `keyPaths` (one constraint, single or compound).
    public static func unique(_ keyPaths: PartialKeyPath<R>...) -> Self {
        names(keyPaths) { .unique($0) }
    }

    /// An index on `keyPaths`, each ascending.
    public static func index(_ keyPaths: PartialKeyPath<R>...) -> Self {
        names(keyPaths) { .index(Index($0.map { SortKey($0) })) }
    }

    /// An index on sort keys (``SortKey/ascending(_:)``, ``SortKey/descending(_:)``).
    public static func index(_ keys: [SortKey]) -> Self { Self(kind: .index(Index(keys))) }

    /// A count every save keeps (``KeptCount``), of the objects matching `condition`.
    public static func keptCount(_ name: String, where condition: Condition = .always) -> Self {
        Self(kind: .keptCount(KeptCount(name, where: condition)))
    }

    private static func names(_ keyPaths: [PartialKeyPath<R>], _ make: ([String]) -> Kind) -> Self {
        var names: [String] = []
        for k in keyPaths {
            switch R.resolvedName(k) {
            case .success(let name): names.append(name)
            case .failure(let e): return Self(kind: .failed(e))
            }
        }
        return Self(kind: make(names))
    }
}
