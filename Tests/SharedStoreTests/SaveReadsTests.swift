import Foundation
import ReadLater
import SharedStore
import Testing

@testable import SharedStoreCore

/// What a save leaves a context read (from a hostile review): it keeps its other reads, and reads
/// what it changed as the save ends, however many times the save wrote it (an update, then a
/// count, a rule or a propagated value), so its own writes are never a conflict for the next save
/// and another context's are.
@Suite struct SaveReadsTests {
    static func articleValues(_ n: Int) -> [String: Value] {
        ["title": .string("t\(n)"), "url": .string("https://x.example/\(n)"), "createdAt": .date(Date())]
    }

    /// Setup: a category and an article in it; returns (container, category, article).
    static func readLater() throws -> (Container, ObjectID, ObjectID) {
        let container = try TemporaryGroup().open(ReadLater.model)
        let setup = container.newContext(author: "Setup")
        let c = try setup.insert("Category", ["label": "news"])
        let a = try setup.insert("Article", articleValues(0), relationships: ["category": c])
        let saved = try setup.save()
        return (container, saved.permanentID(for: c), saved.permanentID(for: a))
    }

    /// A context of `container` whose saves fail on any conflict (`.error`).
    static func strict(_ container: Container) -> ObjectContext {
        let context = container.newContext(author: "Mine")
        context.mergePolicy = .error
        return context
    }

    // MARK: - A save's own writes are no conflict

    /// A category whose label the save wrote and whose count it then changed (a second write of
    /// the row) is read as the save ended it.
    @Test func updateAndCountInOneSave() throws {
        let (container, cid, _) = try Self.readLater()
        let mine = Self.strict(container)
        _ = try mine.fetch(FetchRequest("Category"))
        try mine.update(cid, ["label": "world"])
        try mine.insert("Article", Self.articleValues(1), relationships: ["category": cid])
        try mine.save()
        try mine.update(cid, ["label": "again"])
        try mine.save()  // no conflict
    }

    /// An article the save updated and then nullified (its category deleted in the same save) is
    /// read as the save ended it.
    @Test func updateAndNullifyInOneSave() throws {
        let (container, cid, aid) = try Self.readLater()
        let mine = Self.strict(container)
        _ = try mine.fetch(FetchRequest("Article"))
        try mine.update(aid, ["title": "mine"])
        try mine.delete(cid)
        try mine.save()
        try mine.update(aid, ["title": "again"])
        try mine.save()  // no conflict
    }

    /// A note the save updated and then changed again by its folder's rename (a propagated value)
    /// is read as the save ended it.
    @Test func updateAndPropagateInOneSave() throws {
        let container = try TemporaryGroup().open(DerivedTests.model)
        let setup = container.newContext()
        let f = try setup.insert("Folder", ["name": "f"])
        let n = try setup.insert("Note", ["title": "n"], relationships: ["folder": f])
        let saved = try setup.save()
        let (fid, nid) = (saved.permanentID(for: f), saved.permanentID(for: n))
        let mine = container.newContext()
        mine.mergePolicy = .error
        try mine.update(nid, ["title": "n2"])
        try mine.update(fid, ["name": "g"])
        try mine.save()
        try mine.update(nid, ["title": "n3"])
        try mine.save()  // no conflict
    }

    /// A model with no derivations: a save knows what it wrote without reading it back.
    static let plain: Model = {
        do {
            return try Model([
                Entity(
                    "Item",
                    attributes: [
                        Attribute("title", .string), Attribute("at", .date, optional: true),
                        Attribute("score", .double, optional: true), Attribute("link", .url, optional: true),
                        Attribute("key", .uuid, optional: true), Attribute("flag", .bool, default: false),
                    ])
            ])
        } catch {
            preconditionFailure("\(error)")
        }
    }()

    /// Values whose stored form is not the value given (a date that the seconds from 1970 round,
    /// an integer kept as a double, a UUID kept lowercased) are read as stored, not as given. Under
    /// `.storeTrump`, where the store wins each property it changed since the read, the next save
    /// of them, after another context changed another property, writes them all: a read of the
    /// given values would take each for the store's change and keep the old one.
    @Test func valuesAreReadAsStoredNotAsGiven() throws {
        let container = try TemporaryGroup().open(Self.plain)
        let setup = container.newContext()
        let temp = try setup.insert("Item", ["title": "a"])
        let id = try setup.save().permanentID(for: temp)
        let given = Date(timeIntervalSinceReferenceDate: 0.1)
        #expect(Date(timeIntervalSince1970: given.timeIntervalSince1970) != given)
        let key = UUID()
        let mine = container.newContext(author: "Mine")
        mine.mergePolicy = .storeTrump
        try mine.update(
            id,
            [
                "at": .date(given), "score": .integer(3), "link": .string("https://x.example/a"),
                "key": .uuid(key), "flag": .bool(true),
            ])
        try mine.save()
        let other = container.newContext(author: "Other")
        try other.update(id, ["title": "theirs"])
        try other.save()
        let later: [String: Value] = [
            "at": .date(Date(timeIntervalSinceReferenceDate: 5)), "score": .double(1),
            "link": .string("https://x.example/b"), "key": .uuid(UUID()), "flag": .bool(false),
        ]
        try mine.update(id, later)
        try mine.save()
        let stored = try container.newContext().object(with: id)
        #expect(stored["title"] == .string("theirs"))
        for (name, value) in later { #expect(stored[name] == value, "\(name)") }
    }

    /// An object another context deleted and this save restored (object trump; history records an
    /// insert) is read as restored, not as read before.
    @Test func aRestoredObjectIsReadAsRestored() throws {
        let (container, _, aid) = try Self.readLater()
        let mine = container.newContext(author: "Mine")
        try mine.update(aid, ["title": "v2"])
        try mine.save()  // read: version 2
        let other = container.newContext(author: "Other")
        try other.delete(aid)
        try other.save()
        mine.mergePolicy = .objectTrump
        try mine.update(aid, ["title": "restored"])
        try mine.save()
        #expect(try container.newContext().object(with: aid)["title"] == "restored")
        mine.mergePolicy = .error
        try mine.update(aid, ["title": "after"])
        try mine.save()  // no conflict
    }

    static let ownerModel: Model = {
        do {
            return try Model([
                Entity(
                    "Person", attributes: [Attribute("name", .string)],
                    relationships: [.toMany("tags", "Tag", inverse: "owner")]),
                Entity(
                    "Tag",
                    attributes: [
                        Attribute("name", .string),
                        Attribute.derived("ownerName", .string, .related("owner", "name")),
                    ],
                    relationships: [.toOne("owner", "Person", inverse: "tags")], uniquenessConstraints: [["name"]]),
            ])
        } catch { preconditionFailure("\(error)") }
    }()

    /// An insert that became a stored Tag (object trump) and refers to a Person inserted later in
    /// the same save: the stored Tag's new owner is an update, in history (it was set without
    /// one, so observers and the mirror never saw it), and no conflict for the next save.
    @Test func aDuplicateTakingALaterReferenceIsAnUpdateInHistory() throws {
        let container = try TemporaryGroup().open(Self.ownerModel)
        let setup = container.newContext()
        let t = try setup.insert("Tag", ["name": "t"])
        let tid = try setup.save().permanentID(for: t)
        let mine = container.newContext()
        mine.mergePolicy = .objectTrump
        _ = try mine.object(with: tid)
        let dup = try mine.insert("Tag", ["name": "t"])
        let p = try mine.insert("Person", ["name": "p"])
        try mine.update(dup, [:], relationships: ["owner": p])
        let saved = try mine.save()
        #expect(saved.permanentID(for: dup) == tid)
        let stored = try container.newContext().object(with: tid)
        #expect(stored["ownerName"] == "p")
        // History: was the owner change of the stored tag recorded at all?
        #expect(saved.updatedCount >= 1, "the stored Tag changed (owner, ownerName) but no update was recorded")
        mine.mergePolicy = .error
        try mine.update(tid, ["name": "u"])
        try mine.save()  // no conflict
    }

    // MARK: - Another context's writes are a conflict

    /// A category the save changed only through its count, renamed by another context after the
    /// save: renaming it again is a conflict (it was read afresh, and the rename lost).
    @Test func anObjectTheSaveChangedByACountIsReadAsItEnded() throws {
        let (container, cid, _) = try Self.readLater()
        let mine = Self.strict(container)
        _ = try mine.fetch(FetchRequest("Category"))
        try mine.insert("Article", Self.articleValues(1), relationships: ["category": cid])
        try mine.save()
        let other = container.newContext(author: "Other")
        try other.update(cid, ["label": "theirs"])
        try other.save()
        try mine.update(cid, ["label": "mine"])
        expectStoreError(.conflict) { try mine.save() }
    }

    /// A record read before a save that nullified its object, whose title another context changed
    /// after the save: saving the record is a conflict, not a silent revert of that title.
    @Test func aRecordReadBeforeAnIndirectWriteIsStillTheBase() throws {
        let (container, cid, aid) = try Self.readLater()
        let mine = Self.strict(container)
        var record = try #require(try mine.fetch(ReadLater.Article.self).first { $0.id == aid })
        try mine.delete(cid)
        try mine.save()
        let other = container.newContext(author: "Other")
        try other.update(aid, ["title": "theirs"])
        try other.save()
        record.isRead = true
        record.category = nil
        try mine.update(record)
        var conflicted = false
        do { try mine.save() } catch let e as StoreError where e.code == .conflict { conflicted = true }
        let title = try container.newContext().object(with: aid)["title"]
        #expect(conflicted || title == "theirs", "title now \(title): the other context's change was lost")
    }

    /// Many-to-many links and a to-one `set`: no conflict for the next save.
    @Test func linksAndSetAreNoConflict() throws {
        let container = try TemporaryGroup().open(Fixtures.allTypes)
        let setup = container.newContext()
        let p = try setup.insert("Post", ["title": "p"])
        let t = try setup.insert("Topic", ["name": "t"])
        let f = try setup.insert("Folder", ["name": "f"])
        let n = try setup.insert("Note", ["text": "n"])
        let s = try setup.save()
        let (pid, tid, fid, nid) = (
            s.permanentID(for: p), s.permanentID(for: t), s.permanentID(for: f), s.permanentID(for: n)
        )
        let mine = container.newContext()
        mine.mergePolicy = .error
        for e in ["Post", "Topic", "Folder", "Note"] { _ = try mine.fetch(FetchRequest(e)) }
        try mine.relate(pid, "topics", to: tid)
        try mine.set("folder", of: nid, to: fid)
        try mine.update(pid, ["title": "p1"])
        try mine.save()
        try mine.update(pid, ["title": "p2"])
        try mine.update(tid, ["name": "t2"])
        try mine.update(fid, ["name": "f2"])
        try mine.update(nid, ["text": "n2"])
        try mine.save()
        try mine.unrelate(pid, "topics", from: tid)
        try mine.delete(fid)
        try mine.save()
        try mine.update(pid, ["title": "p3"])
        try mine.update(tid, ["name": "t3"])
        try mine.save()
        // Folder.notes cascades: the note went with its folder, and stays gone.
        expectStoreError(.objectNotFound) { try mine.update(nid, ["text": "n3"]) }
    }
}
