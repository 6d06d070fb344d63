import Foundation
import SharedStore
import Testing

/// A model cannot declare a property whose column would be one of SharedStore's own (Z_PK, Z_OPT,
/// Z_GID), in any case: SQLite compares column names without case (issue 21).
@Suite struct ReservedNameTests {
    @Test(arguments: ["Z_PK", "z_pk", "Z_Pk", "Z_OPT", "z_opt", "Z_GID", "z_gid", "Z_gId", "id", "objectID"])
    func aReservedPropertyNameIsRefusedWhateverItsCase(_ name: String) {
        for entity in [
            Entity("Thing", attributes: [Attribute(name, .string, optional: true)]),
            Entity(
                "Thing", attributes: [Attribute("title", .string)],
                relationships: [.toOne(name, "Other", inverse: "things")]),
        ] {
            let other = Entity("Other", attributes: [], relationships: [.toMany("things", "Thing", inverse: name)])
            do {
                _ = try Model([entity, other])
                Issue.record("a property named \(name) was accepted")
            } catch let error as StoreError {
                #expect(error.code == .invalidModel, "\(error)")
                #expect(error.message == "Thing.\(name) is not an allowed property name", "\(error)")
            } catch {
                Issue.record("\(error)")
            }
        }
    }

    @Test func namesThatOnlyLookLikeThemAreAccepted() throws {
        let model = try Model([
            Entity(
                "Thing",
                attributes: [Attribute("Z_PKX", .string, optional: true), Attribute("ID", .integer, optional: true)])
        ])
        let group = TemporaryGroup()
        let container = try group.open(model)
        let context = container.newContext()
        let id = try context.insert("Thing", ["Z_PKX": "kept", "ID": 7])
        let saved = try context.save().permanentID(for: id)
        #expect(try container.newContext().object(with: saved)["Z_PKX"] == "kept")
    }

    /// Found by review: names SQLite takes as one (it ignores case) are refused by the model, not
    /// by a failing CREATE TABLE when the store opens.
    @Test func namesThatDifferOnlyInCaseOrTakeTheStoresPrefixAreRefused() {
        let models: [(String, () throws -> Model)] = [
            ("SS_meta", { try Model([Entity("SS_meta", attributes: [Attribute("x", .integer)])]) }),
            ("Ss_history", { try Model([Entity("Ss_history", attributes: [Attribute("x", .integer)])]) }),
            (
                "Note/note",
                {
                    try Model([
                        Entity("Note", attributes: [Attribute("x", .integer)]),
                        Entity("note", attributes: [Attribute("y", .integer)]),
                    ])
                }
            ),
            (
                "title/Title",
                {
                    try Model([Entity("Note", attributes: [Attribute("title", .string), Attribute("Title", .string)])])
                }
            ),
        ]
        for (name, make) in models {
            do {
                _ = try make()
                Issue.record("\(name) was accepted")
            } catch let error as StoreError {
                #expect(error.code == .invalidModel, "\(name): \(error)")
            } catch {
                Issue.record("\(name): \(error)")
            }
        }
    }
}
