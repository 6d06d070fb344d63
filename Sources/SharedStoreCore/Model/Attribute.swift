import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// The type of an attribute, mapped to a SQLite column.
///
/// `url`, `decimal` and `json` hold their values as ``Value/string(_:)``: an absolute URL, a
/// decimal number's exact text (`Decimal(string:)` reads it back; conditions compare the text),
/// and the JSON of a Codable value (a record's property of any `Codable` type). Each is checked
/// on save.
public enum AttributeType: String, Sendable, Hashable, Codable {
    /// `string` (TEXT), `integer` (a 64-bit INTEGER), `double` (REAL; an integer value is widened),
    /// `bool` (0 or 1), `date` (REAL seconds since 1970), `data` (BLOB), `uuid` (lowercased TEXT),
    /// `url` (an absolute URL), `decimal` (a number's exact text) and `json` (JSON text).
    case string, integer, double, bool, date, data, uuid, url, decimal, json
}

/// How a derived attribute is computed (Core Data's derived attributes): a stored column that
/// every save keeps up to date in its own transaction — saves of any process, batch operations
/// included. A save cannot set one.
public enum Derivation: Sendable, Hashable {
    /// How many objects a to-many relationship (with a to-one inverse) holds
    /// (`Category.articleCount`).
    case count(String)
    /// The sum of an attribute of the objects of a to-many relationship (with a to-one inverse).
    case sum(String, of: String)
    /// An attribute of the object a to-one relationship points at (`Article.categoryName`), nil
    /// without one.
    case related(String, String)
    /// The time of the save that last wrote the object (`updatedAt`).
    case now
    /// A string attribute lowercased with its diacritics removed (`Article.searchTitle`), for
    /// searching and sorting with an index.
    case canonical(String)

    /// A fixed text of the derivation, part of the stored schema.
    var text: String {
        switch self {
        case .count(let r): return "count(\(r))"
        case .sum(let r, let a): return "sum(\(r).\(a))"
        case .related(let r, let a): return "\(r).\(a)"
        case .now: return "now()"
        case .canonical(let a): return "canonical(\(a))"
        }
    }
}

/// An attribute of an entity, with its validation rules.
public struct Attribute: Sendable, Hashable {
    /// The attribute's name: a plain ASCII identifier of at most 64 characters, unique in its entity
    /// and none of `Z_PK`, `Z_OPT`, `id` or `objectID` (``Model/init(version:_:hooks:)`` checks it). It is
    /// the column's name.
    public var name: String
    /// What values the attribute holds; a save of a value of another type fails with `.validation`.
    public var type: AttributeType
    /// Whether the attribute may hold ``Value/null``; a save that leaves a required attribute nil
    /// (and it has no ``defaultValue``) fails with `.validation` ("… is required").
    public var isOptional: Bool
    /// The value an insert gets when it does not set the attribute (``Value/null``: none). A
    /// migration that adds the attribute gives it to the existing objects.
    public var defaultValue: Value
    /// The least number of characters a string value may have (checked on save).
    public var minLength: Int?
    /// The most characters a string value may have (checked on save).
    public var maxLength: Int?
    /// A regular expression the whole string must match.
    public var pattern: String?
    /// The smallest number an integer or double value may be (checked on save).
    public var minValue: Double?
    /// The largest number an integer or double value may be (checked on save).
    public var maxValue: Double?
    /// Keep the value in the history tombstone when the object is deleted.
    public var preservesValueInHistoryOnDeletion: Bool
    /// Reject strings holding control characters (C0, DEL, C1) other than a tab: for single-line
    /// text such as a title or a name, which must not carry a newline or a terminal escape.
    public var isSingleLine: Bool
    /// The name this attribute had in the model version before (Core Data's renaming
    /// identifier): a migration renames the column and history shows the new name.
    public var renamedFrom: String?
    /// Set for a derived attribute (``derived(_:_:_:)``): computed by every save, never set by one.
    public var derivation: Derivation?

    /// A derived attribute: stored, fetched, sorted and indexed like any other, computed by the
    /// save. `count` and `sum` are integers or doubles, `now` a date, `canonical` a string,
    /// `related` the type of the attribute it copies.
    public static func derived(_ name: String, _ type: AttributeType, _ derivation: Derivation) -> Attribute {
        var a = Attribute(name, type, optional: true)
        a.derivation = derivation
        return a
    }

    /// Whether the attribute is derived (has a ``derivation``): the save computes it.
    public var isDerived: Bool { derivation != nil }

    /// What a `canonical` derived attribute holds for `text`: lowercased, diacritics removed
    /// (to search it with the same folding).
    public static func canonical(_ text: String) -> String { DerivationMap.canonical(text) }

    /// An attribute named `name` holding values of `type`, with the rules a save checks.
    ///
    /// For example:
    /// ```swift
    /// Attribute("title", .string, minLength: 1, maxLength: 500, singleLine: true, preservedInHistory: true)
    /// Attribute("isRead", .bool, default: false)
    /// Attribute("label", .string, renamedFrom: "name")      // version 2 renames `name`
    /// ```
    ///
    /// - Parameters:
    ///   - name: the attribute's name (``name``).
    ///   - type: the type of its values.
    ///   - optional: whether nil is allowed (required by default).
    ///   - defaultValue: what an insert that leaves the attribute out gets.
    ///   - minLength: the least number of characters of a string.
    ///   - maxLength: the most characters of a string.
    ///   - pattern: a regular expression (NSRegularExpression syntax) the whole string must match.
    ///   - minValue: the smallest number allowed.
    ///   - maxValue: the largest number allowed.
    ///   - singleLine: refuse control characters other than a tab (``isSingleLine``).
    ///   - preservedInHistory: keep the value in the delete's history record
    ///     (``preservesValueInHistoryOnDeletion``).
    ///   - renamedFrom: the name in the previous model version (``renamedFrom``).
    ///
    /// Nothing is checked here: ``Model/init(version:_:hooks:)`` checks the name, the pattern and that the
    /// default has the attribute's type.
    public init(
        _ name: String, _ type: AttributeType, optional: Bool = false, default defaultValue: Value = .null,
        minLength: Int? = nil, maxLength: Int? = nil, pattern: String? = nil,
        minValue: Double? = nil, maxValue: Double? = nil, singleLine: Bool = false, preservedInHistory: Bool = false,
        renamedFrom: String? = nil
    ) {
        self.renamedFrom = renamedFrom
        self.isSingleLine = singleLine
        self.name = name
        self.type = type
        self.isOptional = optional
        self.defaultValue = defaultValue
        self.minLength = minLength
        self.maxLength = maxLength
        self.pattern = pattern
        self.minValue = minValue
        self.maxValue = maxValue
        self.preservesValueInHistoryOnDeletion = preservedInHistory
    }
}
