import Foundation
import SharedStoreSQLite
import SharedStoreSupport

extension HistoryTransaction {
    /// The transaction in the `storectl history` shape of shared/docs/CLI.md.
    public var json: JSONValue {
        .object([
            ("token", .string(token.description)),
            ("author", author.map(JSONValue.string) ?? .null),
            ("context", contextName.map(JSONValue.string) ?? .null),
            ("process", .number(Double(processID))),
            ("executable", .string(executable)),
            ("timestamp", .string(ISO8601.string(timestamp))),
            ("changes", .array(changes.map(\.json))),
        ])
    }
}

extension HistoryChange {
    /// The change in the `storectl history` shape: `type`, `id`, `gid`, `updated` and `tombstone`.
    public var json: JSONValue {
        .object([
            ("type", .string(kind.rawValue)),
            ("id", .string(objectID.description)),
            ("gid", globalID.map { .string($0.uuidString.lowercased()) } ?? .null),
            ("updated", .array(updatedProperties.map(JSONValue.string))),
            (
                "tombstone",
                tombstone.map { t in .object(t.keys.sorted().map { ($0, t[$0]?.jsonValue ?? .null) }) } ?? .null
            ),
        ])
    }
}
