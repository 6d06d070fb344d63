import Foundation
import SharedStoreSupport

/// One step of a migration plan, in the order ``MigrationRunner`` runs them.
enum MigrationAction: Sendable {
    case renameTable(from: String, to: String, what: String)
    case renameColumn(table: String, from: String, to: String)
    case dropColumn(table: String, column: String, what: String)
    case dropTable(String, what: String)
    case createEntity(String)
    case addColumn(table: String, column: String, type: AttributeType?, default: Value)
    case createJoinTable(String)
    case fillNulls(table: String, column: String, value: Value, type: AttributeType)
    case recount(entity: String, count: String)
    case recompute(entity: String, attribute: String)
    case removeCount(String)
    case note(String)

    /// The step in words, for `storectl migrate --dry-run`.
    var description: String {
        switch self {
        case .renameTable(let from, let to, let what): return "rename \(what) \(from) to \(to) (constant time)"
        case .renameColumn(let table, let from, let to):
            return "rename attribute \(table).\(from) to \(table).\(to) (constant time)"
        case .dropColumn(let table, let column, let what):
            return "remove \(what) \(table).\(column) (rewrites the table)"
        case .dropTable(let name, let what): return "remove \(what) \(name) and its objects"
        case .createEntity(let name): return "add entity \(name)"
        case .addColumn(let table, let column, let type, let value):
            let kind =
                type.map { "attribute \(table).\(column) \($0.rawValue)" } ?? "to-one relationship \(table).\(column)"
            return "add \(kind)" + (value.isNull ? "" : " with default \(value)") + " (constant time)"
        case .createJoinTable(let name): return "add many-to-many links table \(name)"
        case .fillNulls(let table, let column, let value, _):
            return "set \(table).\(column) to its default \(value) where it has no value"
        case .recount(let entity, let count): return "count kept count \(entity).\(count)"
        case .recompute(let entity, let attribute): return "compute derived attribute \(entity).\(attribute)"
        case .removeCount(let name): return "remove kept count \(name)"
        case .note(let text): return text
        }
    }
}

/// A check of the stored objects that a plan needs to hold before it runs.
enum MigrationCheck: Sendable {
    /// No object may lack a value of `column` (it becomes required, with no default).
    case noNulls(table: String, column: String, what: String)
    /// No two objects may share the values of `columns` (a new uniqueness constraint, `shown`
    /// as the new model names it).
    case unique(table: String, columns: [String], shown: String)
    /// The table must be empty (a required attribute with no default is added).
    case empty(table: String, what: String)
}

/// What it takes to bring a store from its stored schema to a newer model: the steps, the
/// checks of existing objects, the refused changes, and the store's catalog afterwards.
struct MigrationPlanner {
    let old: StoredSchema
    let catalog: HistoryCatalog
    let model: Model
    /// Custom steps register for a version above the store's: they may make changes lightweight
    /// migration cannot (a type change), which are then allowed.
    let hasCustomSteps: Bool

    private(set) var actions: [MigrationAction] = []
    private(set) var checks: [MigrationCheck] = []
    private(set) var refused: [String] = []
    /// Old entity name → new, for every entity kept (renamed or not).
    private(set) var entityNames: [String: String] = [:]
    /// Per new entity name: old attribute name → new, for every attribute kept.
    private(set) var attributeNames: [String: [String: String]] = [:]

    init(old: StoredSchema, catalog: HistoryCatalog, model: Model, hasCustomSteps: Bool) {
        self.old = old
        self.catalog = catalog
        self.model = model
        self.hasCustomSteps = hasCustomSteps
        planEntities()
    }

    // MARK: - Entities

    private mutating func planEntities() {
        var added: [Entity] = []
        for e in model.entities {
            if old.entity(e.name) != nil {
                entityNames[e.name] = e.name
            } else if let from = e.renamedFrom, old.entity(from) != nil, model.entity(named: from) == nil {
                entityNames[from] = e.name
                actions.append(.renameTable(from: from, to: e.name, what: "entity"))
            } else {
                added.append(e)
            }
        }
        for o in old.entities where entityNames[o.name] == nil {
            actions.append(.dropTable(o.name, what: "entity"))
        }
        for (from, to) in entityNames.sorted(by: { $0.key < $1.key }) {
            guard let o = old.entity(from), let e = model.entity(named: to) else { continue }
            planAttributes(o, e)
            planRelationships(o, e)
            planConstraints(o, e)
        }
        for e in added { actions.append(.createEntity(e.name)) }
        planJoinTables()
        planKeptCounts()
    }

    // MARK: - Attributes

    private mutating func planAttributes(_ o: StoredSchema.Entity, _ e: Entity) {
        var names: [String: String] = [:]
        var fresh: [Attribute] = []
        for a in e.attributes {
            if let before = o.attribute(a.name) {
                names[a.name] = a.name
                planChanged(e, before, a)
            } else if let from = a.renamedFrom, let before = o.attribute(from), e.attribute(named: from) == nil {
                names[from] = a.name
                actions.append(.renameColumn(table: e.name, from: from, to: a.name))
                planChanged(e, before, a)
            } else {
                fresh.append(a)
            }
        }
        attributeNames[e.name] = names
        for a in o.attributes where names[a.name] == nil {
            actions.append(.dropColumn(table: e.name, column: a.name, what: "attribute"))
        }
        for a in e.attributes where a.isDerived {
            let before = o.attribute(names.first { $0.value == a.name }?.key ?? a.name)
            if before?.derived != a.derivation?.text { actions.append(.recompute(entity: e.name, attribute: a.name)) }
        }
        for a in fresh {
            actions.append(.addColumn(table: e.name, column: a.name, type: a.type, default: a.defaultValue))
            if !a.isOptional && a.defaultValue.isNull {
                checks.append(.empty(table: o.name, what: "\(e.name).\(a.name) is added as required with no default"))
            }
        }
    }

    /// An attribute kept (maybe renamed): type and optionality.
    private mutating func planChanged(_ e: Entity, _ before: StoredSchema.Attribute, _ a: Attribute) {
        if before.type != a.type {
            let change = "\(e.name).\(a.name): type \(before.type.rawValue) → \(a.type.rawValue)"
            if hasCustomSteps {
                actions.append(.note("\(change): left to the custom steps"))
            } else {
                refused.append(change)
            }
        }
        if before.optional && !a.isOptional {
            if a.defaultValue.isNull {
                // Checks read the store as it is: the old table and column names.
                checks.append(
                    .noNulls(
                        table: oldName(of: e), column: before.name,
                        what: "\(e.name).\(a.name) becomes required with no default"))
            } else {
                actions.append(.fillNulls(table: e.name, column: a.name, value: a.defaultValue, type: a.type))
            }
        }
    }

    // MARK: - Relationships

    private mutating func planRelationships(_ o: StoredSchema.Entity, _ e: Entity) {
        for r in e.relationships {
            guard let before = o.relationship(r.name) else {
                if !r.isToMany { actions.append(.addColumn(table: e.name, column: r.name, type: nil, default: .null)) }
                continue
            }
            if before.toMany != r.isToMany || entityNames[before.destination] != r.destination {
                refused.append(
                    "\(e.name).\(r.name): \(before.toMany ? "to-many" : "to-one") \(before.destination) → "
                        + "\(r.isToMany ? "to-many" : "to-one") \(r.destination)")
            } else if before.deleteRule != r.deleteRule {
                actions.append(
                    .note(
                        "delete rule of \(e.name).\(r.name): \(before.deleteRule.rawValue) → "
                            + "\(r.deleteRule.rawValue) "
                            + "(applies from the next delete)"))
            }
        }
        for r in o.relationships where !r.toMany && e.relationship(named: r.name) == nil {
            actions.append(.dropColumn(table: e.name, column: r.name, what: "to-one relationship"))
        }
    }

    /// New uniqueness constraints need the stored objects to hold them already (checked under
    /// the old table and column names: the store as it is).
    private mutating func planConstraints(_ o: StoredSchema.Entity, _ e: Entity) {
        let names = attributeNames[e.name] ?? [:]
        let before = Set(o.uniquenessConstraints.map { $0.map { names[$0] ?? $0 }.sorted() })
        let oldColumn = Dictionary(names.map { ($1, $0) }) { a, _ in a }
        for u in e.uniquenessConstraints where !before.contains(u.sorted()) {
            // A constraint on a column the migration adds holds: every object has its default.
            let columns = u.compactMap { oldColumn[$0] ?? (o.relationship($0) != nil ? $0 : nil) }
            guard columns.count == u.count else { continue }
            checks.append(.unique(table: o.name, columns: columns, shown: "\(e.name)(\(u.joined(separator: ",")))"))
        }
    }

    /// The entity and columns (new names) of the new uniqueness constraint a check shows as
    /// `shown` (`Entity(a,b)`).
    func uniqueConstraint(_ shown: String) -> (String, [String])? {
        for e in model.entities {
            for u in e.uniquenessConstraints where "\(e.name)(\(u.joined(separator: ",")))" == shown {
                return (e.name, u)
            }
        }
        return nil
    }

    /// The name `e` had in the stored schema.
    private func oldName(of e: Entity) -> String {
        entityNames.first { $0.value == e.name }?.key ?? e.name
    }

    /// Join tables of many-to-many relationships: kept (renamed with their entities), added,
    /// removed.
    private mutating func planJoinTables() {
        let wanted = Set(
            model.entities.flatMap { e in e.toManyRelationships.compactMap { model.joinTable(e, $0) } }.map(\.name))
        var kept = Set<String>()
        for (name, pair) in Self.joinTables(old) {
            guard let from = entityNames[pair.entity], let to = entityNames[pair.destination],
                let e = model.entity(named: from), let r = e.relationship(named: pair.name),
                r.isToMany, r.destination == to, let join = model.joinTable(e, r)
            else {
                actions.append(.dropTable(name, what: "many-to-many links table"))
                continue
            }
            kept.insert(join.name)
            if join.name != name { actions.append(.renameTable(from: name, to: join.name, what: "links table")) }
        }
        for name in wanted.subtracting(kept).sorted() { actions.append(.createJoinTable(name)) }
    }

    /// The join tables of a stored schema, by name: the owner side's entity and relationship.
    static func joinTables(_ s: StoredSchema) -> [String: (entity: String, name: String, destination: String)] {
        var out: [String: (entity: String, name: String, destination: String)] = [:]
        for e in s.entities {
            for r in e.relationships where r.toMany {
                guard let d = s.entity(r.destination), let inv = d.relationship(r.inverse), inv.toMany else { continue }
                if "\(e.name).\(r.name)" <= "\(d.name).\(r.inverse)" {
                    out["ss_m2m_\(e.name)_\(r.name)"] = (e.name, r.name, d.name)
                }
            }
        }
        return out
    }

    // MARK: - Kept counts

    private mutating func planKeptCounts() {
        var wanted: [String: (entity: String, count: String, text: String)] = [:]
        for e in model.entities {
            for k in e.keptCounts { wanted["\(e.name).\(k.name)"] = (e.name, k.name, k.condition.canonicalText) }
        }
        var had: [String: String] = [:]
        for o in old.entities {
            for (name, text) in o.keptCounts {
                // A kept count of a renamed entity is counted again under its new name.
                had["\(o.name).\(name)"] = entityNames[o.name] == o.name ? text : nil
                if entityNames[o.name] != o.name || wanted["\(o.name).\(name)"] == nil {
                    actions.append(.removeCount("\(o.name).\(name)"))
                }
            }
        }
        for (name, w) in wanted.sorted(by: { $0.key < $1.key }) where had[name] != w.text {
            actions.append(.recount(entity: w.entity, count: w.count))
        }
    }

    // MARK: - Catalog

    /// The store's catalog after the migration: renamed entries keep their numbers, removed ones
    /// lose their names, new ones are appended.
    var newCatalog: HistoryCatalog {
        var c = catalog
        let newNames = entityNames
        for (i, entry) in c.entities.enumerated() {
            guard let name = entry.name else { continue }
            guard let now = newNames[name], let e = model.entity(named: now) else {
                c.entities[i] = HistoryCatalog.Entry(name: nil, properties: entry.properties.map { _ in nil })
                continue
            }
            let renames = attributeNames[now] ?? [:]
            let current = Set(e.historyPropertyNames)
            var properties = entry.properties.map { p -> String? in
                guard let p else { return nil }
                let renamed = renames[p] ?? p
                return current.contains(renamed) ? renamed : nil
            }
            for p in e.historyPropertyNames where !properties.contains(p) { properties.append(p) }
            c.entities[i] = HistoryCatalog.Entry(name: now, properties: properties)
        }
        for e in model.entities where !c.entities.contains(where: { $0.name == e.name }) {
            c.entities.append(HistoryCatalog.Entry(name: e.name, properties: e.historyPropertyNames))
        }
        return c
    }
}
