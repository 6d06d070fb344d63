import CLMDB
import Foundation
import ReadLater
import SharedStore
import SharedStoreLMDB
import Testing

@testable import SharedStoreCore
@testable import SharedStoreSync

/// Invariants 3 to 7 across real processes: watchers, kills, the cleaner, the registry.
@Suite struct SyncProcessTests {
    func helper(_ args: String...) throws -> Child { try Child("sharedstore-helper", args) }

    func freshView(_ container: Container) throws -> [String] {
        let context = container.newContext()
        return try container.model.entities.flatMap { e in try context.fetch(FetchRequest(e.name)) }
            .sorted { $0.id < $1.id }.map { "\($0.id)@\($0.version)" }
    }

    @Test(.tags(.multiProcess)) func aWatcherSeesEveryTransactionOfTwoWritersOnceInOrderAndNoneOfItsOwn() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let n = 60
        let watcher = try helper(
            "watch", "--group", group.path, "--consumer", "Watcher", "--count", "\(2 * n)", "--poll", "5")
        try watcher.waitForLine("ready") { $0.contains("\"ready\"") }
        let writers = try ["Left", "Right", "Watcher"].map {
            try helper("write", "--group", group.path, "--author", $0, "--count", "\(n)")
        }
        for w in writers { #expect(try w.waitForExit() == 0) }
        #expect(try watcher.waitForExit() == 0)

        let received = watcher.lines.map(json).filter { $0["author"] != nil }
        let expected = try container.fetchHistory(HistoryRequest(excludingAuthors: ["Watcher"]))
        #expect(received.count == 2 * n)
        #expect(received.map { tokenValue($0["token"] as? String) } == expected.map(\.token.value))
        #expect(!received.contains { ($0["author"] as? String) == "Watcher" })
        let view = try #require(watcher.lines.map(json).last?["view"] as? [String])
        // The watcher stopped after its count; its view holds at least everything through its token.
        let fresh = try freshView(container)
        #expect(Set(view).isSubset(of: Set(fresh)) || view.count <= fresh.count)
    }

    @Test(.tags(.multiProcess)) func aWatcherKilledMidBurstCatchesUpWithNoGapAndNoDuplicate() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let total = 400
        let first = try helper("watch", "--group", group.path, "--consumer", "Phoenix", "--count", "\(total)")
        try first.waitForLine("ready") { $0.contains("\"ready\"") }
        let writer = try helper("write", "--group", group.path, "--author", "Burst", "--count", "\(total)")
        try first.waitForLines(1 + 40)
        first.kill9()
        _ = try? first.waitForExit()
        #expect(try writer.waitForExit() == 0)

        let registry = try TokenRegistry(group: group.path)
        let saved = try #require(try registry.consumer("Phoenix")?.token?.value)
        let beforeKill = first.lines.map(json).compactMap { $0["token"] as? String }.map(tokenValue)
        let all = try container.fetchHistory(HistoryRequest()).map(\.token.value)
        let remaining = all.filter { $0 > saved }
        #expect(
            Set(all.filter { $0 <= saved }).isSubset(of: Set(beforeKill)),
            "every acknowledged transaction was delivered before the kill")

        let second = try helper(
            "watch", "--group", group.path, "--consumer", "Phoenix", "--count", "\(remaining.count)")
        #expect(try second.waitForExit() == 0)
        let afterRestart = second.lines.map(json).filter { $0["author"] != nil }.compactMap { $0["token"] as? String }
            .map(tokenValue)
        #expect(afterRestart == remaining, "no gap and no duplicate after the saved token")
        #expect(Set(beforeKill).union(afterRestart) == Set(all))
        let view = try #require(second.lines.map(json).last?["view"] as? [String])
        #expect(view == (try freshView(container)))
    }

    @Test(.tags(.multiProcess)) func theCleanerDeletesOnlyWhatEveryLiveConsumerMerged() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let registry = try TokenRegistry(group: group.path)
        let context = container.newContext(author: "Writer")
        func write(_ n: Int) throws {
            for i in 0..<n {
                try context.insert(Fixtures.article("w\(i)", i))
                try context.save()
            }
        }
        try write(10)
        #expect(try helper("sync", "--group", group.path, "--consumer", "C").waitForExit() == 0)  // C at 10
        try write(10)
        #expect(try helper("sync", "--group", group.path, "--consumer", "A").waitForExit() == 0)  // A at 20
        try write(5)
        #expect(try helper("sync", "--group", group.path, "--consumer", "B").waitForExit() == 0)  // B at 25

        // One consumer registered but never synced: nothing may go.
        #expect(try helper("register", "--group", group.path, "--consumer", "Lazy").waitForExit() == 0)
        var report = try HistoryCleaner.clean(container: container, registry: registry)
        #expect(
            report.deleted == 0 && report.through == nil && report.oldestConsumer == "Lazy" && report.remaining == 25)
        try registry.remove("Lazy")

        // Three consumers at 10, 20, 25: exactly through 10.
        let dry = try HistoryCleaner.clean(container: container, registry: registry, dryRun: true)
        #expect(dry.deleted == 10 && dry.remaining == 15)
        #expect(try container.historyCount() == 25)
        report = try HistoryCleaner.clean(container: container, registry: registry)
        #expect(
            report.deleted == 10 && report.through?.value == 10 && report.oldestConsumer == "C"
                && report.remaining == 15)
        #expect(try container.fetchHistory(HistoryRequest()).first?.token.value == 11)

        // Evict C (not seen since before A and B synced), then clean through A.
        let c = try #require(try registry.consumer("C"))
        let a = try #require(try registry.consumer("A"))
        let middle = c.updatedAt.addingTimeInterval(a.updatedAt.timeIntervalSince(c.updatedAt) / 2)
        report = try HistoryCleaner.clean(
            container: container, registry: registry, evictAfter: Date().timeIntervalSince(middle))
        #expect(report.evicted == ["C"])
        #expect(report.through?.value == 20 && report.oldestConsumer == "A" && report.deleted == 10)

        // C's next sync reports expired and reloads in full with a correct view.
        let sync = try helper("sync", "--group", group.path, "--consumer", "C")
        #expect(try sync.waitForExit() == 0)
        let result = json(try #require(sync.lines.last))
        #expect(result["expired"] as? Bool == true)
        #expect(result["view"] as? Int == 25)
        #expect(tokenValue(result["token"] as? String) == 25)
        #expect(try registry.consumer("C")?.isEvicted == false)
    }

    @Test(.tags(.multiProcess)) func fourProcessesAdvancingOneConsumerLeaveTheMaximum() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let context = container.newContext(author: "W")
        try Fixtures.saveArticles(context, count: 5)
        var generator = SystemRandomNumberGenerator()
        let children = try (0..<4).map { p -> Child in
            let values = (1...200).map { _ in Int.random(in: 1...1000, using: &generator) } + (p == 2 ? [1234] : [])
            return try helper(
                "advance", "--group", group.path, "--consumer", "Shared", "--tokens",
                values.shuffled().map(String.init).joined(separator: ","))
        }
        for c in children { #expect(try c.waitForExit() == 0) }
        #expect(try TokenRegistry(group: group.path).consumer("Shared")?.token?.value == 1234)
    }

    @Test(.tags(.multiProcess)) func aProcessKilledInsideARegistryReadLeavesNoStuckSlot() throws {
        let group = TemporaryGroup()
        _ = try group.open()
        // Keep the registry open here: with no live process holding it, LMDB would simply reset
        // the reader table at the next open, and mdb_reader_check would have nothing to do.
        let registry = try TokenRegistry(group: group.path)
        let holder = try helper("hold-read", "--group", group.path)
        try holder.waitForLine("holding") { $0.contains("holding") }
        holder.kill9()
        _ = try? holder.waitForExit()
        let check = try helper("readers", "--group", group.path)
        #expect(try check.waitForExit() == 0)
        let readers = json(try #require(check.lines.last))
        #expect(readers["cleared"] as? Int ?? 0 >= 1)
        // The registry keeps working, from another process and from this one.
        #expect(try helper("advance", "--group", group.path, "--consumer", "After", "--tokens", "0").waitForExit() == 0)
        #expect(try registry.consumer("After") != nil)
        #expect(try registry.clearStaleReaders() == 0, "nothing stale is left")
    }
}

/// The registry, the signal and the merger in one process.
@Suite struct SyncTests {
    @Test func lmdbFlagsMapToTheirOwnConstants() {
        #expect(LMDBEnvironmentFlags.noSubdirectory.rawValue == UInt32(MDB_NOSUBDIR))
        #expect(LMDBEnvironmentFlags.noSync.rawValue == UInt32(MDB_NOSYNC))
        #expect(LMDBEnvironmentFlags.noMetaSync.rawValue == UInt32(MDB_NOMETASYNC))
        #expect(LMDBEnvironmentFlags.noThreadLocalStorage.rawValue == UInt32(MDB_NOTLS))
        #expect(LMDBEnvironmentFlags.readOnly.rawValue == UInt32(MDB_RDONLY))
        #expect(LMDBDatabaseFlags.create.rawValue == UInt32(MDB_CREATE))
        #expect(LMDBWriteFlags.noOverwrite.rawValue == UInt32(MDB_NOOVERWRITE))
    }

    @Test func registryIsMonotonicAndResetIsExplicit() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let registry = try TokenRegistry(group: group.path)
        let t = { (v: Int64) in HistoryToken(storeID: container.storeID, value: v) }
        try registry.register("A")
        #expect(try registry.consumer("A")?.token == nil)
        try registry.advance("A", to: t(5))
        try registry.advance("A", to: t(3))
        #expect(try registry.consumer("A")?.token == t(5))
        try registry.reset("A", to: t(2))
        #expect(try registry.consumer("A")?.token == t(2))
        // A token of another store (the store was made again) is replaced, never compared.
        let foreign = HistoryToken(storeID: UUID(), value: 99)
        try registry.reset("B", to: foreign)
        #expect(try registry.minimum(storeID: container.storeID)?.value == 0)
        try registry.advance("B", to: t(1))
        #expect(try registry.consumer("B")?.token == t(1))
        // Another spelling of the same directory reaches the same environment (LMDB must not be
        // opened twice in one process).
        let other = try TokenRegistry(group: group.path + "/./")
        #expect(other.environment === registry.environment)
        #expect(try registry.remove("B"))
        #expect(try !registry.remove("B"))
        #expect(try registry.consumers().map(\.name) == ["A"])
        expectStoreError(.invalidArgument) { try registry.register("") }
        let mode =
            (try FileManager.default.attributesOfItem(atPath: group.path + "/tokens.lmdb")[.posixPermissions]
            as? NSNumber)?.intValue
        #expect(mode == 0o600)
    }

    @Test func aStoreMadeAgainMakesEveryConsumerReloadInFull() throws {
        let group = TemporaryGroup()
        let registry = try TokenRegistry(group: group.path)
        do {
            let old = try group.open()
            let context = old.newContext(author: "W")
            for i in 0..<3 { try context.insert(Fixtures.article("old \(i)", i)) }
            try context.save()
            try ViewContext(container: old, registry: registry, consumer: "Widget").sync()
        }
        // The store is deleted and made again (a new identity); the registry survives.
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: group.storePath + suffix) }
        let fresh = try group.open()
        let context = fresh.newContext(author: "W")
        try context.insert(Fixtures.article("new"))
        try context.save()
        #expect(try registry.consumer("Widget")?.token?.storeID != fresh.storeID)
        #expect(
            try registry.minimum(storeID: fresh.storeID)?.value == 0,
            "a foreign token is not trusted: it needs everything")
        let view = try ViewContext(container: fresh, registry: registry, consumer: "Widget")
        let result = try view.sync()
        #expect(result.expired && result.reloaded)
        #expect(view.objects(of: "Article").map { $0["title"] } == ["new"])
        #expect(try registry.consumer("Widget")?.token == fresh.currentToken())
    }

    @Test func theRegistryGrowsWhenItsMapIsFull() throws {
        let group = TemporaryGroup()
        let registry = try TokenRegistry(group: group.path)
        let before = registry.environment.mapSize
        let big = [UInt8](repeating: 7, count: 3000)
        try registry.environment.write { t in
            for i in 0..<1000 { try t.put(big, for: "filler-\(i)", in: "meta") }
        }
        #expect(registry.environment.mapSize > before)
        #expect(try registry.environment.read { t in try t.get("filler-999", in: "meta") } == big)
    }

    @Test func aDroppedSignalIsCaughtByThePoll() throws {
        let group = TemporaryGroup()
        let writer = try group.open(signal: false)
        let observer = try ChangeObserver(container: try group.open(), pollInterval: 0.05)
        #expect(observer.usesInotify)
        let context = writer.newContext(author: "Quiet")
        try context.insert(Fixtures.article("unsignalled"))
        let token = try context.save().token
        #expect(try observer.next(timeout: 30) == token)
    }

    @Test func signalsReachTheStreamAndTheCallbackInTheSameProcess() async throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let observer = try ChangeObserver(container: container, pollInterval: 60)
        let called = Protected<[HistoryToken]>([])
        observer.onChange { token in called.withLock { $0.append(token) } }
        let stream = observer.changes()
        let context = container.newContext(author: "Here")
        try context.insert(Fixtures.article("signalled"))
        let token = try context.save().token
        var iterator = stream.makeAsyncIterator()
        let received = try await iterator.next()
        #expect(received == token)
        observer.stop()
        #expect(try await iterator.next() == nil)
    }

    @Test func mergingTwiceLeavesTheSameViewAsAFreshFetch() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let registry = try TokenRegistry(group: group.path)
        let view = try ViewContext(container: container, registry: registry, consumer: "View", author: "View")
        try view.sync()
        let writer = container.newContext(author: "Other")
        let cat = try writer.insert(ReadLater.Category(name: "Swift"))
        var ids: [ObjectID] = []
        for i in 0..<10 {
            ids.append(
                try writer.insert(ReadLater.Article(title: "a\(i)", url: "https://x.example/\(i)", category: cat)))
        }
        let saved = try writer.save()
        let start = try #require(saved.token)
        try writer.update(saved.permanentID(for: ids[0]), ["isRead": true])
        try writer.delete(saved.permanentID(for: ids[1]))
        try writer.save()
        let own = container.newContext(author: "View")
        try own.update(saved.permanentID(for: ids[2]), ["title": "mine"])
        try own.save()

        var reported: [Int64] = []
        let result = try view.sync { reported.append($0.token.value) }
        #expect(
            result.transactions == 2 && reported == [start.value, start.value + 1],
            "own transaction merged, not reported")
        let fresh = try container.model.entities.flatMap { try container.newContext().fetch(FetchRequest($0.name)) }
        #expect(Dictionary(uniqueKeysWithValues: fresh.map { ($0.id, $0) }) == view.objects)

        // At-least-once: go back and merge the same transactions again.
        try registry.reset("View", to: HistoryToken(storeID: container.storeID, value: start.value - 1))
        try view.sync()
        #expect(Dictionary(uniqueKeysWithValues: fresh.map { ($0.id, $0) }) == view.objects)
        #expect(view.objects(of: "Article").first { $0.id == saved.permanentID(for: ids[2]) }?["title"] == "mine")
    }
}
