import Foundation

/// A new object's properties by position, as an insert binds them: its attributes in the
/// entity's order (``Entity/attributes``), then its to-one relationships
/// (``Entity/toOneRelationships``).
///
/// An insert reads each value once, by its place. Rows given by name (a context's inserts, a
/// batch of dictionaries) are put in place once, and hooks, derived values and errors ask for the
/// few names they need.
struct InsertRow: Sendable {
    /// By attribute index: nil for one not given (its default goes in).
    var values: [Value?]
    /// By to-one index: the related object's key, nil for none.
    var targets: [Int64?]

    /// A row with no storage yet (see ``clear(for:)``).
    static var empty: InsertRow { InsertRow(values: [], targets: []) }

    init(values: [Value?], targets: [Int64?]) {
        self.values = values
        self.targets = targets
    }

    /// The properties of `changes` in place (a name `e` does not store is left out).
    init(_ e: Entity, _ changes: PropertyChanges) {
        self.init(values: [], targets: [])
        fill(e, changes)
    }

    /// Nothing given, for an object of `e`: the storage is kept (a writer fills one row after
    /// another in it, with no allocation per row).
    mutating func clear(for e: Entity) {
        Self.clear(&values, to: e.attributes.count)
        Self.clear(&targets, to: e.toOneRelationships.count)
    }

    /// Drops what the row holds, keeping its storage (a row kept between saves holds no object's
    /// values).
    mutating func forget() {
        Self.clear(&values, to: values.count)
        Self.clear(&targets, to: targets.count)
    }

    /// The properties of `changes` in place of what the row held (a name `e` does not store is
    /// left out).
    mutating func fill(_ e: Entity, _ changes: PropertyChanges) {
        let attributes = e.attributes
        if attributes.count <= 16 && changes.values.count <= attributes.count {
            // An entity of a few attributes, given no more values than it has: each value is put
            // in its place, found by comparing names (a few short compares, where each lookup by
            // name hashes it).
            Self.clear(&values, to: attributes.count)
            for (name, value) in changes.values {
                if let i = attributes.firstIndex(where: { $0.name == name }) { values[i] = value }
            }
        } else {
            if values.count != attributes.count { Self.clear(&values, to: attributes.count) }
            // By index: an attribute is read in place, not copied (its fields retained) per row.
            for i in attributes.indices { values[i] = changes.values[attributes[i].name] }
        }
        let toOne = e.toOneRelationships
        Self.clear(&targets, to: toOne.count)
        guard !changes.relationships.isEmpty else { return }
        for i in toOne.indices { targets[i] = changes.relationships[toOne[i].name] ?? nil }
    }

    /// `count` nils in `list`'s storage (an element at a time: the generic `append(contentsOf:)`
    /// costs more than the row).
    static func clear<T>(_ list: inout [T?], to count: Int) {
        if list.count == count {
            for i in list.indices { list[i] = nil }
        } else {
            list.removeAll(keepingCapacity: true)
            list.reserveCapacity(count)
            for _ in 0..<count { list.append(nil) }
        }
    }

    /// The value attribute `i` gets: the one given, or its default.
    func value(_ i: Int, of e: Entity) -> Value { values[i] ?? e.attributes[i].defaultValue }

    /// The value property `name` gets: an attribute's (its default when not given), a to-one
    /// relationship's key as an integer (`.null`: none, or no such property).
    func value(_ name: String, of e: Entity) -> Value {
        if let i = e.attributeIndex(name) { return value(i, of: e) }
        return target(name, of: e).map(Value.integer) ?? .null
    }

    /// The key to-one relationship `name` points at (nil: none, or no such relationship).
    func target(_ name: String, of e: Entity) -> Int64? {
        guard let i = e.toOneIndex(name) else { return nil }
        return targets[i]
    }

    /// Sets attribute `name` (nothing for a name `e` does not have).
    mutating func set(_ name: String, _ value: Value, of e: Entity) {
        if let i = e.attributeIndex(name) { values[i] = value }
    }
}

extension Entity {
    /// The index of attribute `name` in ``attributes`` (an entity has few: compared in order).
    func attributeIndex(_ name: String) -> Int? { attributes.firstIndex { $0.name == name } }

    /// The index of to-one relationship `name` in ``toOneRelationships``.
    func toOneIndex(_ name: String) -> Int? { toOneRelationships.firstIndex { $0.name == name } }
}
