import Foundation
import ReadLater
import SharedStore
import SharedStoreMirror
import SharedStorePostgres
import Testing

/// Errors carry what a caller needs in a typed form, besides their code and message (issue 21):
/// a uniqueness conflict names the constraint, the values and the existing object; a validation
/// error the object, the property and the rule; a mirror error whether the server is
/// unreachable, the model newer or a row bad.
@Suite struct ErrorDetailsTests {
    /// The error `body` throws, which must be a store error of `code`.
    func storeError(_ code: StoreError.Code, _ body: () throws -> Void) -> StoreError? {
        do {
            try body()
            Issue.record("expected StoreError .\(code), nothing was thrown")
        } catch let error as StoreError {
            #expect(error.code == code, "got .\(error.code): \(error.message)")
            return error
        } catch {
            Issue.record("expected StoreError .\(code), got \(error)")
        }
        return nil
    }

    // MARK: - Uniqueness

    @Test func anInsertThatRepeatsACompoundKeyNamesTheConstraintTheValuesAndTheStoredObject() throws {
        let group = TemporaryGroup()
        let container = try group.open(Fixtures.allTypes)
        let first = container.newContext()
        let seat = try first.insert("Seat", ["row": "A", "number": 7])
        let stored = try first.save().permanentID(for: seat)
        let second = container.newContext()  // merge policy .error: a repeated key fails
        let again = try second.insert("Seat", ["row": "A", "number": 7])
        let error = storeError(.uniqueness) { try second.save() }
        #expect(error?.message.contains("another object already has the same Seat.row, Seat.number") == true)
        #expect(
            error?.uniqueness
                == UniquenessConflict(
                    entity: "Seat", constraint: ["row", "number"], values: [.string("A"), .integer(7)],
                    existing: stored, object: again.description))
        #expect(error?.validation == nil)
    }

    @Test func anUpdateThatTakesAnotherObjectsKeyNamesThatObject() throws {
        let group = TemporaryGroup()
        let container = try group.open(Fixtures.allTypes)
        let context = container.newContext()
        let swift = try context.insert("Tag", ["name": "swift"])
        let rust = try context.insert("Tag", ["name": "rust"])
        let saved = try context.save()
        let (swiftID, rustID) = (saved.permanentID(for: swift), saved.permanentID(for: rust))
        let editor = container.newContext()
        try editor.update(rustID, ["name": "swift"])
        let conflict = storeError(.uniqueness) { try editor.save() }?.uniqueness
        #expect(conflict?.constraint == ["name"] && conflict?.values == [.string("swift")])
        #expect(conflict?.existing == swiftID, "the stored object that holds the value")
        #expect(conflict?.object == rustID.description)
    }

    @Test func aConflictWithAnObjectOfTheSameSaveNamesNoStoredObject() throws {
        let group = TemporaryGroup()
        let container = try group.open(Fixtures.allTypes)
        let context = container.newContext()
        _ = try context.insert("Tag", ["name": "twice"])
        _ = try context.insert("Tag", ["name": "twice"])
        let conflict = storeError(.uniqueness) { try context.save() }?.uniqueness
        #expect(conflict?.values == [.string("twice")])
        #expect(conflict != nil && conflict?.existing == nil, "the other one goes with the rollback")
    }

    /// Found by review: two stored objects updated to one value in one save. The first one
    /// holds the value only inside the save (which rolls back): it is no stored object holding it.
    @Test func aConflictWithAnObjectUpdatedInTheSameSaveNamesNoStoredObject() throws {
        let group = TemporaryGroup()
        let container = try group.open(Fixtures.allTypes)
        let setUp = container.newContext()
        let b = try setUp.insert("Tag", ["name": "b"])
        let c = try setUp.insert("Tag", ["name": "c"])
        let ids = try setUp.save()
        let context = container.newContext()
        try context.update(ids.permanentID(for: b), ["name": "z"])
        try context.update(ids.permanentID(for: c), ["name": "z"])
        let conflict = storeError(.uniqueness) { try context.save() }?.uniqueness
        #expect(conflict != nil && conflict?.existing == nil, "no stored object holds z")
        let batch = storeError(.uniqueness) {
            _ = try container.newContext().batchUpdate("Tag", where: .always, set: ["name": "z"])
        }
        #expect(batch?.uniqueness != nil && batch?.uniqueness?.existing == nil, "batch: no stored object holds z")
        let names = try container.newContext().fetch(FetchRequest("Tag")).map { $0["name"] }
        #expect(Set(names) == [.string("b"), .string("c")])
        // The stored holder touched on another property in the same save is still the holder.
        let other = container.newContext()
        try other.update(ids.permanentID(for: b), ["color": "red"])
        try other.update(ids.permanentID(for: c), ["name": "b"])
        #expect(storeError(.uniqueness) { try other.save() }?.uniqueness?.existing == ids.permanentID(for: b))
        let both = storeError(.uniqueness) {
            _ = try container.newContext().batchUpdate("Tag", where: .always, set: ["name": "b", "color": "red"])
        }
        #expect(both?.uniqueness?.existing == ids.permanentID(for: b), "batch: the Tag that held the name before")
    }

    // MARK: - Validation

    @Test func eachRuleOfAnAttributeIsNamedWithTheObjectAndTheProperty() throws {
        let group = TemporaryGroup()
        let container = try group.open(Fixtures.allTypes)
        let cases: [(values: [String: Value], property: String, rule: ValidationFailure.Rule, says: String)] = [
            (["code": "TOOLONG"], "code", .maxLength(4), "is 7 characters long, at most 4 allowed"),
            (["code": "A"], "code", .minLength(2), "at least 2 required"),
            (["code": "ab1"], "code", .pattern("[A-Z]+"), "does not match the pattern [A-Z]+"),
            (["score": 11], "score", .maxValue(10), "at most 10.0 allowed"),
            (["score": -1], "score", .minValue(0), "at least 0.0 required"),
            (["i": "seven"], "i", .type(.integer), "takes an integer"),
            (["d": .double(.infinity)], "d", .finiteNumber, "is not a finite number"),
        ]
        for c in cases {
            let error = storeError(.validation) { try container.validate("Thing", c.values, object: "new Thing") }
            #expect(
                error?.validation == ValidationFailure(object: "new Thing", property: c.property, rule: c.rule),
                "\(c.values)")
            #expect(error?.message == "new Thing.\(c.property) \(c.says)" || error?.message.contains(c.says) == true)
            #expect(error?.uniqueness == nil)
        }
        let missing = storeError(.validation) { try container.validate("Folder", [:], object: "new Folder") }
        #expect(missing?.message == "new Folder.name is required")
        #expect(missing?.validation == ValidationFailure(object: "new Folder", property: "name", rule: .required))
    }

    @Test func aSaveNamesTheObjectItsRuleAndAHookThatFailed() throws {
        let group = TemporaryGroup()
        let container = try group.open(Fixtures.allTypes)
        struct Refused: Error {}
        try container.register(
            "Folder",
            EntityHooks(rules: [ValidationRule("named") { !($0["name"].stringValue ?? "").isEmpty }]))
        try container.register("Pin", EntityHooks(willSave: { _ in throw Refused() }))
        let context = container.newContext()
        let folder = try context.insert("Folder", ["name": ""])
        let broken = storeError(.validation) { try context.save() }
        #expect(broken?.validation?.rule == .objectRule("named") && broken?.validation?.property == nil)
        #expect(broken?.validation?.object == broken?.message.components(separatedBy: " breaks").first)
        context.rollback()
        _ = folder
        _ = try context.insert("Pin", ["x": 1])
        let hook = storeError(.validation) { try context.save() }
        #expect(hook?.validation?.rule == .hook("willSave"))
        #expect(hook?.message.contains("willSave failed") == true)
    }

    @Test func aRelationshipToTheWrongEntityNamesTheDestination() throws {
        let group = TemporaryGroup()
        let container = try group.open(Fixtures.allTypes)
        let context = container.newContext()
        let tag = try context.insert("Tag", ["name": "t"])
        let error = storeError(.validation) {
            _ = try context.insert("Note", ["text": "n"], relationships: ["folder": tag])
        }
        #expect(
            error?.validation == ValidationFailure(object: "Note", property: "folder", rule: .destination("Folder")))
    }

    @Test func aRecordThatCannotReadAnObjectNamesIt() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let context = container.newContext()
        let id = try context.insert("Category", ["label": "Swift"])
        let saved = try context.save().permanentID(for: id)
        struct NotACategory: Record {
            static let entityName = "Category"
            var id: ObjectID?
            var missing: String
        }
        let snapshot = try container.newContext().object(with: saved)
        let error = storeError(.validation) { _ = try NotACategory(snapshot: snapshot) }
        #expect(error?.validation?.object == saved.description)
        #expect(error?.validation?.property == "missing" && error?.validation?.rule == .record)
    }

    @Test func aDerivedAttributeSetByHandIsNamed() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let context = container.newContext()
        let error = storeError(.validation) {
            _ = try context.insert("Article", ["title": "t", "url": "https://x.example", "searchTitle": "t"])
        }
        #expect(error?.validation?.property == "searchTitle" && error?.validation?.rule == .derived)
    }

    // MARK: - Mirror

    @Test func aMalformedServerRowIsABadRowWithItsSequence() {
        do {
            _ = try MirrorPayload.decode("not json", sequence: 41)
            Issue.record("decoded a row that is not JSON")
        } catch {
            // The problem says where the text stops being JSON.
            #expect(
                MirrorError.reason(of: error)
                    == .badRow(sequence: 41, problem: "not a JSON object (not JSON at byte 0: not 'null')"))
            #expect((error as? MirrorError)?.code == .malformedRow)
            #expect(
                "\(error)" == "server transaction 41 is malformed: not a JSON object (not JSON at byte 0: not 'null')")
        }
    }

    /// A change that cannot be read names its entity and global id, and what it lacks (a
    /// hostile review saw "change kind 'u'" for a change that lacked its relationships).
    @Test(arguments: [
        (#"{"k":"u","e":"Article","g":"G","a":{}}"#, #"lacks its to-one relationships ("r", an object)"#),
        (#"{"k":"u","e":"Article","g":"G","r":{}}"#, #"lacks its attributes ("a", an object)"#),
        (
            #"{"k":"x","e":"Article","g":"G","a":{},"r":{}}"#,
            "is of kind 'x', none of u (upsert), d (delete), m (merge)"
        ),
    ])
    func aMalformedChangeNamesItsObjectAndWhatItLacks(change: String, problem: String) {
        let gid = "01a2411f-0000-7000-8000-000000000abc"
        let payload =
            #"{"v":1,"model":3,"changes":["# + change.replacingOccurrences(of: "\"G\"", with: "\"\(gid)\"") + "]}"
        do {
            _ = try MirrorPayload.decode(payload, sequence: 7)
            Issue.record("decoded a malformed change")
        } catch {
            #expect(
                MirrorError.reason(of: error)
                    == .badRow(sequence: 7, problem: "the change of Article \(gid) \(problem)"))
        }
    }

    @Test func aServerThatCannotBeReachedIsUnreachable() {
        do {
            _ = try PostgresConnection("host=/nonexistent-sharedstore connect_timeout=2")
            Issue.record("connected to nothing")
        } catch {
            guard case .serverUnreachable(let words)? = MirrorError.reason(of: error) else {
                Issue.record("not unreachable: \(error)")
                return
            }
            #expect(!words.isEmpty && "\(error)".contains(words))
        }
        let refused = PostgresError(sqlState: "23505", message: "duplicate key")
        #expect(MirrorError.reason(of: refused) == nil, "a statement the server refused is no unreachable server")
        #expect(MirrorError.reason(of: StoreError(.busy, "busy")) == nil)
    }
}

/// The mirror's typed failures against a real server (PGHOST).
@Suite(
    .enabled(if: ProcessInfo.processInfo.environment["PGHOST"] != nil, "no PostgreSQL server (PGHOST)"),
    .tags(.postgres))
struct MirrorErrorDetailsTests {
    @Test(.tags(.multiProcess)) func aSecondMirrorNamesTheProcessThatHoldsTheStore() throws {
        let db = try MirrorTests.Database()
        let a = MirrorTests.Machine(db)
        _ = try #require(a.container)
        let follower = try Child(
            "storectl", ["mirror", "--follow", "--group", a.group.path, "--json"], environment: db.environment)
        defer { kill(follower.process.processIdentifier, SIGKILL) }
        try follower.waitForLine { json($0)["lag"] != nil }
        do {
            _ = try a.mirror()
            Issue.record("two mirrors on one store")
        } catch {
            guard case .busy(let holder)? = MirrorError.reason(of: error) else {
                Issue.record("not busy: \(error)")
                return
            }
            #expect(holder.contains("\(follower.process.processIdentifier)") && "\(error)".contains(holder))
        }
    }

    /// Found by review: a bad row is quarantined, and a round does not throw; its typed error
    /// comes with the round.
    @Test func aBadServerRowComesWithTheRoundAsABadRowWithItsSequence() throws {
        let db = try MirrorTests.Database()
        let a = MirrorTests.Machine(db)
        let mirror = try a.mirror()
        _ = try mirror.round()
        let sequence = try MirrorQuarantineTests.plant(db, payload: "not json")
        let round = try mirror.round()
        #expect(round.badRows.count == 1)
        #expect(round.badRows.first?.code == .malformedRow)
        guard case .badRow(let at, let problem)? = round.badRows.first?.reason else {
            Issue.record("no bad row: \(round.badRows)")
            return
        }
        #expect(at == sequence)
        #expect(
            problem == "not a JSON object (not JSON at byte 0: not 'null')",
            "as MirrorPayload.decode says it: \(problem)")
    }

    @Test func aRowOfANewerModelNamesItsSequenceAndBothModels() throws {
        let db = try MirrorTests.Database()
        let a = MirrorTests.Machine(db)
        let mirror = try a.mirror()
        _ = try mirror.round()
        let newer = ReadLater.model.version + 1
        let sequence = try MirrorQuarantineTests.plant(db, payload: #"{"v":1,"model":\#(newer),"changes":[]}"#)
        do {
            _ = try mirror.round()
            Issue.record("pulled past a row of a newer model")
        } catch {
            #expect(
                MirrorError.reason(of: error)
                    == .newerModel(sequence: sequence, rowModel: newer, appModel: ReadLater.model.version))
            #expect((error as? MirrorError)?.code == .newerModel)
        }
    }
}
