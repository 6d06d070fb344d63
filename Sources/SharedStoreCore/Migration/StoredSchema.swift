import Foundation
import SharedStoreSupport

/// The canonical form of what a model stores: entities, attributes (name, type, optional),
/// relationships, uniqueness constraints, indexes and kept counts — each sorted, so that the
/// order of declarations never matters. Validation rules, defaults and history options are not
/// part of it: they are checked on save, not stored.
///
/// A store keeps the schema (as JSON) and version of the model that made or last migrated it;
/// migration compares it with a newer model's (``MigrationPlanner``).
package struct StoredSchema: Sendable, Hashable, Codable {
    package struct Attribute: Sendable, Hashable, Codable {
        package var name: String
        package var type: AttributeType
        package var optional: Bool
        /// How a derived attribute is computed (``Derivation``); nil for a stored one.
        package var derived: String?
    }

    package struct Relationship: Sendable, Hashable, Codable {
        package var name: String
        package var destination: String
        package var inverse: String
        package var toMany: Bool
        package var deleteRule: DeleteRule
    }

    package struct IndexPart: Sendable, Hashable, Codable {
        package var property: String
        package var ascending: Bool
    }

    package struct Entity: Sendable, Hashable, Codable {
        package var name: String
        package var attributes: [Attribute]
        package var relationships: [Relationship]
        /// Each constraint's names sorted (their order does not matter to uniqueness).
        package var uniquenessConstraints: [[String]]
        package var indexes: [[IndexPart]]
        /// Kept count name → its condition's canonical text.
        package var keptCounts: [String: String]

        package func attribute(_ name: String) -> Attribute? { attributes.first { $0.name == name } }
        package func relationship(_ name: String) -> Relationship? { relationships.first { $0.name == name } }
    }

    package var entities: [Entity]

    package func entity(_ name: String) -> Entity? { entities.first { $0.name == name } }

    package init(entities: [Entity]) { self.entities = entities }

    /// The schema of `model`, sorted.
    package init(_ model: Model) {
        entities = model.entities.map { e in
            Entity(
                name: e.name,
                attributes: e.attributes.map {
                    Attribute(name: $0.name, type: $0.type, optional: $0.isOptional, derived: $0.derivation?.text)
                }
                .sorted { $0.name < $1.name },
                relationships: e.relationships.map {
                    Relationship(
                        name: $0.name, destination: $0.destination, inverse: $0.inverse, toMany: $0.isToMany,
                        deleteRule: $0.deleteRule)
                }.sorted { $0.name < $1.name },
                uniquenessConstraints: e.uniquenessConstraints.map { $0.sorted() }.sorted {
                    $0.lexicographicallyPrecedes($1)
                },
                indexes: e.indexes.map { $0.parts.map { IndexPart(property: $0.property, ascending: $0.ascending) } }
                    .sorted { $0.map(\.text).lexicographicallyPrecedes($1.map(\.text)) },
                keptCounts: Dictionary(e.keptCounts.map { ($0.name, $0.condition.canonicalText) }) { a, _ in a })
        }.sorted { $0.name < $1.name }
    }

    /// The JSON kept in the store (keys sorted: the same schema is always the same text).
    package var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// The schema read back from the store's JSON.
    ///
    /// - Throws: `.notAStore` naming `path` when it is not a schema (a damaged store).
    package init(json: String, path: String) throws {
        do {
            self = try JSONDecoder().decode(StoredSchema.self, from: Data(json.utf8))
        } catch {
            throw StoreError(.notAStore, "\(path) has a damaged schema in ss_meta (\(error)); left untouched")
        }
    }

    /// One line per fact, for people: `attribute Article.title string`, sorted.
    package var lines: [String] {
        var lines: [String] = []
        for e in entities {
            lines.append("entity \(e.name)")
            for a in e.attributes {
                lines.append(
                    "attribute \(e.name).\(a.name) \(a.type.rawValue)\(a.optional ? " optional" : "")"
                        + (a.derived.map { " = \($0)" } ?? ""))
            }
            for r in e.relationships {
                lines.append(
                    "relationship \(e.name).\(r.name) \(r.toMany ? "to-many" : "to-one") \(r.destination).\(r.inverse) "
                        + r.deleteRule.rawValue)
            }
            for u in e.uniquenessConstraints { lines.append("unique \(e.name)(\(u.joined(separator: ",")))") }
            for i in e.indexes { lines.append("index \(e.name)(\(i.map(\.text).joined(separator: ",")))") }
            for (name, condition) in e.keptCounts.sorted(by: { $0.key < $1.key }) {
                lines.append("count \(e.name).\(name) where \(condition)")
            }
        }
        return lines
    }

    /// The first difference between two schemas, in words (for an error message).
    package func firstDifference(from other: StoredSchema) -> String {
        let mine = lines
        let theirs = other.lines
        if let line = theirs.first(where: { !mine.contains($0) }) {
            return "the store has '\(line)', the model does not"
        }
        if let line = mine.first(where: { !theirs.contains($0) }) {
            return "the model has '\(line)', the store does not"
        }
        return "the schemas differ"
    }
}

extension StoredSchema.IndexPart {
    package var text: String { property + (ascending ? "" : " desc") }
}

extension StoredSchema {
    /// The schema and history catalog of a store of format 2, read from the description it kept
    /// (one line per property in declaration order, which is how its history was numbered).
    /// Delete rules were not described: they are taken from `model` where it has the
    /// relationship (a migration from such a store changes none).
    ///
    /// - Throws: `.notAStore` naming `path` for a line that is not a description.
    package static func legacy(_ text: String, model: Model?, path: String) throws -> (StoredSchema, HistoryCatalog) {
        var entities: [Entity] = []
        var catalog: [HistoryCatalog.Entry] = []
        func damaged(_ line: Substring) -> StoreError {
            StoreError(.notAStore, "\(path) has a model description line it cannot read: '\(line.prefix(80))'")
        }
        for raw in text.split(separator: "\n") {
            let line = raw.trimmingCharacters(in: .whitespaces)
            let words = line.split(separator: " ", maxSplits: 3).map(String.init)
            guard let kind = words.first else { continue }
            if kind == "entity", words.count == 2 {
                entities.append(
                    Entity(
                        name: words[1], attributes: [], relationships: [], uniquenessConstraints: [], indexes: [],
                        keptCounts: [:]))
                continue
            }
            guard !entities.isEmpty else { throw damaged(raw) }
            let i = entities.count - 1
            let owner = entities[i].name
            let name = words.count > 1 ? String(words[1].dropFirst(owner.count + 1)) : ""
            switch kind {
            case "attribute" where words.count >= 3:
                guard let type = AttributeType(rawValue: words[2]) else { throw damaged(raw) }
                entities[i].attributes.append(
                    Attribute(name: name, type: type, optional: words.count == 4, derived: nil))
            case "relationship" where words.count == 4:
                let target = words[3].split(separator: ".").map(String.init)
                guard target.count == 2 else { throw damaged(raw) }
                let rule = model?.entity(named: owner)?.relationship(named: name)?.deleteRule ?? .nullify
                entities[i].relationships.append(
                    Relationship(
                        name: name, destination: target[0], inverse: target[1], toMany: words[2] == "to-many",
                        deleteRule: rule))
            case "unique":
                let inner = line.dropFirst("unique \(owner)(".count).dropLast()
                entities[i].uniquenessConstraints.append(inner.split(separator: ",").map(String.init).sorted())
            case "count" where words.count == 4 && words[2] == "where":
                entities[i].keptCounts[name] = words[3]
            default:
                throw damaged(raw)
            }
        }
        for e in entities {
            let toOne = e.relationships.filter { !$0.toMany }.map(\.name)
            let toMany = e.relationships.filter(\.toMany).map(\.name)
            catalog.append(HistoryCatalog.Entry(name: e.name, properties: e.attributes.map(\.name) + toOne + toMany))
        }
        var schema = StoredSchema(entities: entities)
        schema.sort()
        return (schema, HistoryCatalog(entries: catalog))
    }

    /// Sorted as ``init(_:)`` sorts a model's.
    private mutating func sort() {
        entities = entities.map { e in
            var e = e
            e.attributes.sort { $0.name < $1.name }
            e.relationships.sort { $0.name < $1.name }
            e.uniquenessConstraints.sort { $0.lexicographicallyPrecedes($1) }
            return e
        }.sorted { $0.name < $1.name }
    }

    /// The schema without what a store of format 2 did not describe (its indexes).
    package var withoutIndexes: StoredSchema {
        StoredSchema(
            entities: entities.map { e in
                var e = e
                e.indexes = []
                return e
            })
    }
}
