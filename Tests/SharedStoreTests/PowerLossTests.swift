import Foundation
import ReadLater
import SharedStore
import Testing

@testable import SharedStoreCore
@testable import SharedStoreSync

/// Issue 20 at the library's level: token leases keep invariant 2 across a power loss that took
/// the store's last commits and the registry's last advance with them. The power-loss scenario
/// (Scripts/scenarios/14-power-loss.sh, on a file system that forgets what was not synced)
/// drives the same through every target.
@Suite struct PowerLossTests {
    func lease(_ container: Container) throws -> String? {
        try container.read { s in try s.meta(.tokenLease) }
    }

    @Test func aSaveLeasesTokensAheadAndExtendsTheLeaseBeforeItRunsOut() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let writer = container.newContext(author: "Writer")
        _ = try Fixtures.saveArticles(writer, count: 1)
        #expect(try lease(container) == "\(Container.leaseSpan) \(Container.bootID)")
        let tokens = try Fixtures.saveArticles(writer, count: Int(Container.leaseSpan))
        #expect(tokens.last?.value == Container.leaseSpan + 1, "taking a lease gives no token")
        #expect(try lease(container) == "\(2 * Container.leaseSpan) \(Container.bootID)")
        // A durable store needs no lease: each commit is on disk before anyone sees it.
        var options = Container.Options()
        options.synchronous = .full
        let other = TemporaryGroup()
        let durable = try other.open(options: options)
        _ = try Fixtures.saveArticles(durable.newContext(author: "Writer"), count: 3)
        #expect(try lease(durable) == nil)
    }

    /// MDB_NOSYNC let a power loss write the meta page without the pages it names: the
    /// power-loss scenario found the registry damaged. The default syncs a commit's pages.
    @Test func theRegistrySyncsEachCommitsPagesByDefaultAndEverythingWhenDurable() throws {
        let group = TemporaryGroup()
        let registry = try TokenRegistry(group: group.path)
        #expect(registry.environment.flags.contains(.noMetaSync))
        #expect(!registry.environment.flags.contains(.noSync))
        let other = TemporaryGroup()
        let durable = try TokenRegistry(group: other.path, durability: .powerLoss)
        #expect(durable.environment.flags.isDisjoint(with: [.noSync, .noMetaSync]))
        // One process opening the same registry both ways shares one environment.
        let again = try TokenRegistry(group: group.path, durability: .powerLoss)
        try again.register("Durable")
        #expect(try registry.consumer("Durable") != nil)
    }

    @Test(.tags(.multiProcess)) func aStoreThatLostItsLastCommitsWithTheRegistryNeverGivesTheirTokensAgain() throws {
        let group = TemporaryGroup()
        let disk = group.root + "/after-the-loss.sqlite"
        var seen: [Int64] = []
        let storeID: UUID
        do {
            let container = try group.open()
            storeID = container.storeID
            let writer = container.newContext(author: "Writer")
            seen += try Fixtures.saveArticles(writer, count: 3).map(\.value)
            // What the disk holds when the power goes: the first three commits.
            try container.writer.withConnection { c in try c.execute("VACUUM INTO '\(disk)'") }
            // Seen by every process (merged, printed, mirrored), but never synced.
            seen += try Fixtures.saveArticles(writer, count: 5).map(\.value)
        }
        // The power loss: the store goes back to the disk's copy; the registry kept nothing.
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: group.storePath + suffix) }
        try? FileManager.default.removeItem(atPath: group.path + "/tokens.lmdb")
        try? FileManager.default.removeItem(atPath: group.path + "/tokens.lmdb-lock")
        try FileManager.default.copyItem(atPath: disk, toPath: group.storePath)

        // After the reboot, a target saves: its token is past every one the lease covered.
        let add = try Child(
            "main-app",
            ["add", "--title", "after", "--url", "https://after.example/", "--json", "--group", group.path],
            environment: ["SHAREDSTORE_BOOT_ID": "the-boot-after-the-loss"])
        #expect(try add.waitForExit() == 0)
        let value = tokenValue(add.lines.last.flatMap { json($0)["token"] as? String })
        #expect(!seen.contains(value), "token \(value) was given before the power loss")
        #expect(value == Container.leaseSpan + 2, "the lost lease is skipped, after one transaction marking it")
        let container = try group.open()
        #expect(try container.lostTokenRanges() == [4...Container.leaseSpan])
        // A token printed before the loss now reads as lost: its holder reloads in full.
        expectStoreError(.historyExpired) {
            _ = try container.fetchHistory(HistoryRequest(after: HistoryToken(storeID: storeID, value: 7)))
        }
        // Reopening in the same boot marks nothing more.
        let again = try Child(
            "main-app",
            ["add", "--title", "again", "--url", "https://again.example/", "--json", "--group", group.path],
            environment: ["SHAREDSTORE_BOOT_ID": "the-boot-after-the-loss"])
        #expect(try again.waitForExit() == 0)
        #expect(try container.lostTokenRanges() == [4...Container.leaseSpan])
        #expect(try container.currentToken().value == Container.leaseSpan + 3)
    }

    func run(_ tool: String, _ arguments: [String], boot: String) throws -> [String] {
        let child = try Child(tool, arguments, environment: ["SHAREDSTORE_BOOT_ID": boot])
        #expect(try child.waitForExit() == 0, "\(tool) \(arguments.prefix(2))")
        return child.lines
    }

    /// `storectl verify` checks the write lock with an empty write transaction: it took the
    /// lease logic with it, and after a reboot marked a thousand numbers lost and made a
    /// transaction. A check writes nothing.
    @Test(.tags(.multiProcess)) func verifyAfterARebootWritesNothing() throws {
        let group = TemporaryGroup()
        _ = try run(
            "share-extension",
            ["share", "--title", "a", "--url", "https://a.example/", "--json", "--group", group.path], boot: "one")
        let before = try group.open()
        let token = try before.currentToken()
        _ = try run("storectl", ["verify", "--json", "--group", group.path], boot: "two")
        #expect(try before.currentToken() == token)
        #expect(try before.lostTokenRanges().isEmpty)
        #expect(try lease(before) == "\(Container.leaseSpan) one")
    }

    /// After a reboot the lost range ends within 64 numbers of the newest: `storectl migrate`
    /// read its own migration from inside it, got "expired", and said another process had run it.
    @Test(.tags(.multiProcess)) func aMigrationAfterARebootSaysItRanHere() throws {
        let group = TemporaryGroup()
        let add = ["--json", "--group", group.path, "--model-version", "1"]
        _ = try run("main-app", ["add", "--title", "a", "--url", "https://a.example/"] + add, boot: "one")
        _ = try run("share-extension", ["share", "--title", "b", "--url", "https://b.example/"] + add, boot: "two")
        let lines = try run("storectl", ["migrate", "--json", "--group", group.path], boot: "two")
        #expect(json(lines.last ?? "")["migrated"] as? Bool == true, "\(lines)")
    }

    /// A migration runs when a store opens, in a transaction of its own that records history:
    /// as the first write after a reboot it took the next number, which the old lease covered.
    @Test(.tags(.multiProcess)) func aMigrationAsTheFirstWriteAfterARebootTakesNoLeasedNumber() throws {
        let group = TemporaryGroup()
        let v1 = ["--json", "--group", group.path, "--model-version", "1"]
        _ = try run("main-app", ["add", "--title", "a", "--url", "https://a.example/"] + v1, boot: "one")
        _ = try run("storectl", ["migrate", "--json", "--group", group.path], boot: "two")
        let container = try group.open()
        #expect(try container.lostTokenRanges() == [2...Container.leaseSpan])
        let migration = try container.fetchHistory(HistoryRequest()).last { $0.author == "Migration" }
        #expect(migration?.token.value == Container.leaseSpan + 2, "after the transaction marking the loss")
        #expect(try lease(container) == "\(2 * Container.leaseSpan + 2) two")
    }

    /// A non-empty `-journal` beside the store: rolling it back writes the store (a planted one
    /// could rewrite it, or name a file to delete). A command that only reads refused to apply it
    /// before issue 20, then (for a power loss during creation) applied it; it refuses again,
    /// saying what to do, and leaves every byte as it was.
    @Test(.tags(.multiProcess)) func aCommandThatOnlyReadsNeverAppliesAJournal() throws {
        let group = TemporaryGroup()
        _ = try run(
            "share-extension",
            ["share", "--title", "a", "--url", "https://a.example/", "--json", "--group", group.path], boot: "one")
        let journal = group.storePath + "-journal"
        #expect(
            FileManager.default.createFile(
                atPath: journal, contents: Data(repeating: 0xd9, count: 4096), attributes: [.posixPermissions: 0o600]))
        let before = try Data(contentsOf: URL(fileURLWithPath: group.storePath))
        let verify = try Child("storectl", ["verify", "--json", "--group", group.path])
        #expect(try verify.waitForExit() == 1)
        #expect(try Data(contentsOf: URL(fileURLWithPath: group.storePath)) == before)
        #expect(FileManager.default.fileExists(atPath: journal))
    }
}
