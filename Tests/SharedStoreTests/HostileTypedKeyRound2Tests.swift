import Foundation
import SharedStore
import Testing

// A second hostile review (issue 23): read-only properties, nested paths, wrappers, optionals of
// every type, class records whose key paths would trap, a time stamped at each encoding.

enum R2Kind: String, Codable, Sendable, CaseIterable, ValueConvertible { case x, y, z }

/// Two `let` properties of one enum type whose coding keys swap names.
struct R2LetSwap: Record {
    static let entityName = "R2LetSwap"
    var id: ObjectID?
    let a: R2Kind
    let b: R2Kind
    enum CodingKeys: String, CodingKey { case id, a = "b", b = "a" }
}

/// `let` values made in init(from:) from coded ones.
struct R2Derived: Record {
    static let entityName = "R2Derived"
    var id: ObjectID?
    var isRead: Bool
    var isStarred: Bool
    var low: Int
    let isUnread: Bool
    let lowPlusOne: Int
    let originalTitle: String
    var title: String
    enum CodingKeys: String, CodingKey { case id, isRead, isStarred, low, title }
    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decodeIfPresent(ObjectID.self, forKey: .id)
        isRead = try c.decode(Bool.self, forKey: .isRead)
        isStarred = try c.decode(Bool.self, forKey: .isStarred)
        low = try c.decode(Int.self, forKey: .low)
        title = try c.decode(String.self, forKey: .title)
        isUnread = !isRead
        lowPlusOne = low + 1
        originalTitle = title
    }
}

struct R2Point: Codable, Sendable, Hashable {
    var x: Float
    var kind: R2Kind
    var n: Int32
}

struct R2Nested: Record {
    static let entityName = "R2Nested"
    var id: ObjectID?
    var point: R2Point
}

/// A property wrapper that clamps an Int: it is stored as the Int.
@propertyWrapper struct R2Clamped: Codable, Sendable, Hashable {
    var value: Int
    var wrappedValue: Int {
        get { value }
        set { value = min(max(newValue, 0), 100) }
    }
    init(wrappedValue: Int) { value = min(max(wrappedValue, 0), 100) }
    init(from decoder: Decoder) throws { value = try decoder.singleValueContainer().decode(Int.self) }
    func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(value)
    }
}

struct R2Wrapped: Record {
    static let entityName = "R2Wrapped"
    var id: ObjectID?
    var title: String
    @R2Clamped var volume: Int
}

/// Optionals of every small type, and an optional of an optional.
struct R2Optionals: Record {
    static let entityName = "R2Optionals"
    var id: ObjectID?
    var f: Float?
    var i8: Int8?
    var i16: Int16?
    var u8: UInt8?
    var note: String??
}

/// A time written at each encoding, beside properties that are not coded.
struct R2Stamped: Record {
    static let entityName = "R2Stamped"
    var id: ObjectID?
    var title: String
    var uiMode: R2Kind = .x
    enum CodingKeys: String, CodingKey { case id, title, encodedAt }
    init(title: String) { self.title = title }
    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decodeIfPresent(ObjectID.self, forKey: .id)
        title = try c.decode(String.self, forKey: .title)
    }
    func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(id, forKey: .id)
        try c.encode(title, forKey: .title)
        try c.encode(Date(), forKey: .encodedAt)
    }
}

/// A class whose key paths could trap if they were evaluated on a probe.
final class R2Class: Record, @unchecked Sendable {
    static let entityName = "R2Class"
    var id: ObjectID?
    var title: String = ""
    var tags: [String] = []
    var stars: Int = 0 {
        didSet { precondition((0...5).contains(stars), "stars out of range") }
    }
    var cache: String? = nil
    enum CodingKeys: String, CodingKey { case id, title, tags, stars }
}

@Suite struct HostileTypedKeyRound2Tests {
    func path<R: Record, V>(_ k: KeyPath<R, V>) -> String { Key(k).path }

    @Test func readOnlyPropertiesNeverNameAnotherColumn() {
        // Swapped lets of one type cannot be told apart without writing them: refused.
        #expect(path(\R2LetSwap.a).hasPrefix("<") && path(\R2LetSwap.b).hasPrefix("<"))
        for p in [path(\R2Derived.isUnread), path(\R2Derived.lowPlusOne), path(\R2Derived.originalTitle)] {
            #expect(p.hasPrefix("<"), "\(p)")
        }
        #expect(path(\R2Derived.isRead) == "isRead" && path(\R2Derived.low) == "low")
    }

    @Test func pathsThroughANestedValueAreRefused() {
        for p in [path(\R2Nested.point.x), path(\R2Nested.point.kind), path(\R2Nested.point.n)] {
            #expect(p.contains("part of 'point'"), "\(p)")
        }
        #expect(path(\R2Nested.point) == "point")
    }

    @Test func aWrapperOfAScalarIsStoredAsTheScalarAndSortsAsOne() throws {
        let model = try Model(records: [R2Wrapped.self])
        #expect(model.entities[0].attribute(named: "volume")?.type == .integer)
        let context = try TemporaryGroup().open(model).newContext(author: "T")
        try context.batchInsert([R2Wrapped(title: "a", volume: 9), R2Wrapped(title: "b", volume: 10)])
        let sorted = try context.fetch(R2Wrapped.self, sortedBy: [Key("volume").descending]).map(\.volume)
        #expect(sorted == [10, 9])
    }

    @Test func optionalsOfEveryTypeAreOptionalAndClearOnUpdate() throws {
        let model = try Model(records: [R2Optionals.self])
        #expect(model.entities[0].attributes.allSatisfy { $0.isOptional })
        #expect(model.entities[0].attribute(named: "note")?.type == .string)
        let context = try TemporaryGroup().open(model).newContext(author: "T")
        _ = try context.insert(R2Optionals(f: 1.5, i8: 3, i16: 4, u8: 5, note: .some("hi")))
        try context.save()
        var back = try #require(try context.fetchOne(R2Optionals.self))
        #expect(back.note == .some("hi") && back.i8 == 3)
        back.i8 = nil
        back.f = nil
        try context.update(back)
        try context.save()
        let cleared = try #require(try context.fetchOne(R2Optionals.self))
        #expect(cleared.i8 == nil && cleared.f == nil && cleared.i16 == 4)
        #expect(path(\R2Optionals.i8) == "i8" && path(\R2Optionals.note) == "note")
    }

    @Test func aKeyThatChangesAtEveryEncodingSaysNothing() {
        #expect(path(\R2Stamped.title) == "title")
        #expect(path(\R2Stamped.uiMode).hasPrefix("<"))
    }

    @Test func aClassRecordsKeyPathsAreNotEvaluatedUnlessTheyNameOneProperty() {
        #expect(path(\R2Class.tags[0]).hasPrefix("<"))
        #expect(path(\R2Class.cache!).hasPrefix("<"))
        // An observed property is reached through its accessors: refused, never written.
        #expect(path(\R2Class.stars).hasPrefix("<") && path(\R2Class.title) == "title")
        #expect(path(\R2Class.cache).hasPrefix("<"))
    }

    @Test func theIdIsNotAnAttributeAndATypedKeySaysWhy() throws {
        #expect(path(\R2Optionals.id).contains("the object's id"))
        let context = try TemporaryGroup().open(try Model(records: [R2Optionals.self])).newContext(author: "T")
        #expect {
            try context.fetch(R2Optionals.self, where: Key(\R2Optionals.id) == Value.null)
        } throws: { error in
            "\(error)".hasPrefix("typed key: ") || "\(error)".contains("typed key: ")
        }
    }
}

// A third review: read-only swaps of different types, wrappers of optionals and enums, integers
// too large for SQLite.

/// Two `let` properties of different integer types whose coding keys swap names.
struct R3LetSwap: Record {
    static let entityName = "R3LetSwap"
    var id: ObjectID?
    let x: Int32
    let y: Int16
    enum CodingKeys: String, CodingKey { case id, x = "y", y = "x" }
}

/// The same in a class, with `var`s.
final class R3ClassSwap: Record, @unchecked Sendable {
    static let entityName = "R3ClassSwap"
    var id: ObjectID?
    var x: Int32 = 0
    var y: Int16 = 0
    enum CodingKeys: String, CodingKey { case id, x = "y", y = "x" }
}

@propertyWrapper struct R3Wrap<T: Codable & Sendable & Equatable>: Codable, Sendable, Equatable {
    var wrappedValue: T
    init(wrappedValue: T) { self.wrappedValue = wrappedValue }
    init(from decoder: Decoder) throws { wrappedValue = try decoder.singleValueContainer().decode(T.self) }
    func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(wrappedValue)
    }
}

struct R3Wrapped: Record {
    static let entityName = "R3Wrapped"
    var id: ObjectID?
    @R3Wrap var note: String?
    @R3Wrap var kind: R2Kind
    var big: UInt64
}

@Suite struct HostileTypedKeyRound3Tests {
    @Test func readOnlySwapsOfDifferentTypesAreRefused() {
        #expect(Key(\R3LetSwap.x).path.hasPrefix("<") && Key(\R3LetSwap.y).path.hasPrefix("<"))
        #expect(Key(\R3ClassSwap.x).path.hasPrefix("<") && Key(\R3ClassSwap.y).path.hasPrefix("<"))
    }

    @Test func wrappersOfOptionalsAndEnumsAreStoredAsTheirValue() throws {
        let model = try Model(records: [R3Wrapped.self])
        let e = try #require(model.entity(named: "R3Wrapped"))
        #expect(e.attribute(named: "note")?.type == .string && e.attribute(named: "note")?.isOptional == true)
        #expect(e.attribute(named: "kind")?.type == .string)
        let context = try TemporaryGroup().open(model).newContext(author: "T")
        _ = try context.insert(R3Wrapped(note: "w", kind: .y, big: 5))
        _ = try context.insert(R3Wrapped(note: nil, kind: .z, big: 6))
        try context.save()
        let back = try context.fetch(R3Wrapped.self, sortedBy: [Key("big").ascending])
        #expect(back.map(\.note) == ["w", nil] && back.map(\.kind) == [.y, .z])
        #expect(try context.count(R3Wrapped.self, where: Key("kind") == "y") == 1)
        // A wrapper is reached through accessors: its typed key says so.
        #expect(Key(\R3Wrapped.note).path.contains("reached through accessors"))
    }

    @Test func aHandWrittenDecodeOfAnOptionalReadsItsValue() throws {
        let context = try TemporaryGroup().open(try Model(records: [HKOptDecode.self])).newContext(author: "T")
        _ = try context.insert(HKOptDecode(note: "hello"))
        _ = try context.insert(HKOptDecode(note: nil))
        try context.save()
        #expect(Set(try context.fetch(HKOptDecode.self).map(\.note)) == ["hello", nil])
    }

    @Test func anIntegerTooLargeForSQLiteIsNamed() throws {
        let context = try TemporaryGroup().open(try Model(records: [R3Wrapped.self])).newContext(author: "T")
        #expect {
            _ = try context.insert(R3Wrapped(note: nil, kind: .x, big: UInt64.max))
        } throws: { error in
            "\(error)".contains("larger than the largest integer SQLite stores")
        }
    }
}
