import Foundation
import ReadLater
import SharedStore
import Testing

/// Issue 23, point 6: a pinned context (Core Data's query generations) sees one snapshot across
/// several fetches and counts while others write, its own saves included, until it is released.
@Suite struct PinnedContextTests {
    func add(_ container: Container, _ n: Int) throws {
        let writer = container.newContext(author: "Writer")
        for i in 0..<n {
            try writer.insert("Article", ["title": .string("t\(i)"), "url": .string("https://r.example/\(i)")])
        }
        try writer.save()
    }

    @Test func aPinnedContextSeesOneGenerationUntilReleased() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        try add(container, 3)
        let pinned = container.newContext(author: "Pinned")
        try pinned.pin()
        #expect(pinned.isPinned)
        let all = FetchRequest("Article")
        #expect(try pinned.count(all) == 3)
        // Another container of the store (another process's view) writes meanwhile.
        try add(try group.open(), 2)
        #expect(try container.newContext().count(all) == 5, "unpinned readers see the writes")
        #expect(try pinned.count(all) == 3 && pinned.fetch(all).count == 3, "the pinned one does not")
        let first = try #require(try pinned.fetch(all).first)
        #expect(try pinned.object(with: first.id)["title"] == first["title"])
        // Its own save moves it on, to the store as it is after the save.
        try pinned.update(first.id, ["isRead": true])
        try pinned.save()
        #expect(try pinned.count(all) == 5 && pinned.object(with: first.id)["isRead"] == true)
        try add(container, 1)
        #expect(try pinned.count(all) == 5)
        pinned.unpin()
        let released = try pinned.count(all)
        #expect(!pinned.isPinned && released == 6)
    }

    @Test func anAsyncPinnedReadSeesOneSnapshot() async throws {
        let group = TemporaryGroup()
        let container = try group.open()
        try add(container, 2)
        let other = try group.open()
        let (before, after) = try await container.read(pinned: true) { context -> (Int, Int) in
            let before = try context.count(FetchRequest("Article"))
            try add(other, 3)
            return (before, try context.count(FetchRequest("Article")))
        }
        #expect(before == 2 && after == 2)
        #expect(try container.newContext().count(FetchRequest("Article")) == 5)
    }

    @Test func anInMemoryStoreCannotBePinned() throws {
        var options = Container.Options()
        options.inMemory = true
        let container = try Container(group: "", model: ReadLater.model, options: options)
        #expect(throws: StoreError.self) { try container.newContext().pin() }
    }
}

/// `storectl tokens` shows a pin another process holds, with how far the WAL moved past it.
@Suite struct PinListingTests {
    @Test func storectlTokensShowsALongHeldPinOfAnotherProcess() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let context = container.newContext(author: "Writer")
        _ = try Fixtures.saveArticles(context, count: 2)
        let holder = try Child("sharedstore-helper", ["hold-pin", "--group", group.path])
        try holder.waitForLine("the pin") { $0.contains("pinned") }
        // A second pin on the same snapshot shares the first one's read slot: both are listed.
        let second = try Child("sharedstore-helper", ["hold-pin", "--group", group.path])
        try second.waitForLine("the second pin") { $0.contains("pinned") }
        _ = try Fixtures.saveArticles(context, count: 3)
        func pins() throws -> [[String: Any]] {
            let tokens = try Child("storectl", ["tokens", "--json", "--group", group.path])
            #expect(try tokens.waitForExit() == 0)
            return tokens.lines.compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }.filter { $0["pin"] as? Bool == true }
        }
        let both = try pins()
        #expect(Set(both.compactMap { ($0["pid"] as? Double).map(Int32.init) }) == [holder.pid, second.pid])
        second.kill9()
        _ = try second.waitForExit()
        let held = try pins()
        #expect(held.count == 1)
        #expect((held.first?["pid"] as? Double).map(Int32.init) == holder.pid)
        #expect((held.first?["consumer"] as? String)?.contains("(sharedstore-helper)") == true)
        // Three saves since the pin: their frames are past its snapshot.
        let lag = held.first?["lag"] as? String ?? ""
        #expect(lag.hasSuffix("WAL frames") && (Int(lag.split(separator: " ")[0]) ?? 0) >= 3, "\(lag)")
        holder.kill9()
        _ = try holder.waitForExit()
        #expect(try pins().isEmpty, "a pin goes with its process")
    }
}
