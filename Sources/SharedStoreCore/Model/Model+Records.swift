import Foundation
import SharedStoreSQLite
import SharedStoreSupport

extension Model {
    /// A types-first model: each record type is an entity (named ``Record/entityName``) whose
    /// attributes are the type's stored properties, with the types and optionality they have in
    /// Swift, and whose relationships, rules, indexes, kept counts, derived attributes, renames
    /// and hooks are what its ``Record/schema`` declares.
    ///
    /// It is the same model as the entity-description model of the same schema: the two are
    /// equal, and processes may open one store with either (<doc:TypesFirstModels>).
    ///
    /// For example:
    /// ```swift
    /// let model = try Model(version: 1, records: [Folder.self, Bookmark.self])
    /// ```
    ///
    /// - Throws: `.invalidModel` naming the type and property SharedStore cannot map (an
    ///   `ObjectID?` without a declared destination, a rule on a property the type does not
    ///   store, an enum that is not `CaseIterable`), or what ``init(version:_:hooks:)`` finds.
    public init(version: Int = 1, records: [any Record.Type]) throws {
        var entities: [Entity] = []
        var hooks: [String: EntityHooks] = [:]
        var seen: [String: String] = [:]
        for type in records {
            let (entity, entityHooks) = try Self.entity(of: type)
            if let earlier = seen.updateValue(_typeName(type, qualified: false), forKey: entity.name.lowercased()) {
                throw StoreError(
                    .invalidModel,
                    "\(earlier) and \(_typeName(type, qualified: false)) both map to entity '\(entity.name)' (names "
                        + "are compared whatever their case)")
            }
            entities.append(entity)
            if let entityHooks { hooks[entity.name] = entityHooks }
        }
        try self.init(version: version, entities, hooks: hooks)
    }

    /// The entity record type `R` describes, and its hooks.
    static func entity<R: Record>(of type: R.Type) throws -> (Entity, EntityHooks?) {
        func fail(_ why: String) -> StoreError { StoreError(.invalidModel, "\(R.self) (\(R.entityName)): \(why)") }
        let shape = try RecordShape.of(R.self)
        let schema = R.schema
        var rules: [String: AttributeRules] = [:]
        var derived: [String: Derivation] = [:]
        var toOne: [String: Relationship] = [:]
        var entity = Entity(R.entityName, attributes: [], renamedFrom: schema.renamedFrom)
        var toMany: [Relationship] = []
        for rule in schema.rules {
            switch rule.kind {
            case .attribute(let name, let r): rules[name] = r
            case .derived(let name, let d): derived[name] = d
            case .relationship(let r) where r.isToMany: toMany.append(r)
            case .relationship(let r): toOne[r.name] = r
            case .unique(let names): entity.uniquenessConstraints.append(names)
            case .index(let index): entity.indexes.append(index)
            case .keptCount(let count): entity.keptCounts.append(count)
            case .failed(let e): throw fail(e.message)
            }
        }
        var relationships: [Relationship] = []
        for p in shape.properties {
            guard let type = p.type else {
                guard let r = toOne.removeValue(forKey: p.name) else {
                    throw fail(
                        "\(p.name) is an ObjectID: declare its destination with .toOne(\\.\(p.name), Destination.self, "
                            + "inverse: …) in its schema")
                }
                relationships.append(r)
                continue
            }
            if let d = derived.removeValue(forKey: p.name) {
                entity.attributes.append(Attribute.derived(p.name, type, d))
                continue
            }
            let r = rules.removeValue(forKey: p.name) ?? AttributeRules()
            entity.attributes.append(
                Attribute(
                    p.name, type, optional: p.isOptional, default: r.defaultValue, minLength: r.minLength,
                    maxLength: r.maxLength, pattern: r.pattern, minValue: r.minValue, maxValue: r.maxValue,
                    singleLine: r.singleLine, preservedInHistory: r.preservedInHistory, renamedFrom: r.renamedFrom))
        }
        if let stray = (Array(rules.keys) + Array(derived.keys) + Array(toOne.keys)).sorted().first {
            throw fail("its schema declares '\(stray)', which is not a stored property of the right kind")
        }
        entity.relationships = relationships + toMany
        return (entity, schema.hooks)
    }
}

extension Model {
    /// Every difference between this model and `other`, one line each (empty: the same model):
    /// the schema a store keeps (what one store shared by both must agree on, or the second
    /// open fails with `.modelMismatch`), then what each process checks on save — validation
    /// rules, defaults, history options, renames — which a store does not keep, so two processes
    /// whose models differ there would each enforce their own.
    ///
    /// The check for coexistence: a types-first model and the entity model it replaces should
    /// have none (`#expect(typed.differences(from: entities).isEmpty)`).
    public func differences(from other: Model) -> [String] {
        var out: [String] = []
        if version != other.version { out.append("version \(version), the other \(other.version)") }
        let mine = StoredSchema(self).lines
        let theirs = StoredSchema(other).lines
        out += mine.filter { !theirs.contains($0) }.map { "only this model: \($0)" }
        out += theirs.filter { !mine.contains($0) }.map { "only the other: \($0)" }
        for e in entities {
            guard let o = other.entity(named: e.name) else { continue }
            if e.renamedFrom != o.renamedFrom {
                out.append("\(e.name): renamed from \(e.renamedFrom ?? "-"), the other \(o.renamedFrom ?? "-")")
            }
            for a in e.attributes {
                guard let b = o.attribute(named: a.name), a.type == b.type, a.isOptional == b.isOptional else {
                    continue
                }
                if a != b { out.append("\(e.name).\(a.name): rules \(a.ruleText), the other \(b.ruleText)") }
            }
        }
        let hooked = Set(hooks.byEntity.keys).symmetricDifference(other.hooks.byEntity.keys)
        out += hooked.sorted().map { "\($0): hooks in one model only" }
        // Hooks are code: what can be compared is which ones are set and the rules' names.
        for name in Set(hooks.byEntity.keys).intersection(other.hooks.byEntity.keys).sorted() {
            guard let a = hooks.byEntity[name]?.outline, let b = other.hooks.byEntity[name]?.outline, a != b else {
                continue
            }
            out.append("\(name): hooks \(a), the other \(b)")
        }
        return out
    }
}

extension EntityHooks {
    /// Which hooks are set and the rules' names, for people (``Model/differences(from:)``).
    var outline: String {
        var parts: [String] = []
        if awakeFromInsert != nil { parts.append("awakeFromInsert") }
        if willSave != nil { parts.append("willSave") }
        if didSave != nil { parts.append("didSave") }
        if prepareForDeletion != nil { parts.append("prepareForDeletion") }
        if awakeFromFetch != nil { parts.append("awakeFromFetch") }
        parts += rules.map { "rule '\($0.name)'" }
        return parts.isEmpty ? "(none)" : parts.joined(separator: ", ")
    }
}

extension Attribute {
    /// What a save checks of this attribute, for people (``Model/differences(from:)``).
    var ruleText: String {
        var parts: [String] = []
        if !defaultValue.isNull { parts.append("default \(defaultValue)") }
        if let n = minLength { parts.append("minLength \(n)") }
        if let n = maxLength { parts.append("maxLength \(n)") }
        if let p = pattern { parts.append("pattern \(p)") }
        if let n = minValue { parts.append("minValue \(n)") }
        if let n = maxValue { parts.append("maxValue \(n)") }
        if isSingleLine { parts.append("single line") }
        if preservesValueInHistoryOnDeletion { parts.append("preserved in history") }
        if let r = renamedFrom { parts.append("renamed from \(r)") }
        return parts.isEmpty ? "(none)" : parts.joined(separator: ", ")
    }
}
