import Foundation
import ReadLater
import SharedStore
import Testing

/// Hostile review 23: update(record) of an object another writer deleted.
@Suite(.timeLimit(.minutes(2))) struct Hostile23UpdateDeletedTests {
    typealias Article = ReadLater.Records.Article
    typealias Category = ReadLater.Records.Category

    /// An entity with a cross-property rule and a willSave hook.
    static let seen = Protected<[String]>([])
    static let ruleModel: Model = {
        let hooks = EntityHooks(
            willSave: { draft in
                // Normalizes: names are stored upper-cased.
                if let s = draft["name"].stringValue, s != s.uppercased() {
                    try draft.set("name", .string(s.uppercased()))
                }
            },
            rules: [
                ValidationRule("due comes after start") { o in
                    guard let s = o["start"].integerValue, let d = o["due"].integerValue else { return true }
                    return d > s
                }
            ],
            didSave: { snap in Hostile23UpdateDeletedTests.seen.withLock { $0.append("didSave \(snap.id)") } })
        return try! Model(
            [
                Entity(
                    "Task",
                    attributes: [
                        Attribute("name", .string), Attribute("start", .integer), Attribute("due", .integer),
                    ])
            ], hooks: ["Task": hooks])
    }()

    struct TaskRecord: Record {
        static let entityName = "Task"
        var id: ObjectID?
        var name: String
        var start: Int
        var due: Int
    }

    /// The rule and willSave hold for an update of a live object; they must hold the same for a
    /// record whose object is restored under object trump.
    @Test(arguments: [MergePolicy.objectTrump, .overwrite])
    func restoreBypassesRulesAndWillSave(policy: MergePolicy) throws {
        let container = try TemporaryGroup().open(Self.ruleModel)
        let a = container.newContext(author: "A")
        try a.insert(TaskRecord(name: "X", start: 1, due: 5))
        try a.insert(TaskRecord(name: "Y", start: 1, due: 5))
        try a.save()
        var records = try container.newContext().fetch(TaskRecord.self, sortedBy: [.ascending(\TaskRecord.name)])
        // Live object: the rule refuses the update.
        let live = container.newContext(author: "L")
        live.mergePolicy = policy
        records[1].due = 0
        try live.update(records[1])
        let liveError = Result { try live.save() }
        // Deleted object: another writer deletes X; the record breaks the rule and has a lower-case name.
        let other = container.newContext(author: "O")
        try other.delete(records[0].id!)
        try other.save()
        Self.seen.withLock { $0 = [] }
        let b = container.newContext(author: "B")
        b.mergePolicy = policy
        records[0].due = 0
        records[0].name = "lower"
        try b.update(records[0])
        let restoreResult = Result { try b.save() }
        let back = try container.newContext().fetch(TaskRecord.self)
        if case .success = liveError { Issue.record("the live update broke the rule and was saved") }
        if case .success = restoreResult {
            #expect(back.allSatisfy { $0.due > $0.start }, "a restored object breaks the rule: \(back)")
            #expect(back.allSatisfy { $0.name == $0.name.uppercased() }, "willSave did not run on restore: \(back)")
            #expect(Self.seen.withLock { $0 }.count == 1, "didSave not called for the restored object")
        }
    }

    /// Restore of a ReadLater article: values, derived searchTitle, kept counts, category count,
    /// history.
    @Test func restoreArticleDerivedAndCounts() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let a = container.newContext(author: "A")
        try a.insert(Category(name: "cat"))
        try a.save()
        let cat = try a.fetchOne(Category.self)!.id!
        try a.insert(Article(title: "Élan", url: "https://x.example/1", isRead: true, category: cat))
        try a.insert(Article(title: "Other", url: "https://x.example/2", isRead: false, category: cat))
        try a.save()
        var rec = try container.newContext().fetchOne(Article.self, where: \Article.title == "Élan")!
        let other = container.newContext(author: "O")
        try other.delete(rec.id!)
        try other.save()
        let b = container.newContext(author: "B")
        b.mergePolicy = .objectTrump
        rec.title = "Ça Va"
        rec.isRead = false
        try b.update(rec)
        try b.save()
        let c = container.newContext()
        let back = try c.record(Article.self, with: rec.id!)
        #expect(back.title == "Ça Va")
        #expect(back.searchTitle == "ca va", "searchTitle: \(String(describing: back.searchTitle))")
        #expect(back.isRead == false)
        #expect(back.url == "https://x.example/1")
        #expect(back.category == cat)
        #expect(try c.count(Article.self) == 2)
        #expect(try c.count(Article.self, where: \Article.isRead == false) == 2, "kept unread count")
        #expect(try c.fetchOne(Category.self)!.articleCount == 2)
        var txs: [HistoryTransaction] = []
        try container.history(HistoryRequest()) { txs += $0 }
        let last = txs.last!
        #expect(last.changes.contains { $0.objectID == rec.id && $0.kind == .insert })
    }

    /// A record unchanged since read, whose object is gone: it changed nothing it read, so it
    /// writes nothing under any policy (as an object the context read and left alone), as
    /// `update(_:)` documents.
    @Test(arguments: [MergePolicy.error, .objectTrump])
    func unchangedRecordOfDeletedObject(policy: MergePolicy) throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let a = container.newContext(author: "A")
        try a.insert(Article(title: "t", url: "https://x.example/1"))
        try a.save()
        let rec = try #require(try container.newContext().fetchOne(Article.self))
        let other = container.newContext(author: "O")
        try other.delete(try #require(rec.id))
        try other.save()
        let b = container.newContext(author: "B")
        b.mergePolicy = policy
        try b.update(rec)
        #expect(!b.hasChanges, "nothing to write")
        try b.save()
        #expect(try container.newContext().count(Article.self) == 0, "\(policy)")
    }

    /// Deleted in this same context, then update(record).
    @Test func deletedInSameContextThenUpdated() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let a = container.newContext(author: "A")
        try a.insert(Article(title: "t", url: "https://x.example/1"))
        try a.save()
        var rec = try container.newContext().fetchOne(Article.self)!
        let b = container.newContext(author: "B")
        b.mergePolicy = .objectTrump
        try b.delete(rec)
        rec.title = "new"
        let r = Result {
            try b.update(rec)
            return try b.save()
        }
        #expect(throws: StoreError.self) { try r.get() }
        #expect(try container.newContext().count(Article.self) == 1, "nothing saved")
    }

    /// Deleted by another writer AND deleted in this context, then updated, under objectTrump.
    @Test func deletedElsewhereAndHereThenUpdated() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let a = container.newContext(author: "A")
        try a.insert(Article(title: "t", url: "https://x.example/1"))
        try a.save()
        var rec = try container.newContext().fetchOne(Article.self)!
        let other = container.newContext(author: "O")
        try other.delete(rec.id!)
        try other.save()
        let b = container.newContext(author: "B")
        b.mergePolicy = .objectTrump
        _ = Result { try b.delete(rec) }
        rec.title = "new"
        let r = Result {
            try b.update(rec)
            return try b.save()
        }
        #expect(throws: StoreError.self, "deleted here: no update") { try r.get() }
        #expect(try container.newContext().count(Article.self) == 0, "it stays deleted")
    }

    /// Updated twice: first update saved, then deleted elsewhere, then the same record changed
    /// again and saved under objectTrump: the object comes back with both changes.
    @Test func updatedTwiceThenRestored() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let a = container.newContext(author: "A")
        try a.insert(Article(title: "t", url: "https://x.example/1", note: "orig"))
        try a.save()
        var rec = try container.newContext().fetchOne(Article.self)!
        let b = container.newContext(author: "B")
        b.mergePolicy = .objectTrump
        rec.title = "first"
        try b.update(rec)
        try b.save()
        // Another writer changes the note then deletes.
        let other = container.newContext(author: "O")
        var o = try other.record(Article.self, with: rec.id!)
        o.note = "theirs"
        try other.update(o)
        try other.save()
        try other.delete(rec.id!)
        try other.save()
        rec.isRead = true
        try b.update(rec)
        try b.save()
        let back = try container.newContext().record(Article.self, with: rec.id!)
        #expect(back.title == "first" && back.isRead == true)
        #expect(back.note == "orig", "object trump: the record's own note (it read 'orig')")
    }

    /// The record deleted elsewhere, its category also deleted elsewhere; the record relinks to
    /// another deleted category: must not silently drop.
    @Test func restoreWithRelinkToDeletedCategory() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let a = container.newContext(author: "A")
        try a.insert(Category(name: "c1"))
        try a.insert(Category(name: "c2"))
        try a.save()
        let cats = try a.fetch(Category.self, sortedBy: [.ascending(\Category.name)])
        try a.insert(Article(title: "t", url: "https://x.example/1", category: cats[0].id))
        try a.save()
        var rec = try container.newContext().fetchOne(Article.self)!
        let other = container.newContext(author: "O")
        try other.delete(rec.id!)
        try other.delete(cats[1].id!)
        try other.save()
        let b = container.newContext(author: "B")
        b.mergePolicy = .objectTrump
        rec.category = cats[1].id
        let r = Result {
            try b.update(rec)
            return try b.save()
        }
        let back = try? container.newContext().record(Article.self, with: rec.id!)
        if case .success = r {
            Issue.record(
                "relink to a deleted category saved silently: category now \(String(describing: back?.category))")
        }
    }

    /// Hand-made record for a gone object throws .objectNotFound under every policy.
    @Test(arguments: [MergePolicy.error, .objectTrump, .overwrite, .storeTrump, .rollback])
    func handMadeRecord(policy: MergePolicy) throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let a = container.newContext(author: "A")
        try a.insert(Article(title: "t", url: "https://x.example/1"))
        try a.save()
        let id = try a.fetchOne(Article.self)!.id!
        let other = container.newContext(author: "O")
        try other.delete(id)
        try other.save()
        var hand = Article(title: "hand", url: "https://x.example/2")
        hand.id = id
        // Round-trip through JSON so it carries no read.
        hand = try JSONDecoder().decode(Article.self, from: JSONEncoder().encode(hand))
        let b = container.newContext(author: "B")
        b.mergePolicy = policy
        expectStoreError(.objectNotFound) {
            try b.update(hand)
            try b.save()
        }
    }

    /// Deleted between update() and save() under each policy.
    @Test(arguments: [MergePolicy.error, .objectTrump, .storeTrump])
    func deletedBetweenUpdateAndSave(policy: MergePolicy) throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let a = container.newContext(author: "A")
        try a.insert(Article(title: "t", url: "https://x.example/1"))
        try a.save()
        var rec = try container.newContext().fetchOne(Article.self)!
        let b = container.newContext(author: "B")
        b.mergePolicy = policy
        rec.title = "mine"
        try b.update(rec)
        let other = container.newContext(author: "O")
        try other.delete(rec.id!)
        try other.save()
        let r = Result { try b.save() }
        let back = try? container.newContext().record(Article.self, with: rec.id!)
        switch policy {
        case .error:
            if case .success = r { Issue.record("no conflict") }
        case .objectTrump: #expect(back?.title == "mine")
        default: #expect(back == nil)
        }
    }

    /// A category deleted elsewhere (its articles nullified), restored under object trump: its
    /// derived articleCount must count what points at it now (0), not what the record read.
    @Test func restoredCategoryCount() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let a = container.newContext(author: "A")
        try a.insert(Category(name: "c"))
        try a.save()
        let cat = try a.fetchOne(Category.self)!.id!
        try a.insert(Article(title: "t1", url: "https://x.example/1", category: cat))
        try a.insert(Article(title: "t2", url: "https://x.example/2", category: cat))
        try a.save()
        var rec = try container.newContext().fetchOne(Category.self)!
        #expect(rec.articleCount == 2)
        let other = container.newContext(author: "O")
        try other.delete(cat)
        try other.save()
        let b = container.newContext(author: "B")
        b.mergePolicy = .objectTrump
        rec.name = "renamed"
        try b.update(rec)
        try b.save()
        let c = container.newContext()
        let back = try c.record(Category.self, with: cat)
        let pointing = try c.fetch(Article.self).filter { $0.category == cat }.count
        #expect(
            back.articleCount == pointing,
            "articleCount \(String(describing: back.articleCount)) but \(pointing) articles point at it")
    }

    /// Restore meets a new object with the same unique name (inserted by the deleter).
    @Test(arguments: [MergePolicy.objectTrump, .overwrite])
    func restoreMeetsUniqueDuplicate(policy: MergePolicy) throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let a = container.newContext(author: "A")
        try a.insert(Category(name: "c"))
        try a.save()
        var rec = try container.newContext().fetchOne(Category.self)!
        let other = container.newContext(author: "O")
        try other.delete(rec.id!)
        try other.insert(Category(name: "d"))
        try other.save()
        let b = container.newContext(author: "B")
        b.mergePolicy = policy
        rec.name = "d"
        let r = Result {
            try b.update(rec)
            return try b.save()
        }
        #expect {
            try r.get()
        } throws: { error in
            (error as? StoreError)?.code == .uniqueness
        }
        #expect(try container.newContext().fetch(Category.self).map(\.name) == ["d"], "\(policy)")
    }

    /// The same restore without records: the context read the object itself.
    @Test func restoreBypassesRulesWithoutRecords() throws {
        let container = try TemporaryGroup().open(Self.ruleModel)
        let a = container.newContext(author: "A")
        try a.insert(TaskRecord(name: "X", start: 1, due: 5))
        try a.save()
        let id = try a.fetchOne(TaskRecord.self)!.id!
        let b = container.newContext(author: "B")
        b.mergePolicy = .objectTrump
        _ = try b.object(with: id)
        let other = container.newContext(author: "O")
        try other.delete(id)
        try other.save()
        try b.update(id, ["due": .integer(0), "name": .string("lower")])
        let r = Result { try b.save() }
        let back = try container.newContext().fetch(TaskRecord.self)
        if case .success = r {
            #expect(back.allSatisfy { $0.due > $0.start && $0.name == $0.name.uppercased() }, "\(back)")
        }
    }

    /// Restore with a value breaking an attribute rule (minLength 1).
    @Test func restoreWithEmptyTitle() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let a = container.newContext(author: "A")
        try a.insert(Article(title: "t", url: "https://x.example/1"))
        try a.save()
        var rec = try container.newContext().fetchOne(Article.self)!
        let other = container.newContext(author: "O")
        try other.delete(rec.id!)
        try other.save()
        let b = container.newContext(author: "B")
        b.mergePolicy = .objectTrump
        rec.title = ""
        expectStoreError(.validation) {
            try b.update(rec)
            try b.save()
        }
    }

    /// Updated (pending), deleted elsewhere, updated again, saved under object trump: both changes.
    @Test func pendingUpdateThenDeletedThenUpdatedAgain() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let a = container.newContext(author: "A")
        try a.insert(Article(title: "t", url: "https://x.example/1"))
        try a.save()
        var rec = try container.newContext().fetchOne(Article.self)!
        let b = container.newContext(author: "B")
        b.mergePolicy = .objectTrump
        rec.title = "one"
        try b.update(rec)
        let other = container.newContext(author: "O")
        try other.delete(rec.id!)
        try other.save()
        rec.note = "two"
        try b.update(rec)
        try b.save()
        let back = try? container.newContext().record(Article.self, with: rec.id!)
        #expect(back?.title == "one" && back?.note == "two")
        #expect(try container.newContext().count(Article.self) == 1)
    }

    /// ABA: C read the object at version 1; it is deleted, then brought back by B (object trump)
    /// with B's title. C (policy .error) changes the title: the store moved since C read it (B's
    /// title), so C's save must be a conflict, not a silent overwrite of B's title.
    @Test func restoredObjectVersionABA() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let a = container.newContext(author: "A")
        try a.insert(Article(title: "t", url: "https://x.example/1"))
        try a.save()
        var recB = try container.newContext().fetchOne(Article.self)!
        var recC = try container.newContext().fetchOne(Article.self)!
        let readVersion = try container.newContext().object(with: recC.id!).version
        let other = container.newContext(author: "O")
        try other.delete(recB.id!)
        try other.save()
        let b = container.newContext(author: "B")
        b.mergePolicy = .objectTrump
        recB.title = "B title"
        try b.update(recB)
        try b.save()
        let restoredVersion = try container.newContext().object(with: recB.id!).version
        let c = container.newContext(author: "C")
        c.mergePolicy = .error
        recC.title = "C title"
        let r = Result {
            try c.update(recC)
            return try c.save()
        }
        let back = try container.newContext().record(Article.self, with: recC.id!)
        if case .success = r {
            let versions = "\(readVersion) -> \(restoredVersion)"
            Issue.record(
                "C overwrote B's restored title without a conflict (versions \(versions)); stored: \(back.title)")
        }
    }

    /// The same ABA with a plain (snapshot) update of an object C read itself.
    @Test func restoredObjectVersionABAPlain() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let a = container.newContext(author: "A")
        try a.insert(Article(title: "t", url: "https://x.example/1"))
        try a.save()
        let id = try a.fetchOne(Article.self)!.id!
        let b = container.newContext(author: "B")
        b.mergePolicy = .objectTrump
        _ = try b.object(with: id)
        let c = container.newContext(author: "C")
        _ = try c.object(with: id)
        let other = container.newContext(author: "O")
        try other.delete(id)
        try other.save()
        try b.update(id, ["title": .string("B title")])
        try b.save()
        try c.update(id, ["title": .string("C title")])
        let r = Result { try c.save() }
        let back = try container.newContext().object(with: id)
        if case .success = r { Issue.record("plain: C overwrote B's restored title without a conflict") }
        #expect(back["title"] == "B title")
    }

    /// Updated after deletion elsewhere, then deleted in this context before the save.
    @Test func updateOfGoneThenDeleteHere() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let a = container.newContext(author: "A")
        try a.insert(Article(title: "t", url: "https://x.example/1"))
        try a.save()
        var rec = try container.newContext().fetchOne(Article.self)!
        let other = container.newContext(author: "O")
        try other.delete(rec.id!)
        try other.save()
        let b = container.newContext(author: "B")
        b.mergePolicy = .objectTrump
        rec.title = "x"
        try b.update(rec)
        try b.delete(rec)
        #expect {
            try b.save()
        } throws: { error in
            (error as? StoreError)?.code == .objectNotFound
        }
        #expect(try container.newContext().count(Article.self) == 0)
    }
}
