import Foundation
import SharedStoreSupport

/// The store's permanent numbers for entities and their properties. History records name
/// entities and properties by these numbers, so a record made under one model version decodes
/// under every later one: a renamed property keeps its number (and shows its new name), a new one
/// gets the next number, a removed one keeps its number with no name (history drops it).
///
/// A store's catalog starts as its first model's declaration order, which is also how stores of
/// format 2 numbered their history.
package struct HistoryCatalog: Sendable, Hashable, Codable {
    package struct Entry: Sendable, Hashable, Codable {
        /// The entity's name now; nil once a model removed it.
        package var name: String?
        /// Property names by number (attributes, to-one, then to-many, in first declaration
        /// order, then added ones); nil where a model removed one.
        package var properties: [String?]

        package init(name: String?, properties: [String?]) {
            self.name = name
            self.properties = properties
        }
    }

    package var entities: [Entry]

    package init(entries: [Entry]) { entities = entries }

    /// The catalog of a new store: the model's declaration order.
    package init(_ model: Model) {
        entities = model.entities.map { Entry(name: $0.name, properties: $0.historyPropertyNames) }
    }

    package var json: String {
        (try? JSONEncoder().encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// - Throws: `.notAStore` naming `path` when the text is not a catalog.
    package init(json: String, path: String) throws {
        do {
            self = try JSONDecoder().decode(HistoryCatalog.self, from: Data(json.utf8))
        } catch {
            throw StoreError(.notAStore, "\(path) has a damaged history catalog in ss_meta (\(error)); left untouched")
        }
    }
}

/// How a container's model maps to its store's ``HistoryCatalog``, both ways.
package struct HistoryNumbering: Sendable {
    /// Catalog number of each model entity, by model index.
    let entityNumber: [Int]
    /// Catalog property number of each model entity's history property, by model index and
    /// history index.
    let propertyNumber: [[Int]]
    /// By catalog number: the model entity index and each property number's name now (nil:
    /// removed, or an entity the model does not have).
    let decoding: [(entity: Int, properties: [String?])?]
    /// The catalog numbers are the model's own indexes: nothing to translate.
    let isIdentity: Bool

    /// - Throws: `.modelMismatch` when the model has an entity or property the catalog lacks
    ///   (the store's schema is checked first, so only a damaged store gets here).
    package init(model: Model, catalog: HistoryCatalog, path: String) throws {
        var entityNumber: [Int] = []
        var propertyNumber: [[Int]] = []
        var decoding: [(entity: Int, properties: [String?])?] = Array(repeating: nil, count: catalog.entities.count)
        for (i, e) in model.entities.enumerated() {
            guard let n = catalog.entities.firstIndex(where: { $0.name == e.name }) else {
                throw StoreError(.modelMismatch, "\(path): the history catalog has no entity \(e.name)")
            }
            let names = catalog.entities[n].properties
            var numbers: [Int] = []
            for p in e.historyPropertyNames {
                guard let k = names.firstIndex(of: p) else {
                    throw StoreError(.modelMismatch, "\(path): the history catalog has no property \(e.name).\(p)")
                }
                numbers.append(k)
            }
            entityNumber.append(n)
            propertyNumber.append(numbers)
            let current = Set(e.historyPropertyNames)
            decoding[n] = (i, names.map { $0.flatMap { current.contains($0) ? $0 : nil } })
        }
        self.entityNumber = entityNumber
        self.propertyNumber = propertyNumber
        self.decoding = decoding
        isIdentity =
            entityNumber == Array(0..<model.entities.count)
            && propertyNumber.enumerated().allSatisfy { $0.element == Array(0..<$0.element.count) }
            && catalog.entities.count == model.entities.count
            && zip(catalog.entities, model.entities).allSatisfy { $0.properties.count == $1.historyPropertyNames.count }
    }
}
