import Foundation
import ReadLater
import SharedStore
import Testing

/// Issue 23, point 1: a record carries what it was read as, so that updating it in any context
/// writes only what the record changed and meets another process's change as a conflict — the
/// README's DAO pattern no longer reverts another writer's change.
@Suite(.tags(.multiProcess)) struct RecordBaseTests {
    typealias Article = ReadLater.Article

    /// A stored article and its id, saved by a seeding context.
    func seed(_ container: Container) throws -> ObjectID {
        let seed = container.newContext(author: "Seed")
        let id = try seed.insert(Article(title: "first", url: "https://r.example/1"))
        return try seed.save().permanentID(for: id)
    }

    /// Another process saves `title` on the article (`sharedstore-helper set-title`).
    func otherProcessSets(title: String, of id: ObjectID, in group: TemporaryGroup) throws {
        let other = try Child(
            "sharedstore-helper", ["set-title", "--group", group.path, "--id", id.description, "--title", title])
        #expect(try other.waitForExit() == 0)
    }

    /// The newcomer's repro: read in one context, another process changes a property, the stale
    /// record's other property is changed and updated in a fresh context. Before, the fresh
    /// context compared with the store as it was then and wrote the stale title back, without a
    /// conflict. Now the default `.error` policy refuses the save (the object changed since the
    /// record read it), and a merging policy keeps the other process's title.
    @Test func aStaleRecordUpdatedInAFreshContextKeepsAnotherProcesssChange() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let id = try seed(container)
        var article = try container.newContext().record(Article.self, with: id)
        try otherProcessSets(title: "other", of: id, in: group)
        article.isRead = true
        let strict = container.newContext(author: "MainApp")
        try strict.update(article)
        #expect {
            try strict.save()
        } throws: { error in
            (error as? StoreError)?.conflicts.first?.versionRead == 1
        }
        #expect(try container.newContext().object(with: id)["isRead"] == false, "nothing was written")
        let merging = container.newContext(author: "MainApp")
        merging.mergePolicy = .objectTrump
        try merging.update(article)
        #expect(try merging.save().updatedCount == 1)
        let now = try container.newContext().object(with: id)
        #expect(now["title"] == "other", "the other process's title survives")
        #expect(now["isRead"] == true, "the record's change is written")
        let last = try #require(try container.fetchHistory(HistoryRequest(authors: ["MainApp"])).last)
        #expect(last.changes.map(\.updatedProperties) == [["isRead"]], "only what the record changed is written")
    }

    /// The same through the README's async DAO: the record crosses the actor, and its update in
    /// the write closure's own context still knows what it was read as.
    @Test func theAsyncDAOKeepsAnotherProcesssChange() async throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let id = try seed(container)
        var article = try await container.read { try $0.record(Article.self, with: id) }
        try otherProcessSets(title: "other", of: id, in: group)
        article.isRead = true
        let changed = article
        await #expect(throws: StoreError.self) {
            try await container.write(author: "MainApp") { try $0.update(changed) }
        }
        try await container.write(author: "MainApp") { context in
            context.mergePolicy = .objectTrump
            try context.update(changed)
        }
        let now = try await container.read { try $0.object(with: id) }
        #expect(now["title"] == "other" && now["isRead"] == true)
    }

    /// A property the record and another process both changed is a conflict for the merge policy,
    /// in a context that never read the object: `.error` names the property and its three values.
    @Test func aPropertyBothChangedIsAConflictForThePolicy() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let id = try seed(container)
        var article =
            try container.newContext().fetchOne(Article.self, where: Key("title") == "first")
            ?? Article(title: "-", url: "-")
        try otherProcessSets(title: "other", of: id, in: group)
        article.title = "mine"
        article.isRead = true
        let strict = container.newContext(author: "Strict")
        try strict.update(article)
        #expect {
            try strict.save()
        } throws: { error in
            let property = (error as? StoreError)?.conflicts.first?.properties.first { $0.name == "title" }
            return property?.read == "first" && property?.stored == "other" && property?.saving == "mine"
        }
        #expect(try container.newContext().object(with: id)["title"] == "other", "nothing was written")
        for (policy, title) in [(MergePolicy.objectTrump, "mine"), (.storeTrump, "other")] {
            let context = container.newContext(author: "Policy")
            context.mergePolicy = policy
            try context.update(article)
            try context.save()
            let now = try container.newContext().object(with: id)
            #expect(now["title"] == .string(title) && now["isRead"] == true, "\(policy)")
            // Back to the state the record was read against, for the next policy.
            try otherProcessSets(title: "other", of: id, in: group)
        }
    }

    /// A context that read the object after another process changed it, then updates a record
    /// read before that change: the record's change of the same property is still a conflict
    /// (checked against what the record read, not the context's newer read).
    @Test func aContextsNewerReadDoesNotHideAConflictOfAnOlderRecord() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let id = try seed(container)
        var article = try container.newContext().record(Article.self, with: id)
        try otherProcessSets(title: "other", of: id, in: group)
        let context = container.newContext(author: "A")
        #expect(try context.object(with: id)["title"] == "other")
        article.title = "mine"
        try context.update(article)
        #expect(throws: StoreError.self) { try context.save() }
        #expect(try container.newContext().object(with: id)["title"] == "other")
    }

    /// A record read after another process's change, updated in a context that read the object
    /// before it: no conflict (the record saw that change), and the change survives.
    @Test func aRecordNewerThanTheContextsReadIsNoFalseConflict() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let id = try seed(container)
        let context = container.newContext(author: "A")
        #expect(try context.object(with: id)["title"] == "first")
        try otherProcessSets(title: "other", of: id, in: group)
        var article = try container.newContext().record(Article.self, with: id)
        article.isRead = true
        try context.update(article)
        try context.save()
        let now = try container.newContext().object(with: id)
        #expect(now["title"] == "other" && now["isRead"] == true)
    }

    /// What a record was read as is not part of its identity, and does not travel through JSON:
    /// a record decoded from JSON is compared with what the context reads, as before.
    @Test func whatARecordWasReadAsIsNotItsIdentity() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let id = try seed(container)
        let fetched = try container.newContext().record(Article.self, with: id)
        #expect(fetched.id == id && fetched.id?.hashValue == id.hashValue)
        let decoded = try JSONDecoder().decode(Article.self, from: try JSONEncoder().encode(fetched))
        #expect(decoded == fetched)
        try otherProcessSets(title: "other", of: id, in: group)
        var copy = decoded
        copy.isRead = true
        let context = container.newContext(author: "A")
        try context.update(copy)
        try context.save()
        // Without what it was read as, the record's stale title counts as its change.
        #expect(try container.newContext().object(with: id)["title"] == "first")
    }

    /// Records of a fetch of many share what the fetch read: each finds its own object's state
    /// in it (found by key once the fetch is larger than a few).
    @Test func eachRecordOfALargeFetchKnowsItsOwnRead() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let seed = container.newContext(author: "Seed")
        for i in 0..<20 { try seed.insert(Article(title: "t\(i)", url: "https://r.example/\(i)")) }
        try seed.save()
        var articles = try container.newContext().fetch(Article.self, sortedBy: [Key("url").ascending])
        #expect(articles.count == 20)
        let target = try #require(articles[15].id)
        try otherProcessSets(title: "other", of: target, in: group)
        let context = container.newContext(author: "A")
        context.mergePolicy = .objectTrump
        for i in [3, 15, 19] {
            articles[i].isRead = true
            try context.update(articles[i])
        }
        #expect(try context.save().updatedCount == 3)
        let now = container.newContext()
        #expect(try now.object(with: target)["title"] == "other" && now.object(with: target)["isRead"] == true)
        #expect(try now.object(with: try #require(articles[3].id))["title"] == .string(articles[3].title))
    }

    /// A fetch's records are decoded in place from its snapshots, one row moved along them: a
    /// fetch that mixes stored rows with the context's pending insert and update (snapshots made
    /// apart from the fetch's rows) decodes each record from its own snapshot, and each record
    /// keeps what its own object was read as.
    @Test func recordsOfAMixedFetchEachDecodeTheirOwnSnapshot() throws {
        typealias Full = ReadLater.Records.Article
        let group = TemporaryGroup()
        let container = try group.open()
        let seed = container.newContext(author: "Seed")
        for i in 0..<12 { try seed.insert(Full(title: "t\(i)", url: "https://r.example/\(i)", note: "n\(i)")) }
        try seed.save()
        let context = container.newContext(author: "A")
        let stored = try context.fetch(FetchRequest("Article", sortedBy: [Key("url").ascending]))
        let fourth = try #require(stored.first { $0["url"] == "https://r.example/4" })
        try context.update(fourth.id, ["note": nil, "isRead": true])
        try context.insert(Full(title: "pending", url: "https://r.example/99", tags: ["x"]))
        let request = FetchRequest("Article", sortedBy: [Key("url").ascending])
        let snapshots = try context.fetch(request)
        let records = try context.fetch(Full.self, sortedBy: [Key("url").ascending])
        #expect(records.count == 13 && snapshots.count == 13)
        for (record, snapshot) in zip(records, snapshots) {
            #expect(record.title == snapshot["title"].stringValue && record.url == snapshot["url"].stringValue)
            #expect(record.note == snapshot["note"].stringValue && record.isRead == snapshot["isRead"].boolValue)
            #expect(record.id == snapshot.id)
        }
        #expect(records.first { $0.title == "pending" }?.tags == ["x"])
        #expect(records.first { $0.url == "https://r.example/4" }.map { $0.note == nil && $0.isRead } == true)
        // Each stored record still carries its own read: a change elsewhere is a conflict for it.
        var article = try #require(records.first { $0.url == "https://r.example/7" })
        try otherSets(["title": "elsewhere"], of: try #require(article.id), in: container)
        article.isRead = true
        let fresh = container.newContext(author: "B")
        try fresh.update(article)
        #expect(throws: StoreError.self) { try fresh.save() }
    }

    /// Another writer of this process (a context of its own) sets `values` on the object.
    func otherSets(_ values: [String: Value], of id: ObjectID, in container: Container) throws {
        let other = container.newContext(author: "Other")
        try other.update(id, values)
        try other.save()
    }

    /// The same record updated again in the context that saved its first change: the context's
    /// own save is no conflict, under any policy, and the second change is written (found by a
    /// review: `.error` refused it, `.storeTrump` dropped it silently).
    @Test func aRecordUpdatedAgainAfterItsContextsSaveIsNoConflict() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        for policy in [MergePolicy.error, .storeTrump, .objectTrump] {
            let id = try seed(container)
            let context = container.newContext(author: "A")
            context.mergePolicy = policy
            var article = try context.record(Article.self, with: id)
            article.title = "one"
            try context.update(article)
            try context.save()
            article.title = "two"
            try context.update(article)
            try context.save()
            #expect(try container.newContext().object(with: id)["title"] == "two", "\(policy)")
            // A change another writer makes after that save is still a conflict.
            article.title = "three"
            try otherSets(["title": "theirs"], of: id, in: container)
            try context.update(article)
            if policy == .error {
                #expect(throws: StoreError.self) { try context.save() }
                context.rollback()
            } else {
                try context.save()
                let expected: Value = policy == .storeTrump ? "theirs" : "three"
                #expect(try container.newContext().object(with: id)["title"] == expected, "\(policy)")
            }
        }
    }

    /// A context's own update made on its newer read, and a stale record's update of another
    /// property of the object, in either order: each property is checked against what it was
    /// changed on, so neither drops the other (found by a review).
    @Test func eachPropertyIsCheckedAgainstWhatItWasChangedOn() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        for recordFirst in [false, true] {
            let id = try seed(container)
            var stale = try container.newContext().record(Article.self, with: id)
            try otherSets(["title": "other"], of: id, in: container)
            let context = container.newContext(author: "A")
            context.mergePolicy = .storeTrump
            #expect(try context.object(with: id)["title"] == "other")
            stale.isRead = true
            if recordFirst { try context.update(stale) }
            try context.update(id, ["title": "ctx-fresh"])
            if !recordFirst { try context.update(stale) }
            try context.save()
            let now = try container.newContext().object(with: id)
            #expect(now["title"] == "ctx-fresh" && now["isRead"] == true, "record first: \(recordFirst)")
        }
        // The mirror case: the context read the object before another's change, a record read
        // after it changes what the other changed.
        let id = try seed(container)
        let context = container.newContext(author: "A")
        context.mergePolicy = .storeTrump
        _ = try context.object(with: id)
        try context.update(id, ["isRead": true])
        try otherSets(["title": "other"], of: id, in: container)
        var fresh = try container.newContext().record(Article.self, with: id)
        fresh.title = "mine, after seeing theirs"
        try context.update(fresh)
        try context.save()
        let now = try container.newContext().object(with: id)
        #expect(now["title"] == "mine, after seeing theirs" && now["isRead"] == true)
    }

    /// A record set back to what it read takes its earlier pending change back (found by a
    /// review: the first change was still written).
    @Test func aRecordSetBackTakesItsChangeBack() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let id = try seed(container)
        let context = container.newContext(author: "A")
        var article = try context.record(Article.self, with: id)
        article.title = "mine"
        try context.update(article)
        article.title = "first"
        article.isRead = true
        try context.update(article)
        try context.save()
        let now = try container.newContext().object(with: id)
        #expect(now["title"] == "first" && now["isRead"] == true)
        let last = try #require(try container.fetchHistory(HistoryRequest(authors: ["A"])).last)
        #expect(last.changes.map(\.updatedProperties) == [["isRead"]])
    }

    /// Round two of the review: the same record, after its context saved its change, changes
    /// another property (no conflict under any policy, nothing reverted); two records of two
    /// fetches each change one property (neither drops the other); a stale copy never writes its
    /// unchanged values over the context's saved change; a record whose saved change another
    /// writer then overwrote never writes it back.
    @Test func recordsOfOneAndOfTwoFetchesAfterTheContextsOwnSaves() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        for policy in [MergePolicy.error, .rollback, .overwrite, .storeTrump, .objectTrump] {
            let id = try seed(container)
            let context = container.newContext(author: "A")
            context.mergePolicy = policy
            var article = try context.record(Article.self, with: id)
            article.title = "one"
            try context.update(article)
            try context.save()
            article.isRead = true
            try context.update(article)
            try context.save()
            let now = try container.newContext().object(with: id)
            #expect(now["title"] == "one" && now["isRead"] == true, "\(policy)")
        }
        for policy in [MergePolicy.error, .storeTrump, .objectTrump] {
            let id = try seed(container)
            let context = container.newContext(author: "A")
            context.mergePolicy = policy
            var first = try context.record(Article.self, with: id)
            var second = try container.newContext().record(Article.self, with: id)
            first.title = "edited"
            try context.update(first)
            second.isRead = true
            try context.update(second)
            try context.save()
            let now = try container.newContext().object(with: id)
            #expect(now["title"] == "edited" && now["isRead"] == true, "two fetches, \(policy)")
        }
        for policy in [MergePolicy.storeTrump, .objectTrump] {
            let id = try seed(container)
            let context = container.newContext(author: "A")
            context.mergePolicy = policy
            var stale = try container.newContext().record(Article.self, with: id)
            try context.update(id, ["title": "saved"])
            try context.save()
            stale.isRead = true
            try context.update(stale)
            try context.save()
            let now = try container.newContext().object(with: id)
            #expect(now["title"] == "saved" && now["isRead"] == true, "stale copy, \(policy)")
        }
        for policy in [MergePolicy.storeTrump, .objectTrump] {
            let id = try seed(container)
            let context = container.newContext(author: "A")
            context.mergePolicy = policy
            var article = try context.record(Article.self, with: id)
            article.title = "one"
            try context.update(article)
            try context.save()
            try otherSets(["title": "theirs"], of: id, in: container)
            _ = try context.fetch(FetchRequest("Article"))
            article.isRead = true
            try context.update(article)
            try context.save()
            let now = try container.newContext().object(with: id)
            #expect(now["title"] == "theirs" && now["isRead"] == true, "overwritten since, \(policy)")
        }
    }

    /// A record changed and saved forty times in one context under `.error`: each save extends
    /// what the record reads as (one entry per fetch kept, whatever the count), never a conflict.
    @Test func aRecordSavedManyTimesInItsContextStaysItsOwnBase() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let id = try seed(container)
        let context = container.newContext(author: "A")
        var article = try context.record(Article.self, with: id)
        for i in 0..<40 {
            article.title = "t\(i)"
            article.isRead = i % 2 == 0
            try context.update(article)
            try context.save()
        }
        let now = try container.newContext().object(with: id)
        #expect(now["title"] == "t39" && now["isRead"] == false)
    }
}

/// A stale record whose object another process deleted: the save meets the deletion by the merge
/// policy, as for an object the context read itself (before, the update threw `.objectNotFound`
/// at once under every policy, and a merging policy could not bring the object back).
@Suite(.tags(.multiProcess)) struct RecordDeletedElsewhereTests {
    typealias Article = ReadLater.Article

    @Test func aRecordOfAnObjectDeletedElsewhereMeetsTheMergePolicy() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let expected: [(MergePolicy, Bool)] = [
            (.error, false), (.rollback, false), (.storeTrump, false), (.objectTrump, true), (.overwrite, true),
        ]
        for (n, (policy, comesBack)) in expected.enumerated() {
            let url = "https://r.example/d\(n)"
            let seed = container.newContext(author: "Seed")
            let temporary = try seed.insert(Article(title: "kept \(policy)", url: url))
            let id = try seed.save().permanentID(for: temporary)
            var article = try container.newContext().record(Article.self, with: id)
            let other = try Child("sharedstore-helper", ["delete", "--group", group.path, "--id", id.description])
            #expect(try other.waitForExit() == 0)
            article.isRead = true
            let context = container.newContext(author: "MainApp")
            context.mergePolicy = policy
            try context.update(article)
            if policy == .error {
                #expect {
                    try context.save()
                } throws: { error in
                    (error as? StoreError)?.conflicts.first?.deletedInStore == true
                }
            } else {
                try context.save()
            }
            let now = try container.newContext().fetch(Article.self, where: \Article.url == url)
            #expect(now.count == (comesBack ? 1 : 0), "\(policy)")
            if comesBack {
                #expect(now.first?.title == "kept \(policy)" && now.first?.isRead == true, "\(policy)")
            }
        }
    }

    /// A record made by hand for an object that is gone still names it as not found.
    @Test func aHandMadeRecordOfAGoneObjectIsNotFound() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let seed = container.newContext(author: "Seed")
        let temporary = try seed.insert(Article(title: "gone", url: "https://r.example/g"))
        let id = try seed.save().permanentID(for: temporary)
        let remover = container.newContext(author: "Remover")
        try remover.delete(id)
        try remover.save()
        var made = Article(title: "made", url: "https://r.example/g")
        made.id = id
        #expect {
            try container.newContext().update(made)
        } throws: { error in
            (error as? StoreError)?.code == .objectNotFound
        }
    }
}
