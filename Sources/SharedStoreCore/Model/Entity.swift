import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// What happens to related objects when an object is deleted (Core Data's delete rules).
public enum DeleteRule: String, Sendable, Hashable, Codable {
    /// The related objects' inverse is set to nil.
    case nullify
    /// The related objects are deleted too.
    case cascade
    /// The delete fails while any related object exists.
    case deny
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

/// What a property name is to a record's encoder: an attribute (its type, whether the save
/// computes it, whether an insert leaves it nil by default), or a relationship.
/// Each carries the property's place in the rows an insert binds (``InsertRow``): the
/// attribute's index, the to-one's (nil for a to-many).
enum RecordSlot: Sendable, Hashable {
    case attribute(AttributeType, derived: Bool, nullIsDefault: Bool, index: Int)
    case relationship(toOne: Int?)
}

/// An entity: attributes, relationships, uniqueness constraints (each a list of attribute names),
/// indexes and kept counts.
public struct Entity: Sendable, Hashable {
    /// The entity's fields, shared by its copies until one of them changes (copy on write): a
    /// save or a batch hands an entity around for every row, and a copy of nine fields cost nine
    /// retains and nine releases each time.
    private var storage: Storage

    /// The entity's name: a plain ASCII identifier that does not start with `ss_` or `sqlite`. It is
    /// the table's name.
    public var name: String {
        get { storage.name }
        set { unique().name = newValue }
    }
    /// The entity's attributes, in the order history numbers them.
    public var attributes: [Attribute] {
        get { storage.attributes }
        set {
            let s = unique()
            s.attributes = newValue
            s.recordSlots = Self.slots(newValue, s.relationships)
        }
    }
    /// The entity's relationships; each names its inverse in the destination entity.
    public var relationships: [Relationship] {
        get { storage.relationships }
        set {
            let s = unique()
            s.relationships = newValue
            s.toOneRelationships = newValue.filter { !$0.isToMany }
            s.recordSlots = Self.slots(s.attributes, newValue)
        }
    }
    /// What each property name is to a record's encoder, kept with ``attributes`` and
    /// ``relationships`` (a record is encoded by one lookup per property).
    var recordSlots: [String: RecordSlot] { storage.recordSlots }
    /// The to-one relationships, in declaration order: kept with ``relationships`` (a save reads
    /// them for every row it writes).
    var toOneRelationships: [Relationship] { storage.toOneRelationships }
    /// Properties (attributes or to-one relationships) whose values no two objects may share: each
    /// inner list is one constraint, single (`[["name"]]`) or compound (`[["first", "last"]]`). A save
    /// that would break one is resolved by the context's ``MergePolicy`` (`.uniqueness` with `.error`).
    public var uniquenessConstraints: [[String]] {
        get { storage.uniquenessConstraints }
        set { unique().uniquenessConstraints = newValue }
    }
    /// Indexes that fetches use (a uniqueness constraint and a to-one relationship have one
    /// already). Created with the store and, when a model adds one, at the next open.
    public var indexes: [Index] {
        get { storage.indexes }
        set { unique().indexes = newValue }
    }
    /// Counts every save keeps up to date (``KeptCount``).
    public var keptCounts: [KeptCount] {
        get { storage.keptCounts }
        set { unique().keptCounts = newValue }
    }
    /// The name this entity had in the model version before (a migration renames its table).
    public var renamedFrom: String? {
        get { storage.renamedFrom }
        set { unique().renamedFrom = newValue }
    }

    /// The fields of an entity. Changed only through an entity that holds the one reference to
    /// it (``unique()``), so that no copy ever sees another's change: shared between threads, it
    /// is only read.
    private final class Storage: @unchecked Sendable {
        var name: String
        var attributes: [Attribute]
        var relationships: [Relationship]
        var recordSlots: [String: RecordSlot]
        var toOneRelationships: [Relationship]
        var uniquenessConstraints: [[String]]
        var indexes: [Index]
        var keptCounts: [KeptCount]
        var renamedFrom: String?

        init(
            name: String, attributes: [Attribute], relationships: [Relationship], uniquenessConstraints: [[String]],
            indexes: [Index], keptCounts: [KeptCount], renamedFrom: String?
        ) {
            self.name = name
            self.attributes = attributes
            self.relationships = relationships
            recordSlots = Entity.slots(attributes, relationships)
            toOneRelationships = relationships.filter { !$0.isToMany }
            self.uniquenessConstraints = uniquenessConstraints
            self.indexes = indexes
            self.keptCounts = keptCounts
            self.renamedFrom = renamedFrom
        }

        func copy() -> Storage {
            Storage(
                name: name, attributes: attributes, relationships: relationships,
                uniquenessConstraints: uniquenessConstraints, indexes: indexes, keptCounts: keptCounts,
                renamedFrom: renamedFrom)
        }
    }

    /// The storage, copied first when another entity shares it.
    private mutating func unique() -> Storage {
        if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
        return storage
    }

    /// Two entities are equal when they describe the same entity, field by field.
    public static func == (a: Entity, b: Entity) -> Bool {
        a.storage === b.storage
            || (a.name == b.name && a.attributes == b.attributes && a.relationships == b.relationships
                && a.uniquenessConstraints == b.uniquenessConstraints && a.indexes == b.indexes
                && a.keptCounts == b.keptCounts && a.renamedFrom == b.renamedFrom)
    }

    /// Hashes the fields ``==(_:_:)`` compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(attributes)
        hasher.combine(relationships)
        hasher.combine(uniquenessConstraints)
        hasher.combine(indexes)
        hasher.combine(keptCounts)
        hasher.combine(renamedFrom)
    }

    /// An entity named `name` with its properties and what the store keeps for it.
    ///
    /// For example:
    /// ```swift
    /// Entity("Category", attributes: [Attribute("name", .string)],
    ///        relationships: [.toMany("articles", "Article", inverse: "category")],
    ///        uniquenessConstraints: [["name"]])
    /// ```
    ///
    /// The entity is checked with its model (``Model/init(version:_:hooks:)``), not here.
    public init(
        _ name: String, attributes: [Attribute], relationships: [Relationship] = [],
        uniquenessConstraints: [[String]] = [], indexes: [Index] = [], keptCounts: [KeptCount] = [],
        renamedFrom: String? = nil
    ) {
        storage = Storage(
            name: name, attributes: attributes, relationships: relationships,
            uniquenessConstraints: uniquenessConstraints, indexes: indexes, keptCounts: keptCounts,
            renamedFrom: renamedFrom)
    }

    fileprivate static func slots(_ attributes: [Attribute], _ relationships: [Relationship]) -> [String: RecordSlot] {
        var slots: [String: RecordSlot] = [:]
        for (i, r) in relationships.filter({ !$0.isToMany }).enumerated() { slots[r.name] = .relationship(toOne: i) }
        for r in relationships where r.isToMany { slots[r.name] = .relationship(toOne: nil) }
        for (i, a) in attributes.enumerated() {
            slots[a.name] = .attribute(a.type, derived: a.isDerived, nullIsDefault: a.defaultValue.isNull, index: i)
        }
        return slots
    }

    /// The attribute named `name`, or nil.
    public func attribute(named name: String) -> Attribute? { attributes.first { $0.name == name } }
    /// The relationship named `name`, or nil.
    public func relationship(named name: String) -> Relationship? { relationships.first { $0.name == name } }

    var toManyRelationships: [Relationship] { relationships.filter(\.isToMany) }

    /// Names history refers to by index: attributes, to-one, then to-many relationships (a
    /// to-many relationship shows as updated when a many-to-many link is made or broken).
    var historyPropertyNames: [String] { storedPropertyNames + toManyRelationships.map(\.name) }

    /// Checks that every key of `values` is an attribute of this entity.
    ///
    /// - Throws: `.unknownProperty` naming the first that is not (and `object`, when given).
    func checkAttributes(_ values: [String: Value], object: @autoclosure () -> String? = nil) throws {
        for name in values.keys { try checkAttribute(name, object: object()) }
    }

    /// Throws unless `name` is an attribute a caller may set (``checkAttributes(_:object:)`` for
    /// one name; `object`, for the message, is made only when there is one).
    func checkAttribute(_ name: String, object: @autoclosure () -> String?) throws {
        // By index: an attribute is not copied (its fields retained) for every value of every row.
        guard let i = attributes.firstIndex(where: { $0.name == name }) else {
            throw StoreError(
                .unknownProperty, (object().map { "\($0): " } ?? "") + "\(self.name) has no attribute '\(name)'")
        }
        if let d = attributes[i].derivation {
            let object = object()
            throw StoreError.validation(
                (object.map { "\($0): " } ?? "") + "\(self.name).\(name) is derived (\(d.text)): the save computes "
                    + "it; it cannot be set", object: object ?? self.name, property: name, rule: .derived)
        }
    }

    /// Whether `other` is this very entity (a copy of it, sharing its fields), not one that
    /// only compares equal: a question that costs no comparison of fields.
    func isIdentical(to other: Entity) -> Bool { storage === other.storage }

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
