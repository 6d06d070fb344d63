import Foundation
import ReadLater
import SharedStore
import SharedStoreSQLite
import Testing

@testable import SharedStoreCore

/// Issue 9 at the library's level: tokens across a restore (invariant 2), group files (8), the
/// registry's damage and deadlines (7). The scenarios 07–10 drive the same through the targets.
@Suite struct HardeningTests {
    func helper(_ args: String...) throws -> Child { try Child("sharedstore-helper", args) }

    /// Copies the store file as SQLite's backup would leave it (after a checkpoint, no -wal).
    func snapshot(_ container: Container, to path: String) throws {
        try container.writer.withConnection { c in try c.execute("VACUUM INTO '\(path)'") }
    }

    @Test func aRestoredStoreNeverHandsOutATokenTwiceAndItsConsumersReload() throws {
        let group = TemporaryGroup()
        let old = group.root + "/old.sqlite"
        var tokensBefore: [Int64] = []
        do {
            let container = try group.open()
            let registry = try TokenRegistry(group: group.path)
            let view = try ViewContext(container: container, registry: registry, consumer: "Viewer")
            let writer = container.newContext(author: "Writer")
            tokensBefore += try Fixtures.saveArticles(writer, count: 3).map(\.value)
            try view.sync()
            try snapshot(container, to: old)
            tokensBefore += try Fixtures.saveArticles(writer, count: 5).map(\.value)
            #expect(try view.sync().token.value == 8)
        }
        // Put the old copy back, as a restore would.
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: group.storePath + suffix) }
        try FileManager.default.copyItem(atPath: old, toPath: group.storePath)

        let container = try group.open()
        let registry = try TokenRegistry(group: group.path)
        #expect(try registry.highWater(storeID: container.storeID) == 8)
        #expect(try registry.reconcile(container) == 4...8)
        #expect(try registry.reconcile(container) == nil, "reconciling twice records nothing more")
        let writer = container.newContext(author: "Writer")
        let after = try Fixtures.saveArticles(writer, count: 7).map(\.value)
        #expect(Set(after).isDisjoint(with: tokensBefore), "no token is handed out twice")
        #expect(after.allSatisfy { $0 > 9 })
        expectStoreError(.historyExpired) {
            _ = try container.fetchHistory(HistoryRequest(after: HistoryToken(storeID: container.storeID, value: 6)))
        }
        // A token before the restore point still reads on.
        #expect(
            try container.fetchHistory(HistoryRequest(after: HistoryToken(storeID: container.storeID, value: 3))).count
                == 8)

        let report = try HistoryCleaner.clean(container: container, registry: registry)
        #expect(report.deleted == 0, "a consumer holding a lost token holds everything back")
        let view = try ViewContext(container: container, registry: registry, consumer: "Viewer")
        let result = try view.sync()
        #expect(result.expired && result.reloaded)
        #expect(view.objects.count == (try container.newContext().count(FetchRequest("Article"))))
    }

    @Test func theLargestTokenFailsASaveClearly() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let context = container.newContext(author: "A")
        try Fixtures.saveArticles(context, count: 1)
        try container.writer.withConnection { c in
            try c.execute(
                """
                INSERT INTO ss_history(token, timestamp, author, context, process, executable, entities, changes)
                VALUES (9223372036854775807, 0, 'x', NULL, 0, 'x', 0, x'0100')
                """)
        }
        let reopened = try group.open()
        let again = reopened.newContext(author: "A")
        try again.insert(Fixtures.article("max"))
        expectStoreError(.tokenSpaceExhausted) { _ = try again.save() }
        #expect(try reopened.newContext().count(FetchRequest("Article")) == 1)
        // A registry that claims the largest token (damaged) cannot move a store past it.
        let fresh = try TemporaryGroup().open()
        expectStoreError(.tokenSpaceExhausted) { _ = try fresh.adoptHighWater(Int64.max - 1) }
    }

    @Test func groupFilesAreOpenedOnlyAsRegularFilesInAPrivateDirectory() throws {
        let group = TemporaryGroup()
        _ = try group.open()
        let victim = group.root + "/victim"
        try Data("precious".utf8).write(to: URL(fileURLWithPath: victim))
        for name in [Container.storeFileName, "changes.signal", "Store.sqlite-wal"] {
            let path = group.path + "/" + name
            try? FileManager.default.moveItem(atPath: path, toPath: path + ".moved")
            try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: victim)
            expectStoreError(.fileAccess) { _ = try group.open() }
            try FileManager.default.removeItem(atPath: path)
            try? FileManager.default.moveItem(atPath: path + ".moved", toPath: path)
        }
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "precious")
        let signal = group.path + "/changes.signal"
        try FileManager.default.removeItem(atPath: signal)
        #expect(mkfifo(signal, 0o600) == 0)
        expectStoreError(.fileAccess) { _ = try group.open() }
        try FileManager.default.removeItem(atPath: signal)
        #expect(chmod(group.path, 0o757) == 0)
        expectStoreError(.fileAccess) { _ = try group.open() }
        expectStoreError(.fileAccess) { _ = try TokenRegistry(group: group.path) }
        #expect(chmod(group.path, 0o700) == 0)
        _ = try group.open()
    }

    @Test func aDamagedRegistryIsReportedAndRepaired() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let path = group.path + "/" + TokenRegistry.fileName
        do {
            let registry = try TokenRegistry(group: group.path)
            try registry.advance("A", to: try container.currentToken())
            try registry.register("B")
        }
        #expect(TokenRegistry.damage(group: group.path) == nil)
        #expect(truncate(path, 5000) == 0)
        expectStoreError(.registryDamaged) { _ = try TokenRegistry(group: group.path) }
        #expect(TokenRegistry.damage(group: group.path) != nil)
        let repair = try TokenRegistry.repair(group: group.path)
        #expect(repair.moved?.hasPrefix(path + ".damaged-") == true)
        #expect(FileManager.default.fileExists(atPath: repair.moved ?? ""))
        let registry = try TokenRegistry(group: group.path)
        #expect(try registry.repairedAt() != nil)
        let view = try ViewContext(container: container, registry: registry, consumer: "A")
        let result = try view.sync()
        #expect(result.expired && result.reloaded, "after a repair, every consumer reloads in full")
    }

    @Test(.tags(.multiProcess)) func aFrozenRegistryWriterMakesOthersFailWithBusyNamingIt() throws {
        let group = TemporaryGroup()
        _ = try group.open()
        let holder = try helper("hold-write", "--group", group.path)
        try holder.waitForLine("holding") { $0.contains("holding") }
        kill(holder.process.processIdentifier, SIGSTOP)
        defer { holder.kill9() }
        let registry = try TokenRegistry(group: group.path, busyTimeout: 0.3)
        #expect(try registry.consumers().isEmpty, "a read takes no write lock")
        do {
            try registry.remove("Nobody")
            Issue.record("a write went through a frozen writer's transaction")
        } catch let error as StoreError {
            #expect(error.code == .busy)
            #expect(error.message.contains("process \(holder.process.processIdentifier)"))
        }
    }

    @Test(.tags(.multiProcess)) func evictionTakesOnlyConsumersThatAreBehind() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let registry = try TokenRegistry(group: group.path)
        let context = container.newContext(author: "W")
        let tokens = try Fixtures.saveArticles(context, count: 2)
        try registry.advance("UpToDate", to: tokens[1])
        try registry.advance("Behind", to: tokens[0])
        try registry.register("Never")
        let evicted = try registry.evict(notSeenFor: 0, behind: tokens[1])
        #expect(Set(evicted) == ["Behind", "Never"])
    }

    @Test func controlCharactersAreShownEscaped() {
        #expect(TextSafety.visible("plain") == "plain")
        #expect(TextSafety.visible("evil\u{1B}]0;x\u{07}\n\t\u{7F}\u{85}") == "evil\\e]0;x\\u{7}\\n\\t\\u{7f}\\u{85}")
        #expect(TextSafety.containsControl("a\tb", allowingTab: true) == false)
        #expect(TextSafety.containsControl("a\u{9B}b"))
    }
}
