import Foundation
import ReadLater
import SharedStore
import SharedStoreSQLite
import Testing

@testable import SharedStoreCore

/// Each merge policy against each kind of conflict, with two contexts in one process and with a
/// second real process.
@Suite struct MergePolicyTests {
    /// A card read by context `mine` (title "t0", done false) while another context changes it.
    struct Stage {
        let group = TemporaryGroup()
        let container: Container
        let mine: ObjectContext
        let other: ObjectContext
        let card: ObjectID

        init(_ policy: MergePolicy) throws {
            container = try group.open(Fixtures.allTypes)
            let setup = container.newContext(author: "Setup")
            let temp = try setup.insert("Card", ["title": "t0"])
            card = try setup.save().permanentID(for: temp)
            mine = container.newContext(name: "mine", author: "Mine")
            mine.mergePolicy = policy
            other = container.newContext(name: "other", author: "Other")
            _ = try mine.object(with: card)
        }

        func stored() throws -> Snapshot { try container.newContext().object(with: card) }
    }

    @Test(arguments: MergePolicy.allCases)
    func updateUpdateOnTheSameProperty(_ policy: MergePolicy) throws {
        let s = try Stage(policy)
        try s.other.update(s.card, ["title": "theirs"])
        try s.other.save()
        try s.mine.update(s.card, ["title": "mine", "done": true])
        if policy == .error {
            do {
                try s.mine.save()
                Issue.record("saved over a conflict")
            } catch let e as StoreError {
                #expect(e.code == .conflict)
                let conflict = try #require(e.conflicts.first)
                #expect(conflict.objectID == s.card && !conflict.deletedInStore)
                let title = try #require(conflict.properties.first { $0.name == "title" })
                #expect(title.read == "t0" && title.stored == "theirs" && title.saving == "mine")
                #expect(conflict.properties.first?.name == "title", "properties the store changed too come first")
                #expect(e.message.contains("title: read \"t0\", store \"theirs\", saving \"mine\""))
            }
            #expect(try s.stored()["title"] == "theirs" && s.stored()["done"] == false, "nothing written")
            #expect(s.mine.hasChanges)
            return
        }
        try s.mine.save()
        let after = try s.stored()
        switch policy {
        case .storeTrump: #expect(after["title"] == "theirs" && after["done"] == true)
        case .objectTrump, .overwrite: #expect(after["title"] == "mine" && after["done"] == true)
        case .rollback: #expect(after["title"] == "theirs" && after["done"] == false)
        case .error: break
        }
    }

    @Test(arguments: MergePolicy.allCases)
    func updateUpdateOnDifferentProperties(_ policy: MergePolicy) throws {
        let s = try Stage(policy)
        try s.other.update(s.card, ["done": true])
        try s.other.save()
        try s.mine.update(s.card, ["title": "mine"])
        if policy == .error {
            expectStoreError(.conflict) { try s.mine.save() }
            #expect(try s.stored()["title"] == "t0")
            return
        }
        try s.mine.save()
        let after = try s.stored()
        switch policy {
        case .storeTrump, .objectTrump: #expect(after["title"] == "mine" && after["done"] == true)
        case .overwrite: #expect(after["title"] == "mine" && after["done"] == false, "the context's whole object")
        case .rollback: #expect(after["title"] == "t0" && after["done"] == true)
        case .error: break
        }
    }

    @Test(arguments: MergePolicy.allCases)
    func updateOfAnObjectDeletedInTheStore(_ policy: MergePolicy) throws {
        let s = try Stage(policy)
        try s.other.delete(s.card)
        try s.other.save()
        try s.mine.update(s.card, ["title": "mine"])
        if policy == .error {
            do {
                try s.mine.save()
                Issue.record("saved over a deleted object")
            } catch let e as StoreError {
                #expect(e.code == .conflict && e.conflicts.first?.deletedInStore == true)
            }
            return
        }
        try s.mine.save()
        let count = try s.container.newContext().count(FetchRequest("Card"))
        switch policy {
        case .storeTrump, .rollback: #expect(count == 0, "stays deleted")
        case .objectTrump, .overwrite:
            #expect(try s.stored()["title"] == "mine", "back with the same id")
            #expect(try s.container.fetchHistory(HistoryRequest()).last?.changes.first?.kind == .insert)
        case .error: break
        }
    }

    @Test(arguments: MergePolicy.allCases)
    func insertInsertOnAUniqueKey(_ policy: MergePolicy) throws {
        let s = try Stage(policy)
        let theirs = try s.other.insert("Tag", ["name": "swift", "color": "orange"])
        let survivor = try s.other.save().permanentID(for: theirs)
        let tag = try s.mine.insert("Tag", ["name": "swift", "color": "blue"])
        let card = try s.mine.insert("Card", ["title": "c"], relationships: ["tag": tag])
        if policy == .error {
            do {
                try s.mine.save()
                Issue.record("saved a duplicate key")
            } catch let e as StoreError {
                #expect(e.code == .uniqueness && e.message.contains("Tag.name"))
            }
            return
        }
        let result = try s.mine.save()
        let view = s.container.newContext()
        #expect(try view.count(FetchRequest("Tag")) == 1, "the two became one")
        #expect(result.permanentID(for: tag) == survivor)
        #expect(
            try view.object(with: result.permanentID(for: card)).relationships["tag"] == survivor,
            "relationships point to the survivor")
        let color = try view.object(with: survivor)["color"]
        switch policy {
        case .storeTrump, .rollback: #expect(color == "orange")
        case .objectTrump, .overwrite: #expect(color == "blue")
        case .error: break
        }
    }

    @Test(.tags(.multiProcess), arguments: MergePolicy.allCases)
    func conflictsWithAnotherProcess(_ policy: MergePolicy) throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let setup = container.newContext(author: "Setup")
        let temp = try setup.insert(ReadLater.Article(title: "t0", url: "https://x.example"))
        let article = try setup.save().permanentID(for: temp)
        let mine = container.newContext(author: "Mine")
        mine.mergePolicy = policy
        _ = try mine.object(with: article)
        let other = try Child(
            "sharedstore-helper",
            ["set-title", "--group", group.path, "--id", article.description, "--title", "theirs"])
        #expect(try other.waitForExit() == 0)
        try mine.update(article, ["title": "mine", "isRead": true])
        if policy == .error {
            expectStoreError(.conflict) { try mine.save() }
        } else {
            try mine.save()
        }
        let after = try container.newContext().object(with: article)
        let expected: (Value, Value) =
            switch policy {
            case .error: ("theirs", false)
            case .storeTrump: ("theirs", true)
            case .objectTrump, .overwrite: ("mine", true)
            case .rollback: ("theirs", false)
            }
        #expect(after["title"] == expected.0 && after["isRead"] == expected.1)

        // And a category both processes create: one survives.
        let create = try Child("sharedstore-helper", ["add-category", "--group", group.path, "--name", "Swift"])
        #expect(try create.waitForExit() == 0)
        let category = try mine.insert(ReadLater.Category(name: "Swift"))
        if policy == .error {
            expectStoreError(.uniqueness) { try mine.save() }
        } else {
            let id = try mine.save().permanentID(for: category)
            #expect(id.description == json(try #require(create.lines.last))["id"] as? String)
        }
        #expect(try container.newContext().count(FetchRequest("Category")) == 1)
    }

    @Test func aLockedStoreMakesAWriterWaitThenFailClearly() throws {
        let group = TemporaryGroup()
        _ = try group.open()
        var quick = Container.Options()
        quick.busyTimeout = 0.2
        let writer = try group.open(options: quick)
        let holder = try group.open()
        let context = writer.newContext(author: "W")
        try context.insert(Fixtures.article("blocked"))
        // Another connection holds the write lock: the save waits 0.2 s, then reports busy.
        try holder.writer.withConnection { c in
            try c.execute("BEGIN IMMEDIATE")
            defer { try? c.execute("ROLLBACK") }
            do {
                try context.save()
                Issue.record("saved while the store was locked")
            } catch let e as StoreError {
                #expect(e.code == .busy && e.message.contains("store busy"))
            }
            // A reader is never blocked by the writer (WAL).
            #expect(try writer.newContext().count(FetchRequest("Article")) == 0)
        }
        // Once the lock is free, the same pending changes save.
        #expect(try context.save().token != nil)
        #expect(try writer.newContext().count(FetchRequest("Article")) == 1)
    }
}

/// The context's record of what it read (ReadSet): the last read of an object is what a save
/// checks against, however the reads were kept.
@Suite struct ReadSetTests {
    @Test func theLastReadOfAnObjectIsWhatTheSaveChecks() throws {
        let container = try TemporaryGroup().open()
        let seed = container.newContext(author: "Seed")
        var ids: [ObjectID] = []
        for i in 0..<12 { ids.append(try seed.insert(Fixtures.article("a\(i)", i))) }
        let saved = try seed.save()
        ids = ids.map { saved.permanentID(for: $0) }
        let other = container.newContext(author: "Other")
        let context = container.newContext(author: "A")
        context.mergePolicy = .error
        // Read again after another save: the newer read is the base, no conflict.
        _ = try context.fetch(FetchRequest("Article", where: Key("title") == "a0"))
        try other.update(ids[0], ["isRead": true])
        try other.save()
        _ = try context.fetch(FetchRequest("Article", where: Key("title") == "a0"))
        try context.update(ids[0], ["title": "a0 again"])
        try context.save()
        // A read pushed out of the recent fetches by many others still counts.
        _ = try context.fetch(FetchRequest("Article", where: Key("title") == "a1"))
        for i in 2..<12 { _ = try context.fetch(FetchRequest("Article", where: Key("title") == .string("a\(i)"))) }
        try other.update(ids[1], ["isRead": true])
        try other.save()
        try context.update(ids[1], ["title": "stale"])
        expectStoreError(.conflict) { try context.save() }
    }
}

extension MergePolicyTests {
    /// A context remembers what it read however much it reads: after fetches of thousands of
    /// objects (indexed in bulk, not one by one as they are read), one it read first and another
    /// process changed since is still a conflict, against what it read.
    @Test func aContextThatReadThousandsStillKnowsWhatItReadOfEach() throws {
        let group = TemporaryGroup()
        let container = try group.open(Fixtures.allTypes)
        let setup = container.newContext(author: "Setup")
        for i in 0..<20_000 { try setup.insert("Card", ["title": .string("c\(i)")]) }
        try setup.save()
        let mine = container.newContext(name: "mine", author: "Mine")
        let first = try mine.fetch(FetchRequest("Card", sortedBy: [Key("title").ascending], limit: 1))[0]
        // Pages of 500, then the whole table twice: more than the read set keeps unindexed.
        for page in 0..<40 { _ = try mine.fetch(FetchRequest("Card", limit: 500, offset: page * 500)) }
        _ = try mine.fetch(FetchRequest("Card"))
        _ = try mine.fetch(FetchRequest("Card", sortedBy: [Key("title").descending]))
        let other = container.newContext(name: "other", author: "Other")
        try other.update(first.id, ["title": "theirs"])
        try other.save()
        try mine.update(first.id, ["title": "mine"])
        #expect(throws: StoreError.self) { try mine.save() }
        let read = try container.newContext().object(with: first.id)
        #expect(read["title"] == "theirs")
    }
}
