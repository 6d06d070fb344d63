import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// A position in a store's history: everything committed up to and including it.
///
/// Opaque, Codable and Comparable; prints as a short string (`42.<store-uuid-hex>`) that
/// ``init(parsing:)`` reads back. Tokens of different stores order by store first, so comparing
/// them is defined but meaningless: check ``storeID``.
public struct HistoryToken: Sendable, Hashable, Comparable, Codable, CustomStringConvertible, LosslessStringConvertible
{
    /// The store whose history the token is a position in (``Container/storeID``).
    public let storeID: UUID
    /// The transaction number: strictly increasing in commit order, never reused.
    public let value: Int64

    /// The token `value` of store `storeID`; a consumer normally gets tokens from the store
    /// (``Container/currentToken()``, a ``SaveResult``) or parses them (``init(parsing:)``).
    public init(storeID: UUID, value: Int64) {
        self.storeID = storeID
        self.value = value
    }

    /// Whether `a` comes before `b`: by ``value`` within one store. Tokens of two stores order by
    /// their store ids, which means nothing about their commits.
    public static func < (a: HistoryToken, b: HistoryToken) -> Bool {
        a.storeID == b.storeID ? a.value < b.value : a.storeID.uuidString < b.storeID.uuidString
    }

    /// The printed form, `42.<store-uuid-hex>` (32 lowercase hex digits, no dashes).
    public var description: String {
        "\(value).\(storeID.uuidString.lowercased().replacingOccurrences(of: "-", with: ""))"
    }

    /// Parses the printed form; nil where ``init(parsing:)`` throws.
    public init?(_ description: String) {
        guard let token = try? HistoryToken(parsing: description) else { return nil }
        self = token
    }

    /// Parses the printed form.
    ///
    /// - Throws: ``StoreError`` `.malformedToken` naming the text.
    public init(parsing text: String) throws {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[1].count == 32, parts[0].allSatisfy({ $0.isASCII && $0.isNumber }),
            let value = Int64(parts[0]), value >= 0,
            parts[1].allSatisfy({ $0.isHexDigit && $0.isASCII })
        else {
            throw StoreError(.malformedToken, "malformed token '\(text)': expected a token printed by SharedStore")
        }
        let h = Array(parts[1].lowercased())
        let dashed =
            String(h[0..<8]) + "-" + String(h[8..<12]) + "-" + String(h[12..<16]) + "-" + String(h[16..<20]) + "-"
            + String(h[20..<32])
        guard let uuid = UUID(uuidString: dashed) else {
            throw StoreError(.malformedToken, "malformed token '\(text)': bad store id")
        }
        self.init(storeID: uuid, value: value)
    }

    /// Decodes the printed form from a single string.
    ///
    /// - Throws: ``StoreError`` `.malformedToken` for anything else.
    public init(from decoder: Decoder) throws {
        try self.init(parsing: try decoder.singleValueContainer().decode(String.self))
    }

    /// Encodes the printed form as a single string.
    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }
}
