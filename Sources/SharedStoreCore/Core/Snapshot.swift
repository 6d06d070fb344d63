import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// A Sendable value copy of one object as it was read: attributes, to-one relationships and the
/// version the store had (bumped by every save of the object).
///
/// The attribute values are kept as a column array beside the entity's names (shared by every
/// snapshot of a fetch): a row becomes one small array, not a dictionary to allocate and hash.
/// ``values`` gives them as a dictionary when asked.
public struct Snapshot: Sendable, Hashable, CustomStringConvertible {
    /// The object's id.
    public let id: ObjectID
    /// The object's version when it was read: every save of the object bumps it, so a save of a
    /// context that read an older version is a conflict for its ``MergePolicy``.
    public let version: Int64
    /// Attribute names and their values, position by position.
    private var names: [String]
    private var columns: Columns
    /// To-one relationships that are set; an absent key means nil.
    public var relationships: [String: ObjectID]

    /// A snapshot's values: an array of its own, or its row of the one array a fetch read all
    /// its rows into (one allocation for the fetch, not one per object). A change copies the
    /// row out first.
    enum Columns: Sendable {
        case own([Value])
        case shared(SharedRows, offset: Int)
    }

    /// A snapshot of `values` and set to-one `relationships`; the library makes these when it reads,
    /// a test or a view may too.
    public init(id: ObjectID, version: Int64, values: [String: Value], relationships: [String: ObjectID]) {
        self.id = id
        self.version = version
        names = values.keys.sorted()
        columns = .own(names.map { values[$0] ?? .null })
        self.relationships = relationships
    }

    /// A snapshot read from a row: `columns[i]` is the value of `names[i]`.
    init(id: ObjectID, version: Int64, names: [String], columns: [Value], relationships: [String: ObjectID]) {
        precondition(names.count == columns.count, "a snapshot needs a value per name")
        self.id = id
        self.version = version
        self.names = names
        self.columns = .own(columns)
        self.relationships = relationships
    }

    /// Row `offset / names.count` of a fetch's shared values.
    init(
        id: ObjectID, version: Int64, names: [String], shared: SharedRows, offset: Int,
        relationships: [String: ObjectID]
    ) {
        self.id = id
        self.version = version
        self.names = names
        self.columns = .shared(shared, offset: offset)
        self.relationships = relationships
    }

    /// The value at position `i`.
    /// Where attribute `name` is (``value(at:)``): a position in ``attributeNames``.
    func position(of name: String) -> Int? { names.firstIndex(of: name) }

    /// Whether the snapshot's attributes are `names`, in that order (the arrays of one fetch are
    /// one array: compared by identity first).
    func hasNames(_ names: [String]) -> Bool { self.names == names }

    /// Whether this snapshot is a whole row of `layout`'s entity as read (or as a save wrote it):
    /// its names are the layout's own array, not only equal to it. A read, and each save's
    /// snapshot of it, share that array; a snapshot made from values (``init(id:version:values:relationships:)``,
    /// ``values``) never does, so it never passes for a row.
    func isRow(of layout: RowLayout) -> Bool {
        guard !names.isEmpty else { return false }
        return names.withUnsafeBufferPointer { mine in
            layout.names.withUnsafeBufferPointer { theirs in mine.baseAddress == theirs.baseAddress }
        }
    }

    /// The value at `position` (see ``position(of:)``).
    func value(at position: Int) -> Value { column(position) }

    private func column(_ i: Int) -> Value {
        switch columns {
        case .own(let values): return values[i]
        case .shared(let rows, let offset): return rows.values[offset + i]
        }
    }

    /// The values as an array of their own.
    private var columnArray: [Value] {
        switch columns {
        case .own(let values): return values
        case .shared(let rows, let offset): return Array(rows.values[offset..<(offset + names.count)])
        }
    }

    /// The attribute values by name.
    public var values: [String: Value] {
        get { Dictionary(zip(names, columnArray), uniquingKeysWith: { _, last in last }) }
        set {
            names = newValue.keys.sorted()
            columns = .own(names.map { newValue[$0] ?? .null })
        }
    }

    /// The value of attribute `name` (`.null` when it has none).
    public subscript(_ name: String) -> Value {
        get { names.firstIndex(of: name).map { column($0) } ?? .null }
        set {
            var values = columnArray
            if let i = names.firstIndex(of: name) {
                values[i] = newValue
            } else {
                names.append(name)
                values.append(newValue)
            }
            columns = .own(values)
        }
    }

    /// The same object at the next version (what a save of it writes next).
    func bumped() -> Snapshot {
        var next = self
        next.bumpVersion()
        return next
    }

    private init(copying s: Snapshot, version: Int64) {
        id = s.id
        self.version = version
        names = s.names
        columns = s.columns
        relationships = s.relationships
    }

    private mutating func bumpVersion() { self = Snapshot(copying: self, version: version + 1) }

    /// Whether the snapshot holds a value (maybe `.null`) for attribute `name`.
    public func has(_ name: String) -> Bool { names.contains(name) }

    /// The names of the attributes it holds.
    public var attributeNames: [String] { names }

    /// Whether two snapshots are the same object at the same version with the same values and
    /// relationships (whatever the order their attributes were read in).
    public static func == (a: Snapshot, b: Snapshot) -> Bool {
        guard a.id == b.id, a.version == b.version, a.relationships == b.relationships else { return false }
        // Snapshots of one entity share their names (and their order): compare the columns.
        if a.names == b.names { return (0..<a.names.count).allSatisfy { a.column($0) == b.column($0) } }
        return a.values == b.values
    }

    /// Hashes what == compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(version)
        // Independent of the order of the names, as == is.
        var values = 0
        for (i, n) in names.enumerated() { values ^= Hasher.hash(n, column(i)) }
        hasher.combine(values)
        hasher.combine(relationships)
    }

    /// `Article/7 {isRead: false, title: "…", category: Category/2}`: attributes and relationships by
    /// name.
    public var description: String {
        let parts =
            zip(names, columnArray).sorted { $0.0 < $1.0 }.map { "\($0.0): \($0.1)" }
            + relationships.keys.sorted().map { "\($0): \(relationships[$0].map(\.description) ?? "nil")" }
        return "\(id) {\(parts.joined(separator: ", "))}"
    }
}

/// The values of every row of one fetch, row after row: the snapshots of the fetch share it.
final class SharedRows: Sendable {
    let values: [Value]
    init(_ values: [Value]) { self.values = values }
}

extension Hasher {
    /// The hash of one name and value, for order-independent combinations.
    fileprivate static func hash(_ name: String, _ value: Value) -> Int {
        var h = Hasher()
        h.combine(name)
        h.combine(value)
        return h.finalize()
    }
}
