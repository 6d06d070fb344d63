import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// A Sendable value copy of one object as it was read: attributes, to-one relationships and the
/// version the store had (bumped by every save of the object).
public struct Snapshot: Sendable, Hashable, CustomStringConvertible {
    public let id: ObjectID
    public let version: Int64
    public var values: [String: Value]
    /// To-one relationships that are set; an absent key means nil.
    public var relationships: [String: ObjectID]

    public init(id: ObjectID, version: Int64, values: [String: Value], relationships: [String: ObjectID]) {
        self.id = id
        self.version = version
        self.values = values
        self.relationships = relationships
    }

    public subscript(_ name: String) -> Value { values[name] ?? .null }

    public var description: String {
        let parts =
            values.keys.sorted().map { "\($0): \(values[$0] ?? .null)" }
            + relationships.keys.sorted().map { "\($0): \(relationships[$0].map(\.description) ?? "nil")" }
        return "\(id) {\(parts.joined(separator: ", "))}"
    }
}
