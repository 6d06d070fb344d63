import Foundation

/// The properties a batch's rows give by position, in order: attributes, then to-one
/// relationships. Made once by ``BatchWriter/layout(_:attributes:relationships:)``; each row of
/// ``BatchWriter/insert(_:values:relationships:object:)`` then gives its values in that order, with no
/// name to look up or hash per value.
///
/// For example, a million shared links:
/// ```swift
/// try context.batch { batch in
///     let article = try batch.layout("Article", attributes: ["title", "url"], relationships: ["category"])
///     for link in links {
///         _ = try batch.insert(
///             article, values: [.string(link.title), .string(link.url)], relationships: [link.category])
///     }
/// }
/// ```
///
/// An attribute the layout leaves out gets its default, as in an insert by name.
public struct InsertLayout: Sendable {
    /// The entity the rows are inserted into, as the batch's model has it.
    let entity: Entity
    /// For each value of a row, the index of its attribute in ``Entity/attributes``.
    let attributes: [Int]
    /// For each relationship of a row, the index of its to-one in ``Entity/toOneRelationships``.
    let relationships: [Int]

    /// The entity the rows are inserted into.
    public var entityName: String { entity.name }
    /// The attributes each row gives, in order.
    public var attributeNames: [String] { attributes.map { entity.attributes[$0].name } }
    /// The to-one relationships each row gives, in order.
    public var relationshipNames: [String] { relationships.map { entity.toOneRelationships[$0].name } }
}

extension BatchWriter {
    /// A layout for rows of `entityName` that give `attributes`, then `relationships` (to-one),
    /// in these orders.
    ///
    /// - Throws: `.unknownEntity`; `.unknownProperty` for a name the entity lacks or a to-many
    ///   relationship; `.validation` for a derived attribute (the save computes it);
    ///   `.invalidArgument` for a name given twice.
    public func layout(_ entityName: String, attributes: [String], relationships: [String] = []) throws
        -> InsertLayout
    {
        let e = try writer.model.entity(entityName)
        var seen: Set<String> = []
        var positions: [Int] = []
        for name in attributes {
            try e.checkAttribute(name, object: nil)
            guard seen.insert(name).inserted, let i = e.attributeIndex(name) else {
                throw StoreError(.invalidArgument, "a layout of \(e.name) names '\(name)' twice")
            }
            positions.append(i)
        }
        var targets: [Int] = []
        for name in relationships {
            guard let i = e.toOneIndex(name) else {
                throw StoreError(.unknownProperty, "\(e.name) has no to-one relationship '\(name)'")
            }
            guard seen.insert(name).inserted else {
                throw StoreError(.invalidArgument, "a layout of \(e.name) names '\(name)' twice")
            }
            targets.append(i)
        }
        return InsertLayout(entity: e, attributes: positions, relationships: targets)
    }

    /// A layout for rows of record type `R`'s entity that give `keys`, typed: the attributes among
    /// them in their order (a row's values), then its to-one relationships in their order (a row's
    /// relationships).
    ///
    /// For example:
    /// ```swift
    /// let layout = try batch.layout(Article.self, [Key(\Article.title), Key(\Article.url), Key(\Article.category)])
    /// _ = try batch.insert(layout, values: [.string("WAL"), .string(wal)], relationships: [category])
    /// ```
    ///
    /// - Throws: as ``layout(_:attributes:relationships:)``.
    public func layout<R: Record>(_ type: R.Type, _ keys: [Key]) throws -> InsertLayout {
        let e = try writer.model.entity(R.entityName)
        var attributes: [String] = []
        var relationships: [String] = []
        for key in keys {
            if e.toOneIndex(key.path) != nil && e.attributeIndex(key.path) == nil {
                relationships.append(key.path)
            } else {
                attributes.append(key.path)
            }
        }
        return try layout(e.name, attributes: attributes, relationships: relationships)
    }

    /// Inserts an object of `layout`'s entity with `values` (one per attribute of the layout, in
    /// its order) and `relationships` (one per to-one of the layout: a stored object, one this
    /// batch made, or nil); returns its permanent id. Checked and recorded as
    /// ``insert(_:_:relationships:object:)`` does.
    ///
    /// - Throws: `.invalidArgument` when the counts do not match the layout's, or the layout was
    ///   made for another model; then as ``insert(_:_:relationships:object:)``,
    ///   naming `object`.
    public mutating func insert(
        _ layout: InsertLayout, values: [Value], relationships: [ObjectID?] = [], object: @autoclosure () -> String
    ) throws -> ObjectID {
        placed += 1
        guard values.count == layout.attributes.count, relationships.count == layout.relationships.count else {
            throw StoreError(
                .invalidArgument,
                "\(object()): the layout of \(layout.entityName) takes \(layout.attributes.count) value(s) and "
                    + "\(layout.relationships.count) relationship(s), given \(values.count) and \(relationships.count)")
        }
        let e = try entity(of: layout, object: object())
        var row = writer.takeRow(for: e)
        defer { writer.keep(row) }
        for k in values.indices { row.values[layout.attributes[k]] = values[k] }
        for k in relationships.indices {
            guard let target = relationships[k] else { continue }
            let i = layout.relationships[k]
            row.targets[i] = try key(of: target, e.toOneRelationships[i], object: object())
        }
        let pk = try writer.insert(e, &row, object: object())
        count += 1
        return ObjectID(storeID: storeID, entity: e.name, primaryKey: pk)
    }

    /// ``insert(_:values:relationships:object:)`` naming the object in errors by
    /// its place among the batch's calls (`Article (batch object 3)`).
    public mutating func insert(_ layout: InsertLayout, values: [Value], relationships: [ObjectID?] = [])
        throws -> ObjectID
    {
        let place = placed + 1
        return try insert(
            layout, values: values, relationships: relationships,
            object: "\(layout.entityName) (batch object \(place))")
    }

    /// The entity of `layout` as this batch's model has it: the layout's own when it was made for
    /// this model (compared by identity, not field by field, for every row).
    private mutating func entity(of layout: InsertLayout, object: @autoclosure () -> String) throws -> Entity {
        if let last = lastEntity, last.isIdentical(to: layout.entity) { return last }
        guard let e = writer.model.entity(named: layout.entityName),
            e.isIdentical(to: layout.entity) || e == layout.entity
        else {
            throw StoreError(
                .invalidArgument,
                "\(object()): the layout of \(layout.entityName) was made for another model than this store's")
        }
        lastEntity = e
        return e
    }
}
