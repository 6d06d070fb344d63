import Foundation
import ReadLater
import SharedStore
import Testing

// A hostile review's record types (issue 23): a typed key names the coding key its property
// feeds, or fails naming why; never another property's column.

enum HKKind: String, Codable, Sendable, CaseIterable, ValueConvertible { case x, y }

/// Two Float properties whose coding keys swap names.
struct HKSwapF: Record {
    static let entityName = "HKSwapF"
    var id: ObjectID?
    var a: Float
    var b: Float
    enum CodingKeys: String, CodingKey { case id, a = "b", b = "a" }
}

struct HKSwapURL: Record {
    static let entityName = "HKSwapURL"
    var id: ObjectID?
    var a: URL
    var b: URL
    enum CodingKeys: String, CodingKey { case id, a = "b", b = "a" }
}

struct HKSwapEnum: Record {
    static let entityName = "HKSwapEnum"
    var id: ObjectID?
    var a: HKKind
    var b: HKKind
    enum CodingKeys: String, CodingKey { case id, a = "b", b = "a" }
}

struct HKSwapI16: Record {
    static let entityName = "HKSwapI16"
    var id: ObjectID?
    var a: Int16
    var b: Int16
    enum CodingKeys: String, CodingKey { case id, a = "b", b = "a" }
}

/// A Float renamed onto another property's Swift name (not a swap: `rating` is stored as
/// `score`, `score` as `legacyScore`).
struct HKShift: Record {
    static let entityName = "HKShift"
    var id: ObjectID?
    var rating: Float
    var score: Float
    enum CodingKeys: String, CodingKey { case id, rating = "score", score = "legacyScore" }
}

/// One coded Bool, one transient Bool that defaults to true (not in the coding keys).
struct HKTransient: Record {
    static let entityName = "HKTransient"
    var id: ObjectID?
    var title: String
    var isRead: Bool
    var isExpanded: Bool = true
    enum CodingKeys: String, CodingKey { case id, title, isRead }
}

/// Three coded Bools, a transient one defaulting to true.
struct HKTransient3: Record {
    static let entityName = "HKTransient3"
    var id: ObjectID?
    var a: Bool, b: Bool, c: Bool
    var isSelected: Bool = true
    enum CodingKeys: String, CodingKey { case id, a, b, c }
}

/// A stored, non-coded property set from a coded one in init(from:).
struct HKCopy: Record {
    static let entityName = "HKCopy"
    var id: ObjectID?
    var title: String
    var displayTitle: String
    enum CodingKeys: String, CodingKey { case id, title }
    init(title: String) {
        self.title = title
        self.displayTitle = title
    }
    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decodeIfPresent(ObjectID.self, forKey: .id)
        title = try c.decode(String.self, forKey: .title)
        displayTitle = title
    }
    func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(id, forKey: .id)
        try c.encode(title, forKey: .title)
    }
}

/// A class record with a computed property that returns a stored one.
final class HKClass: Record, @unchecked Sendable {
    static let entityName = "HKClass"
    var id: ObjectID?
    var title: String
    var other: String
    var headline: String { title }
    init(title: String, other: String) {
        self.title = title
        self.other = other
    }
}

/// An init(from:) that validates: the probe's values are refused.
struct HKPercent: Record {
    static let entityName = "HKPercent"
    var id: ObjectID?
    var value: Int
    var label: String
    enum CodingKeys: String, CodingKey { case id, value, label }
    init(value: Int, label: String) {
        self.value = value
        self.label = label
    }
    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decodeIfPresent(ObjectID.self, forKey: .id)
        value = try c.decode(Int.self, forKey: .value)
        label = try c.decode(String.self, forKey: .label)
        guard (0...100).contains(value) else {
            throw DecodingError.dataCorruptedError(forKey: .value, in: c, debugDescription: "not a percentage")
        }
    }
}

/// Reads `title` twice.
struct HKTwice: Record {
    static let entityName = "HKTwice"
    var id: ObjectID?
    var title: String
    var slug: String
    enum CodingKeys: String, CodingKey { case id, title }
    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decodeIfPresent(ObjectID.self, forKey: .id)
        title = try c.decode(String.self, forKey: .title)
        slug = try c.decode(String.self, forKey: .title).lowercased()
    }
    func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(title, forKey: .title)
    }
}

/// An optional decoded with decode(String?.self), as hand-written decoders often do.
struct HKOptDecode: Record {
    static let entityName = "HKOptDecode"
    var id: ObjectID?
    var note: String?
    enum CodingKeys: String, CodingKey { case id, note }
    init(note: String?) { self.note = note }
    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decodeIfPresent(ObjectID.self, forKey: .id)
        note = try c.decode(String?.self, forKey: .note)
    }
}

/// A non-CaseIterable enum.
enum HKMood: String, Codable, Sendable { case happy, sad }

struct HKMoody: Record {
    static let entityName = "HKMoody"
    var id: ObjectID?
    var title: String
    var mood: HKMood
}

struct HKSwapRule: Record {
    static let entityName = "HKSwapRule"
    static let schema = RecordSchema<HKSwapRule>([.attribute(\.price, minValue: 0)])
    var id: ObjectID?
    var price: Float
    var discount: Float
    enum CodingKeys: String, CodingKey { case id, price = "discount", discount = "price" }
}

struct HKTransientIndex: Record {
    static let entityName = "HKTransientIndex"
    static let schema = RecordSchema<HKTransientIndex>([.index(\.isExpanded), .unique(\.isExpanded)])
    var id: ObjectID?
    var isRead: Bool
    var isExpanded: Bool = true
    enum CodingKeys: String, CodingKey { case id, isRead }
}

final class HKClassRule: Record, @unchecked Sendable {
    static let entityName = "HKClassRule"
    static let schema = RecordSchema<HKClassRule>([.attribute(\.headline, maxLength: 3)])
    var id: ObjectID?
    var title: String
    var headline: String { title }
    init(title: String) { self.title = title }
}

@Suite struct HostileTypedKeyTests {
    func path<R: Record, V>(_ k: KeyPath<R, V>) -> String { Key(k).path }

    @Test func swappedAndShiftedCodingKeysOfEveryTypeNameTheirOwnColumn() throws {
        #expect(path(\HKSwapF.a) == "b" && path(\HKSwapF.b) == "a")
        #expect(path(\HKSwapURL.a) == "b" && path(\HKSwapEnum.a) == "b" && path(\HKSwapI16.a) == "b")
        #expect(path(\HKShift.rating) == "score" && path(\HKShift.score) == "legacyScore")
        let context = try TemporaryGroup().open(try Model(records: [HKSwapF.self])).newContext(author: "T")
        try context.batchInsert([HKSwapF(a: 1, b: 2)])
        let hits = try context.fetch(HKSwapF.self, where: Key(\HKSwapF.a) == 1.0)
        #expect(hits.map(\.a) == [1])
    }

    @Test func propertiesThatAreNotCodedNameNoColumn() {
        for p in [
            path(\HKTransient.isExpanded), path(\HKTransient3.isSelected), path(\HKCopy.displayTitle),
            path(\HKTwice.slug), path(\HKClass.headline),
        ] {
            #expect(p.hasPrefix("<"), "\(p)")
        }
        #expect(path(\HKTransient.isRead) == "isRead" && path(\HKClass.title) == "title")
    }

    @Test func rulesLandOnTheirOwnPropertyOrRefuseTheModel() throws {
        let swapped = try Model(records: [HKSwapRule.self])
        // price is coded as discount: its rule is on the discount column.
        #expect(swapped.entities[0].attribute(named: "discount")?.minValue == 0)
        #expect(swapped.entities[0].attribute(named: "price")?.minValue == nil)
        #expect(throws: StoreError.self) { try Model(records: [HKTransientIndex.self]) }
        #expect(throws: StoreError.self) { try Model(records: [HKClassRule.self]) }
    }

    @Test func aTypeSharedStoreCannotReadIsRefusedNamingTheProperty() throws {
        #expect {
            try Model(records: [HKMoody.self])
        } throws: { error in
            "\(error)".contains("'mood'") && "\(error)".contains("CaseIterable")
        }
        #expect {
            try Model(records: [HKPercent.self])
        } throws: { error in
            "\(error)".contains("refused a value")
        }
        // decode(String?.self, forKey:) is an optional string.
        let a = try Model(records: [HKOptDecode.self]).entities[0].attributes[0]
        #expect(a.type == .string && a.isOptional)
        // A key read twice is one attribute.
        #expect(try Model(records: [HKTwice.self]).entities[0].attributes.map(\.name) == ["title"])
    }
}
