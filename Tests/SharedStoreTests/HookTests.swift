import Foundation
import SharedStore
import Synchronization
import Testing

/// Issue 13: validation over the whole object, and lifecycle events inside the save.
@Suite struct HookTests {
    static let model: Model = {
        do {
            return try Model([
                Entity(
                    "Task",
                    attributes: [
                        Attribute("title", .string), Attribute("start", .date, optional: true),
                        Attribute("due", .date, optional: true), Attribute("uid", .uuid),
                        Attribute("createdAt", .date), Attribute("edits", .integer, default: 0),
                        Attribute.derived("key", .string, .canonical("title")),
                    ])
            ])
        } catch {
            preconditionFailure("\(error)")
        }
    }()

    final class Log: Sendable {
        let lines = Mutex<[String]>([])
        func add(_ s: String) { lines.withLock { $0.append(s) } }
        var all: [String] { lines.withLock { $0 } }
    }

    func open(_ log: Log, failDelete: Bool = false) throws -> Container {
        let container = try TemporaryGroup().open(Self.model)
        try container.register(
            "Task",
            EntityHooks(
                awakeFromInsert: { draft in
                    try draft.set("uid", .uuid(UUID()))
                    try draft.set("createdAt", .date(Date(timeIntervalSince1970: 1000)))
                },
                willSave: { draft in
                    if !draft.isInserted { try draft.set("edits", .integer((draft["edits"].integerValue ?? 0) + 1)) }
                },
                rules: [
                    ValidationRule("due after start") { t in
                        guard let s = t["start"].dateValue, let d = t["due"].dateValue else { return true }
                        return d > s
                    },
                    ValidationRule("keep the pinned one", on: [.delete]) { $0["title"] != "pinned" },
                ],
                didSave: { log.add("didSave \($0["title"])") },
                prepareForDeletion: { t in
                    log.add("prepareForDeletion \(t["title"])")
                    if failDelete { throw StoreError(.validation, "not now") }
                },
                awakeFromFetch: { log.add("awakeFromFetch \($0["title"])") }))
        return container
    }

    @Test func lifecycleEventsRunInTheSaveAndRulesSeeTheWholeObject() throws {
        let log = Log()
        let container = try open(log)
        let c = container.newContext(author: "A")
        let id = try c.insert("Task", ["title": "write", "start": .date(Date(timeIntervalSince1970: 10))])
        let saved = try c.save()
        let task = try c.object(with: saved.permanentID(for: id))
        #expect(task["uid"].uuidValue != nil && task["createdAt"] == .date(Date(timeIntervalSince1970: 1000)))
        #expect(task["edits"] == 0 && task["key"] == "write")
        try c.update(task.id, ["title": "Write"])
        try c.save()
        #expect(try c.object(with: task.id)["edits"] == 1, "willSave changed the object it saved")
        // A rule over two properties: the error names the object and the rule; nothing is saved.
        let before = try container.currentToken()
        try c.update(task.id, ["due": .date(Date(timeIntervalSince1970: 5))])
        do {
            try c.save()
            Issue.record("a due date before the start was saved")
        } catch let error as StoreError {
            #expect(error.code == .validation)
            #expect(error.message == "\(task.id) breaks the rule 'due after start'", "\(error.message)")
        }
        #expect(try container.currentToken() == before, "no history either")
        c.rollback()
        #expect(log.all.contains("didSave \"write\"") && log.all.contains("awakeFromFetch \"Write\""))
    }

    @Test func aHookThatThrowsRollsTheWholeSaveBackHistoryIncluded() throws {
        let log = Log()
        let container = try open(log, failDelete: true)
        let c = container.newContext(author: "A")
        let a = try c.insert("Task", ["title": "a"])
        let b = try c.insert("Task", ["title": "pinned"])
        let saved = try c.save()
        let before = try container.currentToken()
        try c.update(saved.permanentID(for: a), ["title": "a2"])
        try c.delete(saved.permanentID(for: b))
        expectStoreError(.validation) { try c.save() }
        #expect(try container.currentToken() == before)
        #expect(try container.newContext().object(with: saved.permanentID(for: a))["title"] == "a")
        #expect(log.all.contains("prepareForDeletion \"pinned\""))
        c.rollback()
        // A delete rule of its own: the rule refuses the pinned task even when the hook allows it.
        let allowing = try open(Log())
        let d = allowing.newContext(author: "A")
        let pinned = try d.insert("Task", ["title": "pinned"])
        let id = try d.save().permanentID(for: pinned)
        try d.delete(id)
        do {
            try d.save()
            Issue.record("the pinned task was deleted")
        } catch let error as StoreError {
            #expect(error.message.contains("breaks the rule 'keep the pinned one'"), "\(error.message)")
        }
    }

    @Test func aHookCannotSetADerivedAttribute() throws {
        let container = try TemporaryGroup().open(Self.model)
        try container.register("Task", EntityHooks(willSave: { draft in try draft.set("key", "manual") }))
        let c = container.newContext(author: "A")
        try c.insert("Task", ["title": "x", "uid": .uuid(UUID()), "createdAt": .date(Date())])
        do {
            try c.save()
            Issue.record("a hook set a derived attribute")
        } catch let error as StoreError {
            #expect(error.message.contains("willSave") && error.message.contains("is derived"), "\(error.message)")
        }
    }
}
