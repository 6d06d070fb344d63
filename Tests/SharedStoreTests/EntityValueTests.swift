import Foundation
import SharedStore
import Testing

/// An entity keeps its fields in storage its copies share until one of them changes: each copy
/// is still a value of its own, and what a record's encoder and a save read of an entity (its
/// slots by name, its to-one relationships) follows every change of the copy that made it.
@Suite struct EntityValueTests {
    struct Note: Record, Equatable {
        static let entityName = "Note"
        var id: ObjectID?
        var text: String
        var pinned: Bool
        var folder: ObjectID?
    }

    func memory(_ entities: [Entity]) throws -> Container {
        var options = Container.Options()
        options.inMemory = true
        return try Container(group: "/unused", model: Model(version: 1, entities), options: options)
    }

    @Test func aCopyChangesAloneAndEqualsAnEntityBuiltTheSame() {
        let original = Entity("Note", attributes: [Attribute("text", .string)])
        var copy = original
        copy.attributes.append(Attribute("pinned", .bool, default: false))
        copy.indexes.append(Index("text"))
        #expect(original.attributes.map(\.name) == ["text"] && original.indexes.isEmpty)
        #expect(copy.attributes.map(\.name) == ["text", "pinned"] && copy.indexes.count == 1)
        #expect(original != copy)
        let built = Entity(
            "Note", attributes: [Attribute("text", .string), Attribute("pinned", .bool, default: false)],
            indexes: [Index("text")])
        #expect(built == copy && built.hashValue == copy.hashValue)
        var renamed = built
        renamed.name = "Memo"
        #expect(built.name == "Note" && renamed.name == "Memo" && renamed != built)
    }

    /// A record of the copy's properties is stored through a model of the copy (its slots and
    /// to-one relationships were made again when they changed), and refused by a model of the
    /// original, which has neither the attribute nor the relationship.
    @Test func whatASaveReadsOfAnEntityFollowsItsChanges() throws {
        let folder = Entity(
            "Folder", attributes: [Attribute("name", .string)],
            relationships: [.toMany("notes", "Note", inverse: "folder")])
        let original = Entity("Note", attributes: [Attribute("text", .string)])
        var changed = original
        changed.attributes.append(Attribute("pinned", .bool, default: false))
        changed.relationships = [.toOne("folder", "Folder", inverse: "notes")]
        let container = try memory([changed, folder])
        let context = container.newContext()
        let f = try context.insert("Folder", ["name": "inbox"])
        let id = try context.insert(Note(text: "hello", pinned: true, folder: nil))
        let result = try context.save()
        var note = try context.record(Note.self, with: result.permanentID(for: id))
        #expect(note.text == "hello" && note.pinned)
        note.folder = result.permanentID(for: f)
        try context.update(note)
        try context.save()
        #expect(try container.newContext().record(Note.self, with: try #require(note.id)).folder == note.folder)

        let plain = try memory([original])
        #expect(throws: StoreError.self) {
            try plain.newContext().insert(Note(text: "hello", pinned: true, folder: nil))
        }
    }
}
