import Foundation
import ReadLater
import SharedStore
import Testing

/// Issue 23, point 3: models derived from record types, equal to the entity models of the same
/// schema, one store and one history between them, and migrations declared on the types.
@Suite struct TypesFirstModelTests {
    typealias Article = ReadLater.Records.Article
    typealias Category = ReadLater.Records.Category

    @Test func theTypesFirstReadLaterModelIsTheEntityModel() throws {
        let typed = ReadLater.Records.model
        let entities = try ReadLater.model(version: 3)
        #expect(typed == entities)
        #expect(typed.differences(from: entities) == [])
        // A difference is named, rules included (a store does not keep them).
        var looser = try ReadLater.model(version: 3).entities
        looser[0].attributes[0].maxLength = 80
        looser[1].attributes.removeLast()
        let other = try Model(version: 3, looser)
        #expect(
            typed.differences(from: other) == [
                "only this model: attribute Category.articleCount integer optional = count(articles)",
                "Article.title: rules minLength 1, maxLength 500, single line, preserved in history, the other "
                    + "minLength 1, maxLength 80, single line, preserved in history",
                "Article: hooks in one model only",
            ])
        for (a, b) in zip(typed.entities, entities.entities) {
            #expect(a == b, "\(a.name)")
            #expect(a.attributes == b.attributes, "\(a.name)")
            #expect(a.relationships == b.relationships, "\(a.name)")
        }
        // The model carries the type's hook: an article saved without a creation date gets one.
        #expect(typed.hooks.byEntity["Article"]?.awakeFromInsert != nil)
    }

    @Test func oneStoreAndOneHistoryServeBothModels() throws {
        let group = TemporaryGroup()
        let entityModel = try group.open(ReadLater.model)
        let typedModel = try group.open(ReadLater.Records.model)
        let a = entityModel.newContext(author: "EntityApp")
        let b = typedModel.newContext(author: "TypedApp")
        _ = try a.insert("Article", ["title": "From entities", "url": "https://e.example"])
        try a.save()
        var read = try #require(try b.fetchOne(Article.self, where: \Article.title == "From entities"))
        #expect(read.searchTitle == "from entities" && !read.isRead)
        read.isRead = true
        try b.update(read)
        _ = try b.insert(Article(title: "From types", url: "https://t.example"))
        try b.save()
        // Both saves are in the one history, each under its author.
        let authors = try entityModel.fetchHistory(HistoryRequest(after: nil)).map(\.author)
        #expect(authors == ["EntityApp", "TypedApp"])
        let rows = try entityModel.newContext().fetch(
            FetchRequest("Article", sortedBy: [Key(\Article.title).ascending]))
        #expect(rows.map { $0["title"] } == ["From entities", "From types"])
        #expect(rows.map { $0["isRead"] } == [true, false])
    }

    struct NoteV1: Record {
        static let entityName = "Note"
        static let schema = RecordSchema<NoteV1>([.attribute(\.text, minLength: 1)])
        var id: ObjectID?
        var text: String
    }

    /// Version 2: `text` is now `body` (declared on the type), `pinned` is new with a default.
    struct NoteV2: Record {
        static let entityName = "Note"
        static let schema = RecordSchema<NoteV2>([
            .attribute(\.body, minLength: 1, renamedFrom: "text"), .attribute(\.pinned, default: false),
        ])
        var id: ObjectID?
        var body: String
        var pinned: Bool
        var tag: String?
    }

    @Test func aTypesFirstModelMigratesARenameAndAnAddition() throws {
        let group = TemporaryGroup()
        let v1 = try group.open(try Model(version: 1, records: [NoteV1.self]))
        let context = v1.newContext(author: "V1")
        _ = try context.insert(NoteV1(text: "kept"))
        try context.save()
        let v2 = try group.open(try Model(version: 2, records: [NoteV2.self]), signal: false)
        let notes = try v2.newContext().fetch(NoteV2.self)
        #expect(notes.count == 1 && notes[0].body == "kept" && !notes[0].pinned && notes[0].tag == nil)
        #expect(throws: StoreError.self) { try v1.newContext().fetch(NoteV1.self) }
    }

    struct Untyped: Record {
        static let entityName = "Untyped"
        var id: ObjectID?
        var link: ObjectID?
    }
    enum Mood: String, Codable, Sendable { case calm, busy }
    struct Moody: Record {
        static let entityName = "Moody"
        var id: ObjectID?
        var mood: Mood
    }
    struct StrayRule: Record {
        static let entityName = "Stray"
        static let schema = RecordSchema<StrayRule>([.attribute(\.computed, minValue: 1)])
        var id: ObjectID?
        var stored: Int
        var computed: Int { stored + 1 }
    }

    @Test func whatATypeCannotSayIsRefusedNamingTheProperty() {
        #expect {
            try Model(records: [Untyped.self])
        } throws: { error in
            (error as? StoreError)?.code == .invalidModel && "\(error)".contains("link is an ObjectID")
        }
        #expect {
            try Model(records: [Moody.self])
        } throws: { error in
            (error as? StoreError)?.code == .invalidModel && "\(error)".contains("CaseIterable")
        }
        #expect {
            try Model(records: [StrayRule.self])
        } throws: { error in
            (error as? StoreError)?.code == .invalidModel && "\(error)".contains("computed")
        }
    }

    struct Everything: Record {
        static let entityName = "Everything"
        enum Level: Int, Codable, Sendable, CaseIterable { case low, high }
        struct Point: Codable, Sendable, Hashable { var x: Double, y: Double }
        var id: ObjectID?
        var s: String, i: Int, i64: Int64, i32: Int32, d: Double, f: Float, b: Bool
        var date: Date, data: Data, uuid: UUID, url: URL, decimal: Decimal
        var level: Level, point: Point, list: [String], optional: String?
    }

    @Test func theTypeMappingIsTheReferenceTable() throws {
        let model = try Model(records: [Everything.self])
        let e = try #require(model.entity(named: "Everything"))
        let types = Dictionary(uniqueKeysWithValues: e.attributes.map { ($0.name, $0.type) })
        #expect(
            types == [
                "s": .string, "i": .integer, "i64": .integer, "i32": .integer, "d": .double, "f": .double,
                "b": .bool, "date": .date, "data": .data, "uuid": .uuid, "url": .url, "decimal": .decimal,
                "level": .integer, "point": .json, "list": .json, "optional": .string,
            ])
        #expect(e.attributes.filter(\.isOptional).map(\.name) == ["optional"])
        // And the record round-trips through a store with that model.
        let container = try TemporaryGroup().open(model)
        let context = container.newContext(author: "T")
        let value = Everything(
            s: "s", i: -1, i64: 1 << 40, i32: 7, d: 0.5, f: 1.5, b: true, date: Date(timeIntervalSince1970: 5),
            data: Data([1, 2]), uuid: UUID(), url: URL(string: "https://u.example/a")!,
            decimal: Decimal(string: "1.25")!,
            level: .high, point: Everything.Point(x: 1, y: 2), list: ["a"], optional: nil)
        _ = try context.insert(value)
        try context.save()
        let back = try #require(try context.fetchOne(Everything.self, where: \Everything.level == .high))
        #expect(
            back.s == value.s && back.i64 == value.i64 && back.point == value.point && back.decimal == value.decimal)
        #expect(back.uuid == value.uuid && back.url == value.url && back.list == value.list && back.f == value.f)
    }
}

extension TypesFirstModelTests.Everything.Level: ValueConvertible {}

/// Rules on properties of any type, and what differences(from:) says of hooks.
@Suite struct TypesFirstRuleTests {
    struct Tagged: Record {
        static let entityName = "Tagged"
        static let schema = RecordSchema<Tagged>([
            .attribute(\.title, preservedInHistory: true), .attribute(\.tags, renamedFrom: "labels"),
            .attribute(\.small, default: 3),
        ])
        var id: ObjectID?
        var title: String
        var tags: [String]?
        var small: Int16
    }

    @Test func anyPropertyTakesHistoryAndRenameRulesAndSmallIntegersTakeDefaults() throws {
        let e = try #require(try Model(records: [Tagged.self]).entity(named: "Tagged"))
        #expect(e.attribute(named: "title")?.preservesValueInHistoryOnDeletion == true)
        #expect(e.attribute(named: "tags")?.renamedFrom == "labels" && e.attribute(named: "tags")?.type == .json)
        #expect(e.attribute(named: "small")?.defaultValue == .integer(3))
        #expect((\Tagged.small < Int16(4)) == (Key("small") < Value.integer(4)))
    }

    @Test func hookDifferencesAreNamed() throws {
        let entity = [Entity("N", attributes: [Attribute("title", .string)])]
        let a = try Model(
            entity, hooks: ["N": EntityHooks(rules: [ValidationRule("title is not empty") { _ in true }])])
        let b = try Model(entity, hooks: ["N": EntityHooks(willSave: { _ in })])
        #expect(a.differences(from: b) == ["N: hooks rule 'title is not empty', the other willSave"])
        #expect(a.differences(from: a).isEmpty)
    }

    struct One: Record {
        static let entityName = "Same"
        var id: ObjectID?
        var x: Int
    }
    struct Two: Record {
        static let entityName = "same"
        var id: ObjectID?
        var y: Int
    }

    @Test func twoTypesOfOneEntityAreNamed() {
        #expect {
            try Model(records: [One.self, Two.self])
        } throws: { error in
            "\(error)".contains("One and Two")
        }
    }
}
