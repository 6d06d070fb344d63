import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// The type of an attribute, mapped to a SQLite column.
///
/// `url`, `decimal` and `json` hold their values as ``Value/string(_:)``: an absolute URL, a
/// decimal number's exact text (`Decimal(string:)` reads it back; conditions compare the text),
/// and the JSON of a Codable value (a record's property of any `Codable` type). Each is checked
/// on save.
public enum AttributeType: String, Sendable, Hashable, Codable {
    /// `string` (TEXT), `integer` (a 64-bit INTEGER), `double` (REAL; an integer value is widened),
    /// `bool` (0 or 1), `date` (REAL seconds since 1970), `data` (BLOB), `uuid` (lowercased TEXT),
    /// `url` (an absolute URL), `decimal` (a number's exact text) and `json` (JSON text).
    case string, integer, double, bool, date, data, uuid, url, decimal, json
}

/// What happens to related objects when an object is deleted (Core Data's delete rules).
public enum DeleteRule: String, Sendable, Hashable, Codable {
    /// The related objects' inverse is set to nil.
    case nullify
    /// The related objects are deleted too.
    case cascade
    /// The delete fails while any related object exists.
    case deny
}

/// How a derived attribute is computed (Core Data's derived attributes): a stored column that
/// every save keeps up to date in its own transaction — saves of any process, batch operations
/// included. A save cannot set one.
public enum Derivation: Sendable, Hashable {
    /// How many objects a to-many relationship (with a to-one inverse) holds
    /// (`Category.articleCount`).
    case count(String)
    /// The sum of an attribute of the objects of a to-many relationship (with a to-one inverse).
    case sum(String, of: String)
    /// An attribute of the object a to-one relationship points at (`Article.categoryName`), nil
    /// without one.
    case related(String, String)
    /// The time of the save that last wrote the object (`updatedAt`).
    case now
    /// A string attribute lowercased with its diacritics removed (`Article.searchTitle`), for
    /// searching and sorting with an index.
    case canonical(String)

    /// A fixed text of the derivation, part of the stored schema.
    var text: String {
        switch self {
        case .count(let r): return "count(\(r))"
        case .sum(let r, let a): return "sum(\(r).\(a))"
        case .related(let r, let a): return "\(r).\(a)"
        case .now: return "now()"
        case .canonical(let a): return "canonical(\(a))"
        }
    }
}

/// An attribute of an entity, with its validation rules.
public struct Attribute: Sendable, Hashable {
    /// The attribute's name: a plain ASCII identifier of at most 64 characters, unique in its entity
    /// and none of `Z_PK`, `Z_OPT`, `id` or `objectID` (``Model/init(version:_:)`` checks it). It is
    /// the column's name.
    public var name: String
    /// What values the attribute holds; a save of a value of another type fails with `.validation`.
    public var type: AttributeType
    /// Whether the attribute may hold ``Value/null``; a save that leaves a required attribute nil
    /// (and it has no ``defaultValue``) fails with `.validation` ("… is required").
    public var isOptional: Bool
    /// The value an insert gets when it does not set the attribute (``Value/null``: none). A
    /// migration that adds the attribute gives it to the existing objects.
    public var defaultValue: Value
    /// The least number of characters a string value may have (checked on save).
    public var minLength: Int?
    /// The most characters a string value may have (checked on save).
    public var maxLength: Int?
    /// A regular expression the whole string must match.
    public var pattern: String?
    /// The smallest number an integer or double value may be (checked on save).
    public var minValue: Double?
    /// The largest number an integer or double value may be (checked on save).
    public var maxValue: Double?
    /// Keep the value in the history tombstone when the object is deleted.
    public var preservesValueInHistoryOnDeletion: Bool
    /// Reject strings holding control characters (C0, DEL, C1) other than a tab: for single-line
    /// text such as a title or a name, which must not carry a newline or a terminal escape.
    public var isSingleLine: Bool
    /// The name this attribute had in the model version before (Core Data's renaming
    /// identifier): a migration renames the column and history shows the new name.
    public var renamedFrom: String?
    /// Set for a derived attribute (``derived(_:_:_:)``): computed by every save, never set by one.
    public var derivation: Derivation?

    /// A derived attribute: stored, fetched, sorted and indexed like any other, computed by the
    /// save. `count` and `sum` are integers or doubles, `now` a date, `canonical` a string,
    /// `related` the type of the attribute it copies.
    public static func derived(_ name: String, _ type: AttributeType, _ derivation: Derivation) -> Attribute {
        var a = Attribute(name, type, optional: true)
        a.derivation = derivation
        return a
    }

    /// Whether the attribute is derived (has a ``derivation``): the save computes it.
    public var isDerived: Bool { derivation != nil }

    /// What a `canonical` derived attribute holds for `text`: lowercased, diacritics removed
    /// (to search it with the same folding).
    public static func canonical(_ text: String) -> String { DerivationMap.canonical(text) }

    /// An attribute named `name` holding values of `type`, with the rules a save checks.
    ///
    /// For example:
    /// ```swift
    /// Attribute("title", .string, minLength: 1, maxLength: 500, singleLine: true, preservedInHistory: true)
    /// Attribute("isRead", .bool, default: false)
    /// Attribute("label", .string, renamedFrom: "name")      // version 2 renames `name`
    /// ```
    ///
    /// - Parameters:
    ///   - name: the attribute's name (``name``).
    ///   - type: the type of its values.
    ///   - optional: whether nil is allowed (required by default).
    ///   - defaultValue: what an insert that leaves the attribute out gets.
    ///   - minLength: the least number of characters of a string.
    ///   - maxLength: the most characters of a string.
    ///   - pattern: a regular expression (NSRegularExpression syntax) the whole string must match.
    ///   - minValue: the smallest number allowed.
    ///   - maxValue: the largest number allowed.
    ///   - singleLine: refuse control characters other than a tab (``isSingleLine``).
    ///   - preservedInHistory: keep the value in the delete's history record
    ///     (``preservesValueInHistoryOnDeletion``).
    ///   - renamedFrom: the name in the previous model version (``renamedFrom``).
    ///
    /// Nothing is checked here: ``Model/init(version:_:)`` checks the name, the pattern and that the
    /// default has the attribute's type.
    public init(
        _ name: String, _ type: AttributeType, optional: Bool = false, default defaultValue: Value = .null,
        minLength: Int? = nil, maxLength: Int? = nil, pattern: String? = nil,
        minValue: Double? = nil, maxValue: Double? = nil, singleLine: Bool = false, preservedInHistory: Bool = false,
        renamedFrom: String? = nil
    ) {
        self.renamedFrom = renamedFrom
        self.isSingleLine = singleLine
        self.name = name
        self.type = type
        self.isOptional = optional
        self.defaultValue = defaultValue
        self.minLength = minLength
        self.maxLength = maxLength
        self.pattern = pattern
        self.minValue = minValue
        self.maxValue = maxValue
        self.preservesValueInHistoryOnDeletion = preservedInHistory
    }
}

/// A relationship: to-one (stored as a column) or to-many (the inverse of a to-one).
public struct Relationship: Sendable, Hashable {
    /// The relationship's name, unique among the entity's properties. A to-one relationship is a
    /// column of that name holding the destination's primary key.
    public var name: String
    /// The entity the relationship points at.
    public var destination: String
    /// The relationship of ``destination`` that points back; every relationship has one.
    public var inverse: String
    /// Whether it holds many objects: the inverse of a to-one (read through the to-one's column) or,
    /// when the inverse is to-many too, a many-to-many relationship kept in a join table.
    public var isToMany: Bool
    /// What deleting an object of this entity does to the objects this relationship holds.
    public var deleteRule: DeleteRule

    /// A to-one relationship to `destination`, whose relationship `inverse` must be to-many (one-to-one
    /// relationships are not supported).
    ///
    /// For example:
    /// ```swift
    /// Relationship.toOne("category", "Category", inverse: "articles")
    /// ```
    public static func toOne(_ name: String, _ destination: String, inverse: String, deleteRule: DeleteRule = .nullify)
        -> Relationship
    {
        Relationship(name: name, destination: destination, inverse: inverse, isToMany: false, deleteRule: deleteRule)
    }

    /// A to-many relationship to `destination`: the inverse of a to-one relationship, or, when
    /// `inverse` is to-many too, a many-to-many relationship (linked with
    /// ``ObjectContext/relate(_:_:to:)``).
    ///
    /// For example:
    /// ```swift
    /// Relationship.toMany("articles", "Article", inverse: "category", deleteRule: .cascade)
    /// ```
    public static func toMany(_ name: String, _ destination: String, inverse: String, deleteRule: DeleteRule = .nullify)
        -> Relationship
    {
        Relationship(name: name, destination: destination, inverse: inverse, isToMany: true, deleteRule: deleteRule)
    }
}

/// An index of an entity (Core Data's fetch index): attributes or to-one relationships in order,
/// each ascending or descending, so that fetches that filter and sort on them read the index,
/// not the table.
public struct Index: Sendable, Hashable {
    /// One column of an index: a property and its order.
    public struct Part: Sendable, Hashable {
        /// An attribute or to-one relationship of the entity.
        public let property: String
        /// Whether the index holds the property in ascending order.
        public let ascending: Bool
    }

    /// The indexed properties, in order: an index serves a condition on a prefix of them.
    public let parts: [Part]

    /// An index on `properties`, each ascending.
    public init(_ properties: String...) { parts = properties.map { Part(property: $0, ascending: true) } }

    /// An index on `keys` (``Key/ascending`` or ``Key/descending``).
    public init(_ keys: [SortKey]) { parts = keys.map { Part(property: $0.path, ascending: $0.ascending) } }
}

/// A count of an entity's objects that every save keeps up to date in the save's transaction, so
/// that reading it costs one row whatever the size of the store: ``ObjectContext/count(_:)`` of a
/// request for the entity with the same condition (and no window) reads it instead of counting.
///
/// The condition may read only the entity's own attributes (a count never depends on another
/// object). Every writer of the store keeps it: it is part of the model's identity, so a process
/// with a model lacking it cannot open the store. `storectl verify` compares it with a real count.
public struct KeptCount: Sendable, Hashable {
    /// The count's name: a plain identifier, unique among the entity's kept counts.
    public let name: String
    /// Which objects it counts (``Condition/always``: all of them).
    public let condition: Condition

    /// A count named `name` of the objects matching `condition` (all of them by default).
    public init(_ name: String, where condition: Condition = .always) {
        self.name = name
        self.condition = condition
    }
}

/// An entity: attributes, relationships, uniqueness constraints (each a list of attribute names),
/// indexes and kept counts.
public struct Entity: Sendable, Hashable {
    /// The entity's name: a plain ASCII identifier that does not start with `ss_` or `sqlite`. It is
    /// the table's name.
    public var name: String
    /// The entity's attributes, in the order history numbers them.
    public var attributes: [Attribute]
    /// The entity's relationships; each names its inverse in the destination entity.
    public var relationships: [Relationship]
    /// Properties (attributes or to-one relationships) whose values no two objects may share: each
    /// inner list is one constraint, single (`[["name"]]`) or compound (`[["first", "last"]]`). A save
    /// that would break one is resolved by the context's ``MergePolicy`` (`.uniqueness` with `.error`).
    public var uniquenessConstraints: [[String]]
    /// Indexes that fetches use (a uniqueness constraint and a to-one relationship have one
    /// already). Created with the store and, when a model adds one, at the next open.
    public var indexes: [Index]
    /// Counts every save keeps up to date (``KeptCount``).
    public var keptCounts: [KeptCount]
    /// The name this entity had in the model version before (a migration renames its table).
    public var renamedFrom: String?

    /// An entity named `name` with its properties and what the store keeps for it.
    ///
    /// For example:
    /// ```swift
    /// Entity("Category", attributes: [Attribute("name", .string)],
    ///        relationships: [.toMany("articles", "Article", inverse: "category")],
    ///        uniquenessConstraints: [["name"]])
    /// ```
    ///
    /// The entity is checked with its model (``Model/init(version:_:)``), not here.
    public init(
        _ name: String, attributes: [Attribute], relationships: [Relationship] = [],
        uniquenessConstraints: [[String]] = [], indexes: [Index] = [], keptCounts: [KeptCount] = [],
        renamedFrom: String? = nil
    ) {
        self.renamedFrom = renamedFrom
        self.keptCounts = keptCounts
        self.name = name
        self.attributes = attributes
        self.relationships = relationships
        self.uniquenessConstraints = uniquenessConstraints
        self.indexes = indexes
    }

    /// The attribute named `name`, or nil.
    public func attribute(named name: String) -> Attribute? { attributes.first { $0.name == name } }
    /// The relationship named `name`, or nil.
    public func relationship(named name: String) -> Relationship? { relationships.first { $0.name == name } }

    var toOneRelationships: [Relationship] { relationships.filter { !$0.isToMany } }
    var toManyRelationships: [Relationship] { relationships.filter(\.isToMany) }

    /// Names history refers to by index: attributes, to-one, then to-many relationships (a
    /// to-many relationship shows as updated when a many-to-many link is made or broken).
    var historyPropertyNames: [String] { storedPropertyNames + toManyRelationships.map(\.name) }

    /// Checks that every key of `values` is an attribute of this entity.
    ///
    /// - Throws: `.unknownProperty` naming the first that is not (and `object`, when given).
    func checkAttributes(_ values: [String: Value], object: String? = nil) throws {
        for name in values.keys {
            guard let a = attribute(named: name) else {
                throw StoreError(
                    .unknownProperty, (object.map { "\($0): " } ?? "") + "\(self.name) has no attribute '\(name)'")
            }
            if let d = a.derivation {
                throw StoreError.validation(
                    (object.map { "\($0): " } ?? "") + "\(self.name).\(name) is derived (\(d.text)): the save computes "
                        + "it; it cannot be set", object: object ?? self.name, property: name, rule: .derived)
            }
        }
    }

    /// The derived attributes (in declaration order).
    var derivedAttributes: [Attribute] { attributes.filter(\.isDerived) }

    /// The index history uses for property `name` (a precondition: the entity has it).
    func historyIndex(of name: String) -> Int {
        guard let i = historyPropertyNames.firstIndex(of: name) else {
            preconditionFailure("\(self.name) has no property '\(name)' to record in history")
        }
        return i
    }

    /// Property names in a fixed order: attributes, then to-one relationships. History refers to
    /// properties by their index in this list.
    var storedPropertyNames: [String] { attributes.map(\.name) + toOneRelationships.map(\.name) }
}

/// A managed object model: the entities a store holds. Checked for consistency on creation.
public struct Model: Sendable, Hashable {
    /// The model's entities, in the order they were given.
    public let entities: [Entity]
    let entityIndex: [String: Int]
    /// The model's version (Core Data's model versions): a store keeps the version and schema
    /// of the model that made or last migrated it; a model with a higher version migrates it
    /// (``MigrationPlan``), a model with a lower one cannot open it (`.modelNewer`).
    public let version: Int

    /// - Throws: ``StoreError`` with code `.invalidModel` naming the first inconsistency.
    public init(version: Int = 1, _ entities: [Entity]) throws {
        guard version >= 1 else { throw StoreError(.invalidModel, "model version \(version): versions start at 1") }
        self.version = version
        self.entities = entities
        var index: [String: Int] = [:]
        for (i, e) in entities.enumerated() { index[e.name] = i }
        self.entityIndex = index
        try validate()
    }

    /// The entity named `name`, or nil.
    public func entity(named name: String) -> Entity? { entityIndex[name].map { entities[$0] } }

    /// The index of an entity of this model (a precondition: the entity comes from it).
    func index(of e: Entity) -> Int {
        guard let i = entityIndex[e.name] else { preconditionFailure("entity \(e.name) is not in this model") }
        return i
    }

    func entity(_ name: String) throws -> Entity {
        guard let e = entity(named: name) else { throw StoreError(.unknownEntity, "unknown entity '\(name)'") }
        return e
    }

    /// Names no property may take: the names records and snapshots give the object itself, and
    /// SharedStore's own columns (``StoreColumn``) in any case — SQLite compares column names
    /// without case, so a property `z_pk` would be the primary key's column.
    private static let reserved: Set<String> = ["id", "objectID"]
    private static let reservedColumns = Set(StoreColumn.all.map { $0.lowercased() })

    /// Whether `name` is one of ``reserved`` or, in any case, a column of SharedStore's own.
    private static func isReserved(_ name: String) -> Bool {
        reserved.contains(name) || reservedColumns.contains(name.lowercased())
    }

    private func validate() throws {
        func fail(_ message: String) -> StoreError { StoreError(.invalidModel, message) }
        guard !entities.isEmpty else { throw fail("the model has no entities") }
        // SQLite's table and column names ignore case: `Note` and `note` would be one table.
        guard Set(entities.map { $0.name.lowercased() }).count == entities.count else {
            throw fail("two entities share a name (names are compared whatever their case)")
        }
        for e in entities {
            let lower = e.name.lowercased()
            guard Self.isIdentifier(e.name), !lower.hasPrefix("ss_"), !lower.hasPrefix("sqlite") else {
                throw fail("entity name '\(e.name)' is not a plain identifier")
            }
            var names = Set<String>()
            for n in e.attributes.map(\.name) + e.relationships.map(\.name) {
                guard Self.isIdentifier(n), !Self.isReserved(n) else {
                    throw fail("\(e.name).\(n) is not an allowed property name")
                }
                guard names.insert(n.lowercased()).inserted else {
                    throw fail("\(e.name).\(n) is declared twice (names are compared whatever their case)")
                }
            }
            for a in e.attributes {
                if let p = a.pattern {
                    guard (try? NSRegularExpression(pattern: p)) != nil else {
                        throw fail("\(e.name).\(a.name): invalid pattern '\(p)'")
                    }
                }
                if !a.defaultValue.isNull, !Self.matches(a.defaultValue, a.type) {
                    throw fail("\(e.name).\(a.name): default value \(a.defaultValue) is not of type \(a.type.rawValue)")
                }
            }
            for r in e.relationships {
                guard let d = entity(named: r.destination) else {
                    throw fail("\(e.name).\(r.name): unknown destination '\(r.destination)'")
                }
                guard let inv = d.relationship(named: r.inverse), inv.destination == e.name, inv.inverse == r.name
                else {
                    throw fail(
                        "\(e.name).\(r.name): inverse '\(r.destination).\(r.inverse)' is missing or does not point back"
                    )
                }
                if !r.isToMany && !inv.isToMany {
                    throw fail(
                        "\(e.name).\(r.name): one-to-one relationships are not supported; use a to-one with a "
                            + "to-many inverse"
                    )
                }
            }
            try validateIndexes(e)
            try validateKeptCounts(e)
            for a in e.attributes { if let d = a.derivation { try validate(d, of: a, in: e) } }
        }
    }

    /// Indexes and uniqueness constraints name attributes or to-one relationships of `e`.
    private func validateIndexes(_ e: Entity) throws {
        func fail(_ message: String) -> StoreError { StoreError(.invalidModel, message) }
        for index in e.indexes {
            guard !index.parts.isEmpty else { throw fail("\(e.name): empty index") }
            for part in index.parts
            where e.attribute(named: part.property) == nil
                && !(e.relationship(named: part.property).map { !$0.isToMany } ?? false)
            {
                throw fail("\(e.name): index names unknown property '\(part.property)'")
            }
        }
        for c in e.uniquenessConstraints {
            guard !c.isEmpty else { throw fail("\(e.name): empty uniqueness constraint") }
            for n in c
            where e.attribute(named: n) == nil && !(e.relationship(named: n).map { !$0.isToMany } ?? false) {
                throw fail("\(e.name): uniqueness constraint names unknown property '\(n)'")
            }
        }
    }

    /// A derivation names what exists, of a type the attribute can hold.
    private func validate(_ d: Derivation, of a: Attribute, in e: Entity) throws {
        func fail(_ why: String) -> StoreError { StoreError(.invalidModel, "\(e.name).\(a.name) (\(d.text)): \(why)") }
        func aggregated(_ r: String) throws -> Entity {
            guard let rel = e.relationship(named: r), rel.isToMany, let dest = entity(named: rel.destination),
                let inv = dest.relationship(named: rel.inverse), !inv.isToMany
            else { throw fail("'\(r)' is not a to-many relationship with a to-one inverse") }
            return dest
        }
        switch d {
        case .count(let r):
            _ = try aggregated(r)
            guard a.type == .integer else { throw fail("a count is an integer") }
        case .sum(let r, let source):
            let dest = try aggregated(r)
            guard let s = dest.attribute(named: source), s.type == .integer || s.type == .double, !s.isDerived else {
                throw fail("\(dest.name).\(source) is not a stored number")
            }
            guard a.type == s.type || a.type == .double else { throw fail("a sum has its attribute's type") }
        case .related(let r, let source):
            guard let rel = e.relationship(named: r), !rel.isToMany, let dest = entity(named: rel.destination),
                let s = dest.attribute(named: source), !s.isDerived
            else { throw fail("'\(r).\(source)' is not a stored attribute through a to-one relationship") }
            guard a.type == s.type else { throw fail("it copies a \(s.type.rawValue)") }
        case .now:
            guard a.type == .date else { throw fail("the save's time is a date") }
        case .canonical(let source):
            guard let s = e.attribute(named: source), s.type == .string, !s.isDerived, a.type == .string else {
                throw fail("canonical text is made from a stored string attribute into a string")
            }
        }
    }

    private func validateKeptCounts(_ e: Entity) throws {
        var names = Set<String>()
        for k in e.keptCounts {
            guard Self.isIdentifier(k.name), names.insert(k.name).inserted else {
                throw StoreError(
                    .invalidModel,
                    "\(e.name): kept count name '\(k.name)' is not a plain identifier or is declared twice")
            }
            for path in k.condition.keyPaths where e.attribute(named: path) == nil {
                throw StoreError(
                    .invalidModel,
                    "\(e.name).\(k.name): a kept count may read only attributes of \(e.name), not '\(path)'")
            }
            // Counts, sums and copies change without their object being written: a kept count
            // could not follow them.
            for path in k.condition.keyPaths {
                switch e.attribute(named: path)?.derivation {
                case .count?, .sum?, .related?:
                    throw StoreError(
                        .invalidModel,
                        "\(e.name).\(k.name): a kept count cannot read \(path), a count, sum or copy of other objects")
                default: break
                }
            }
        }
    }

    /// The join table of a many-to-many relationship: one table per pair, owned by the side
    /// whose `Entity.relationship` sorts first; column `a` holds the owner's keys, `b` the other's.
    func joinTable(_ e: Entity, _ r: Relationship) -> JoinTable? {
        guard r.isToMany, let d = entity(named: r.destination), let inv = d.relationship(named: r.inverse), inv.isToMany
        else { return nil }
        let mine = "\(e.name).\(r.name)"
        let theirs = "\(d.name).\(r.inverse)"
        let owner = mine <= theirs
        let name = owner ? "ss_m2m_\(e.name)_\(r.name)" : "ss_m2m_\(d.name)_\(r.inverse)"
        return JoinTable(name: name, mine: owner ? "a" : "b", theirs: owner ? "b" : "a", isOwner: owner)
    }

    static func isIdentifier(_ s: String) -> Bool {
        guard let first = s.unicodeScalars.first,
            first == "_" || (first.isASCII && CharacterSet.letters.contains(first))
        else { return false }
        return s.unicodeScalars.allSatisfy { $0.isASCII && ($0 == "_" || CharacterSet.alphanumerics.contains($0)) }
            && s.count <= 64
    }

    static func matches(_ v: Value, _ t: AttributeType) -> Bool {
        switch (v, t) {
        case (.string, .string), (.integer, .integer), (.double, .double), (.integer, .double), (.bool, .bool),
            (.date, .date), (.data, .data), (.uuid, .uuid), (.string, .url), (.string, .decimal), (.string, .json):
            return true
        default: return false
        }
    }

    /// The description stores of format 2 kept (declaration order, one line per property): a
    /// store of that format whose description is this model's is brought to format 3 on open.
    var legacySchemaDescription: String {
        var lines: [String] = []
        for e in entities {
            lines.append("entity \(e.name)")
            for a in e.attributes {
                lines.append("  attribute \(e.name).\(a.name) \(a.type.rawValue)\(a.isOptional ? " optional" : "")")
            }
            for r in e.relationships {
                lines.append(
                    "  relationship \(e.name).\(r.name) \(r.isToMany ? "to-many" : "to-one") "
                        + "\(r.destination).\(r.inverse)"
                )
            }
            for c in e.uniquenessConstraints { lines.append("  unique \(e.name)(\(c.joined(separator: ",")))") }
            for k in e.keptCounts { lines.append("  count \(e.name).\(k.name) where \(k.condition.canonicalText)") }
        }
        return lines.joined(separator: "\n")
    }
}

/// Where the links of a many-to-many relationship live (see ``Model/joinTable(_:_:)``).
struct JoinTable: Hashable {
    let name: String
    /// The column holding this side's keys, and the one holding the destination's.
    let mine: String, theirs: String
    let isOwner: Bool
}
