import Foundation
import ReadLater
import SharedStore
import Testing

/// Invariants 1, 2, 3 and 8 of DESIGN.md, in one process.
@Suite struct HistoryInvariantTests {
    @Test func failedSaveLeavesNeitherDataNorHistory() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let context = container.newContext(name: "t", author: "A")
        try context.insert(Fixtures.article("first"))
        let before = try context.save().token
        #expect(before != nil)

        // The second object breaks validation: the first must not be saved either.
        try context.insert(Fixtures.article("ok", 1))
        try context.insert("Article", ["title": "", "url": "https://example.com/x"])
        expectStoreError(.validation) { try context.save() }
        #expect(context.hasChanges, "a failed save keeps the pending changes")
        #expect(try container.currentToken() == before)
        #expect(try container.newContext().count(FetchRequest("Article")) == 1, "the store holds what it held")
        #expect(try container.fetchHistory(HistoryRequest()).count == 1)

        // A broken uniqueness constraint in the middle of a save: same.
        context.rollback()
        try context.insert(ReadLater.Category(name: "Swift"))
        try context.save()
        try context.insert(Fixtures.article("ok2", 2))
        try context.insert(ReadLater.Category(name: "Swift"))
        expectStoreError(.uniqueness) { try context.save() }
        #expect(try container.newContext().count(FetchRequest("Article")) == 1)
        #expect(try container.newContext().count(FetchRequest("Category")) == 1)
        #expect(try container.fetchHistory(HistoryRequest()).count == 2)
    }

    @Test func everySaveIsOneTransactionWithItsChanges() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let context = container.newContext(name: "editor", author: "MainApp")
        let cat = try context.insert(ReadLater.Category(name: "News"))
        let a = try context.insert(ReadLater.Article(title: "A", url: "https://a.example", category: cat))
        let saved = try context.save()
        let article = saved.permanentID(for: a)
        try context.update(article, ["isRead": true, "title": "A"])  // title unchanged: not recorded
        try context.save()
        try context.delete(article)
        try context.save()

        let history = try container.fetchHistory(HistoryRequest())
        #expect(history.count == 3)
        // The delete also changes the category's derived articleCount: recorded as its update.
        #expect(history.map { $0.changes.map(\.kind) } == [[.insert, .insert], [.update], [.delete, .update]])
        #expect(history[2].changes[1].updatedProperties == ["articleCount"])
        #expect(history[1].changes[0].updatedProperties == ["isRead"])
        #expect(history[2].changes[0].tombstone?["title"] == .string("A"))
        #expect(history.allSatisfy { $0.author == "MainApp" && $0.contextName == "editor" })
        #expect(history.allSatisfy { $0.processID == Int64(getpid()) })
        #expect(history[0].changes[1].objectID == article)
    }

    @Test func tokensFromTwoConnectionsComeBackInCommitOrder() throws {
        let group = TemporaryGroup()
        let one = try group.open()
        let two = try group.open()
        let c1 = one.newContext(author: "One")
        let c2 = two.newContext(author: "Two")
        var committed: [HistoryToken] = []
        for i in 0..<20 {
            let context = i % 3 == 0 ? c2 : c1
            try context.insert(Fixtures.article("\(i)", i))
            committed.append(try #require(try context.save().token))
        }
        #expect(committed == committed.sorted())
        #expect(Set(committed.map(\.value)).count == 20)
        let history = try one.fetchHistory(HistoryRequest())
        #expect(history.map(\.token) == committed)
        #expect(history.map { $0.author! } == (0..<20).map { $0 % 3 == 0 ? "Two" : "One" })
    }

    @Test func tokensAreNeverReusedAfterAllHistoryIsDeleted() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let context = container.newContext(author: "A")
        try Fixtures.saveArticles(context, count: 5)
        let last = try container.currentToken()
        #expect(try container.deleteHistory(through: last, chunkSize: 2) == 5)
        #expect(try container.fetchHistory(HistoryRequest()).isEmpty)
        #expect(try container.historyCount() == 0)
        #expect(try container.historyStatistics().transactions == 0)
        #expect(try container.currentToken() == last)
        #expect(try container.deleteHistory(through: last) == 0, "deleting again deletes nothing")
        #expect(try container.fetchHistory(HistoryRequest(after: last)).isEmpty)

        // Reopen: the store still remembers.
        let reopened = try group.open()
        let next = reopened.newContext(author: "A")
        try next.insert(Fixtures.article("after", 9))
        let token = try #require(try next.save().token)
        #expect(token.value == last.value + 1)
        #expect(try reopened.fetchHistory(HistoryRequest(after: last)).map(\.token) == [token])
        #expect(try reopened.historyCount() == 1)
        let failed = StoreVerifier.verify(container: reopened, registry: try TokenRegistry(group: group.path)).filter {
            !$0.ok
        }
        #expect(failed.isEmpty, "\(failed)")
        #expect(try reopened.deleteHistory(through: token) == 1)
        #expect(try reopened.historyCount() == 0)
    }

    @Test func expiredForeignAndMalformedTokensEachHaveTheirOwnError() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let context = container.newContext(author: "A")
        let tokens = try Fixtures.saveArticles(context, count: 4)
        try container.deleteHistory(through: tokens[2])

        expectStoreError(.historyExpired) { _ = try container.fetchHistory(HistoryRequest(after: tokens[0])) }
        #expect(try container.fetchHistory(HistoryRequest(after: tokens[2])).map(\.token) == [tokens[3]])

        let other = try TemporaryGroup().open()
        let foreign = HistoryToken(storeID: other.storeID, value: 1)
        expectStoreError(.foreignToken) { _ = try container.fetchHistory(HistoryRequest(after: foreign)) }
        expectStoreError(.foreignToken) { _ = try container.token(parsing: foreign.description) }
        // A token of this store ahead of its newest transaction is said to be so (the store was put
        // back to an older copy), not taken for another store's: its holder reloads.
        do {
            _ = try container.fetchHistory(HistoryRequest(after: HistoryToken(storeID: container.storeID, value: 99)))
            Issue.record("a token ahead of the store was accepted")
        } catch let error as StoreError {
            #expect(error.code == .historyExpired)
            #expect(error.message.contains("ahead of this store's newest transaction"))
        }
        for bad in [
            "", "abc", "12", "12.xyz", "-1.\(String(repeating: "a", count: 32))",
            "1.\(String(repeating: "g", count: 32))", "1..2",
        ] {
            expectStoreError(.malformedToken) { _ = try container.token(parsing: bad) }
        }
        // Printing and parsing round-trip, and Codable too.
        #expect(try container.token(parsing: tokens[3].description) == tokens[3])
        let data = try JSONEncoder().encode(tokens[3])
        #expect(try JSONDecoder().decode(HistoryToken.self, from: data) == tokens[3])
        // Nothing was lost by the bad requests.
        #expect(try context.count(FetchRequest("Article")) == 4)
    }

    @Test func historyExpiresWhenCleanedDuringAStream() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let context = container.newContext(author: "A")
        try Fixtures.saveArticles(context, count: 10)
        var seen: [Int64] = []
        let cleaner = try group.open()
        expectStoreError(.historyExpired) {
            try container.history(HistoryRequest(batchSize: 3)) { batch in
                seen += batch.map(\.token.value)
                if seen.count == 3 { try cleaner.deleteHistory(through: cleaner.currentToken()) }
            }
        }
        #expect(seen == [1, 2, 3], "no transaction after the gap is delivered")
    }

    @Test func historyRequestsFilterStreamAndLimit() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let a = container.newContext(author: "A")
        let b = container.newContext(author: "B")
        for i in 0..<30 {
            let context = i.isMultiple(of: 2) ? a : b
            if i % 5 == 0 {
                try context.insert(ReadLater.Category(name: "c\(i)"))
            } else {
                try context.insert(Fixtures.article("\(i)", i))
            }
            try context.save()
        }
        #expect(try container.fetchHistory(HistoryRequest(excludingAuthors: ["A"])).count == 15)
        #expect(try container.fetchHistory(HistoryRequest(authors: ["A"])).allSatisfy { $0.author == "A" })
        let categories = try container.fetchHistory(HistoryRequest(entities: ["Category"]))
        #expect(categories.count == 6)
        #expect(categories.allSatisfy { $0.changes.allSatisfy { $0.objectID.entity == "Category" } })
        #expect(try container.fetchHistory(HistoryRequest(limit: 7, batchSize: 3)).map(\.token.value) == Array(1...7))
        var batches: [Int] = []
        try container.history(HistoryRequest(batchSize: 8)) { batches.append($0.count) }
        #expect(batches == [8, 8, 8, 6])
        let middle = try container.fetchHistory(HistoryRequest())[19].timestamp
        let afterDate = try container.fetchHistory(HistoryRequest(start: .afterDate(middle)))
        #expect(afterDate.allSatisfy { $0.timestamp > middle })
        #expect(afterDate.count >= 10 && afterDate.count <= 10 + 1)
        expectStoreError(.unknownEntity) { _ = try container.fetchHistory(HistoryRequest(entities: ["Nope"])) }
        expectStoreError(.invalidArgument) { _ = try container.fetchHistory(HistoryRequest(batchSize: 0)) }
    }

    @Test func batchOperationsAreRecordedObjectByObject() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let context = container.newContext(name: "batch", author: "Importer")
        let rows: [[String: Value]] = (0..<50).map {
            ["title": .string("t\($0)"), "url": .string("https://x.example/\($0)"), "createdAt": .date(Date())]
        }
        let inserted = try context.batchInsert("Article", rows)
        #expect(inserted.count == 50)
        let updated = try context.batchUpdate("Article", where: Key("title").beginsWith("t1"), set: ["isRead": true])
        #expect(updated.count == 11)
        let deleted = try context.batchDelete("Article", where: Key("isRead") == true)
        #expect(deleted.count == 11)
        let history = try container.fetchHistory(HistoryRequest())
        #expect(history.map(\.changes.count) == [50, 11, 11])
        #expect(history[1].changes.allSatisfy { $0.kind == .update && $0.updatedProperties == ["isRead"] })
        #expect(
            history[2].changes.allSatisfy {
                $0.kind == .delete && $0.tombstone?["title"]?.stringValue?.hasPrefix("t1") == true
            })
        #expect(try context.count(FetchRequest("Article")) == 39)

        // A bad row rejects the whole batch.
        var bad = rows
        bad[7]["url"] = "ftp://nope"
        expectStoreError(.validation) { try context.batchInsert("Article", bad) }
        #expect(try context.count(FetchRequest("Article")) == 39)
        #expect(try container.fetchHistory(HistoryRequest()).count == 3)
    }

    @Test func historyTrackingOffWritesNoHistory() throws {
        var options = Container.Options()
        options.historyTracking = false
        options.inMemory = true
        let container = try Container(group: "/nonexistent-unused", model: ReadLater.model, options: options)
        let context = container.newContext(author: "A")
        try context.insert(Fixtures.article("x"))
        #expect(try context.save().token == nil)
        #expect(try container.fetchHistory(HistoryRequest()).isEmpty)
        #expect(try context.count(FetchRequest("Article")) == 1)
    }
}
