import Foundation
import ReadLater
import SharedStore
import Testing

/// Issue 23, point 4: hooks and rules belong to the model, so every container opened with it
/// runs them, with nothing registered per process.
@Suite struct ModelHooksTests {
    @Test func aContainerRunsItsModelsHooksWithoutRegisteringThem() throws {
        let container = try TemporaryGroup().open()
        let context = container.newContext(author: "Plain")
        let before = Date()
        let id = try context.insert("Article", ["title": "T", "url": "https://a.example"])
        let saved = try context.save().permanentID(for: id)
        let createdAt = try #require(container.newContext().object(with: saved)["createdAt"].dateValue)
        #expect(createdAt >= before.addingTimeInterval(-1))
    }

    @Test func aModelsRuleIsEnforcedByEveryContainerOfIt() throws {
        let rule = ValidationRule("a read item has a title") { $0["isRead"] != true || $0["title"] != "" }
        let model = try Model(
            [Entity("Item", attributes: [Attribute("title", .string), Attribute("isRead", .bool, default: false)])],
            hooks: ["Item": EntityHooks(rules: [rule])])
        let group = TemporaryGroup()
        for container in [try group.open(model), try group.open(model)] {
            let context = container.newContext(author: "A")
            try context.insert("Item", ["title": "", "isRead": true])
            #expect {
                try context.save()
            } throws: { error in
                (error as? StoreError)?.validation?.rule == .objectRule("a read item has a title")
            }
        }
        // Hooks are code, not schema: the same schema with or without them is one model.
        let bare = try Model(
            [Entity("Item", attributes: [Attribute("title", .string), Attribute("isRead", .bool, default: false)])])
        #expect(bare == model)
    }

    @Test func hooksForAnEntityTheModelLacksAreRefused() {
        #expect {
            try Model([Entity("Item", attributes: [Attribute("title", .string)])], hooks: ["Itme": EntityHooks()])
        } throws: { error in
            (error as? StoreError)?.code == .invalidModel && "\(error)".contains("'Itme'")
        }
    }
}
