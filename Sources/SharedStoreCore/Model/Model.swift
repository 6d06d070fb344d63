import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// A managed object model: the entities a store holds. Checked for consistency on creation.
public struct Model: Sendable, Hashable {
    /// The model's entities, in the order they were given.
    public let entities: [Entity]
    let entityIndex: [String: Int]
    /// The model's version (Core Data's model versions): a store keeps the version and schema
    /// of the model that made or last migrated it; a model with a higher version migrates it
    /// (``MigrationPlan``), a model with a lower one cannot open it (`.modelNewer`).
    public let version: Int
    /// The hooks and validation rules of each entity (by name), run by every process that opens
    /// a store with this model (Core Data's managed object subclass code belongs to the model
    /// too): nothing to register per process. ``Container/register(_:_:)`` replaces an entity's
    /// for one container.
    public let hooks: ModelHooks

    /// - Parameter hooks: each entity's hooks and rules, by entity name.
    /// - Throws: ``StoreError`` with code `.invalidModel` naming the first inconsistency (hooks
    ///   for an entity the model lacks included).
    public init(version: Int = 1, _ entities: [Entity], hooks: [String: EntityHooks] = [:]) throws {
        guard version >= 1 else { throw StoreError(.invalidModel, "model version \(version): versions start at 1") }
        self.version = version
        self.entities = entities
        var index: [String: Int] = [:]
        for (i, e) in entities.enumerated() { index[e.name] = i }
        self.entityIndex = index
        self.hooks = ModelHooks(byEntity: hooks)
        if let unknown = hooks.keys.sorted().first(where: { index[$0] == nil }) {
            throw StoreError(.invalidModel, "hooks for entity '\(unknown)', which the model does not have")
        }
        try validate()
    }

    /// The entity named `name`, or nil.
    public func entity(named name: String) -> Entity? { entityIndex[name].map { entities[$0] } }

    /// The index of an entity of this model (a precondition: the entity comes from it).
    func index(of e: Entity) -> Int {
        // The model's own entity (every save's case) by its shared fields, in a model of a few
        // entities: some pointer comparisons, where the name's hash costs a few hundred
        // instructions.
        if entities.count <= 8, let i = entities.firstIndex(where: { $0.isIdentical(to: e) }) { return i }
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
            do {
                try k.condition.checkDepth()
            } catch let error as StoreError {
                throw StoreError(.invalidModel, "\(e.name).\(k.name): \(error.message)")
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

/// A model's hooks and rules, by entity name. Code, not schema: two models of one schema are
/// equal whatever hooks they carry (the store's identity is its schema).
public struct ModelHooks: Sendable, Hashable {
    /// Each entity's hooks, by entity name.
    public let byEntity: [String: EntityHooks]

    /// Always equal: hooks are not part of a model's identity.
    public static func == (a: ModelHooks, b: ModelHooks) -> Bool { true }
    /// Hashes nothing, as ``==(_:_:)`` compares nothing.
    public func hash(into hasher: inout Hasher) {}
}
