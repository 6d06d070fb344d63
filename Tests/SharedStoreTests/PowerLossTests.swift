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

    func ahead(_ container: Container) throws -> String? {
        try container.read { s in try s.meta(.tokenLeaseAhead) }
    }

    /// Waits, 30 s at most, until the sync of a lease ahead that a save started has ended: on the
    /// sync's own queue, not by polling.
    func waitForTheAheadSync(_ container: Container) throws {
        guard container.leaseSyncsEnded(within: 30) else {
            throw StoreError(.busy, "the sync of the lease ahead did not end in 30 s")
        }
    }

    @Test func aSaveLeasesTokensAheadAndExtendsTheLeaseBeforeItRunsOut() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let span = Container.leaseSpan
        let writer = container.newContext(author: "Writer")
        _ = try Fixtures.saveArticles(writer, count: 1)
        #expect(try lease(container) == "\(span) \(Container.bootID)")
        #expect(container.leaseAhead.syncedCommits.load(ordering: .relaxed) == 1, "a new store's lease is synced")
        // Until half the lease is used, nothing more.
        _ = try Fixtures.saveArticles(writer, count: Int(span / 2) - 1)
        #expect(try ahead(container) == nil)
        // The next save records the next lease ahead, and syncs the WAL after its commit.
        _ = try Fixtures.saveArticles(writer, count: 1)
        #expect(try ahead(container) == "\(2 * span) \(Container.bootID)")
        try waitForTheAheadSync(container)
        #expect(container.leaseAhead.synced.load(ordering: .relaxed) == 2 * span)
        #expect(container.leaseAhead.syncs.load(ordering: .relaxed) == 1)
        // In force here at once; the next write makes it the lease of every process.
        #expect(try lease(container) == "\(span) \(Container.bootID)")
        _ = try Fixtures.saveArticles(writer, count: 1)
        #expect(try lease(container) == "\(2 * span) \(Container.bootID)")
        let other = try group.open()
        let tokens = try Fixtures.saveArticles(other.newContext(author: "Other"), count: Int(span / 2))
        #expect(tokens.last?.value == span + 2, "the lease ahead gives no token")
        #expect(other.leaseThrough.load(ordering: .relaxed) == 2 * span)
        // No lease ran out: none was taken under the write lock since the first.
        #expect(container.leaseAhead.syncedCommits.load(ordering: .relaxed) == 1)
        #expect(other.leaseAhead.syncedCommits.load(ordering: .relaxed) == 0)
        // A durable store needs no lease: each commit is on disk before anyone sees it.
        var options = Container.Options()
        options.synchronous = .full
        let second = TemporaryGroup()
        let durable = try second.open(options: options)
        _ = try Fixtures.saveArticles(durable.newContext(author: "Writer"), count: 3)
        #expect(try lease(durable) == nil)
    }

    /// A disk slower than half a lease of saves (here a sync that never ends): the lease runs out,
    /// and the save takes the next one in a synced commit as before. No token passes the lease.
    @Test func aLeaseThatRunsOutBeforeItsSyncEndsIsTakenInASyncedCommit() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let span = Container.leaseSpan
        let writer = container.newContext(author: "Writer")
        _ = try Fixtures.saveArticles(writer, count: 1)
        container.leaseAhead.running.store(true, ordering: .releasing)
        let tokens = try Fixtures.saveArticles(writer, count: Int(span))
        #expect(tokens.last?.value == span + 1)
        #expect(try lease(container) == "\(2 * span) \(Container.bootID)")
        #expect(container.leaseAhead.syncedCommits.load(ordering: .relaxed) == 2)
        #expect(try ahead(container) == nil, "a lease ahead is recorded only with a sync to run")
        container.leaseAhead.running.store(false, ordering: .releasing)
    }

    /// The sync of a lease ahead opens the WAL by name: a symlink, a FIFO or a missing file in its
    /// place is refused at once (never followed, never waited on), and the lease then runs out.
    @Test func theLeaseSyncRefusesWhatIsNotARegularFile() throws {
        let group = TemporaryGroup()
        try FileManager.default.createDirectory(atPath: group.root, withIntermediateDirectories: true)
        let path = group.root + "/probe"
        #expect(Container.openForSync(path) == -ENOENT)
        #expect(mkfifo(path, 0o600) == 0)
        #expect(Container.openForSync(path) == -EINVAL)
        try FileManager.default.removeItem(atPath: path)
        #expect(symlink(group.root, path) == 0)
        #expect(Container.openForSync(path) == -ELOOP)
        try FileManager.default.removeItem(atPath: path)
        #expect(FileManager.default.createFile(atPath: path, contents: Data([1])))
        let fd = Container.openForSync(path)
        #expect(fd >= 0)
        if fd >= 0 { close(fd) }
    }

    /// A process's synced lease ahead is in force only while the store holds it: after the store
    /// was put back to a copy with a smaller lease and none ahead (hostile review), the process
    /// takes the next lease in a synced commit, never its memory's.
    @Test func aSyncedLeaseAheadIsPromotedOnlyWhileTheStoreHoldsIt() throws {
        let span = Container.leaseSpan
        let group = TemporaryGroup()
        let container = try group.open()
        let writer = container.newContext(author: "Writer")
        _ = try Fixtures.saveArticles(writer, count: Int(span / 2) + 1)
        try waitForTheAheadSync(container)
        #expect(container.leaseAhead.synced.load(ordering: .relaxed) == 2 * span)
        let other = try group.open()
        try other.write(lease: false) { s in
            try s.setMeta(.tokenLease, "\(span) \(Container.bootID)")
            try SchemaSQL.deleteMeta(s.c, .tokenLeaseAhead)
        }
        // No sync of a new lease ahead can end (as on a slow disk): the lease runs out.
        container.leaseAhead.running.store(true, ordering: .releasing)
        let tokens = try Fixtures.saveArticles(writer, count: Int(span / 2))
        container.leaseAhead.running.store(false, ordering: .releasing)
        #expect(tokens.last?.value == span + 1)
        #expect(try lease(container) == "\(2 * span) \(Container.bootID)")
        #expect(container.leaseAhead.syncedCommits.load(ordering: .relaxed) == 2, "taken synced, not from memory")
        // A lease ahead recorded again in this process's own commit is in force once that is synced.
        _ = try Fixtures.saveArticles(writer, count: Int(span / 2) + 1)
        #expect(try ahead(container) == "\(3 * span) \(Container.bootID)")
        try waitForTheAheadSync(container)
        _ = try Fixtures.saveArticles(writer, count: 1)
        #expect(try lease(container) == "\(3 * span) \(Container.bootID)")
    }

    /// A store behind the registry's high-water mark (put back to an older copy) records the
    /// numbers up to it as lost and gives the next to its own transaction: that number is past the
    /// lease, which a synced commit moves on first (hostile review: a power loss took the plain
    /// commit, and the next adoption gave the same number again).
    @Test func adoptingAHighWaterMarkLeasesTheNumberItGives() throws {
        let span = Container.leaseSpan
        let group = TemporaryGroup()
        let container = try group.open()
        _ = try Fixtures.saveArticles(container.newContext(author: "Writer"), count: 1)
        #expect(try container.adoptHighWater(3 * span) == 2...(3 * span))
        #expect(try container.currentToken().value == 3 * span + 1)
        #expect(try lease(container) == "\(4 * span + 1) \(Container.bootID)")
        #expect(container.leaseAhead.syncedCommits.load(ordering: .relaxed) == 2)
        // Within the lease, nothing more.
        #expect(try container.adoptHighWater(3 * span + 100) == (3 * span + 2)...(3 * span + 100))
        #expect(container.leaseAhead.syncedCommits.load(ordering: .relaxed) == 2)
    }

    /// A lease is never taken lower than one of this boot: another process that found the lease
    /// used up before a number past the newest was covered (an adoption) would have lowered it
    /// below the number about to be given (second hostile review). A container that records no
    /// history adopts a high-water mark under the store's lease too.
    @Test func aLeaseNeverGoesDownAndCoversEveryAdoptedNumber() throws {
        let span = Container.leaseSpan
        let group = TemporaryGroup()
        let p = try group.open()
        _ = try Fixtures.saveArticles(p.newContext(author: "Writer"), count: 1)
        try p.leaseCovering(3 * span + 1)
        #expect(try lease(p) == "\(4 * span + 1) \(Container.bootID)")
        let q = try group.open()
        try q.writer.withConnection { c in try q.extendLease(c) }
        #expect(try lease(q) == "\(4 * span + 1) \(Container.bootID)", "not lowered to the newest token's")
        var options = Container.Options()
        options.historyTracking = false
        let untracked = try group.open(options: options)
        #expect(try untracked.adoptHighWater(6 * span) == 2...(6 * span))
        #expect(try lease(p) == "\(7 * span + 1) \(Container.bootID)")
    }

    /// A lease ahead of an earlier boot beside a lease of this one: a version that does not read
    /// it met the reboot. The numbers it covered are recorded as lost before any is given.
    @Test func aLeaseAheadOfAnEarlierBootIsRecordedAsLost() throws {
        let span = Container.leaseSpan
        let group = TemporaryGroup()
        do {
            let container = try group.open()
            _ = try Fixtures.saveArticles(container.newContext(author: "Writer"), count: 1)
            try container.write(lease: false) { s in try s.setMeta(.tokenLeaseAhead, "\(3 * span) earlier") }
        }
        let container = try group.open()
        let token = try Fixtures.saveArticles(container.newContext(author: "Writer"), count: 1)
        #expect(try container.lostTokenRanges() == [2...(3 * span)])
        #expect(token.first?.value == 3 * span + 2)
        #expect(try ahead(container) == nil)
        #expect(try lease(container) == "\(4 * span + 1) \(Container.bootID)")
    }

    /// A power loss after a lease ahead was committed: whether or not its sync ended, tokens
    /// through it may have been given. The first write after the reboot records the numbers
    /// through the larger lease as lost, and a migration as the first write does the same.
    @Test(.tags(.multiProcess)) func afterARebootTheLeaseAheadCountsAsLeased() throws {
        let span = Container.leaseSpan
        for migrate in [false, true] {
            let group = TemporaryGroup()
            let v1 = ["--json", "--group", group.path] + (migrate ? ["--model-version", "1"] : [])
            _ = try run("main-app", ["add", "--title", "a", "--url", "https://a.example/"] + v1, boot: "one")
            do {
                let container = try group.open(migrate ? try ReadLater.model(version: 1) : ReadLater.model)
                try container.write(lease: false) { s in try s.setMeta(.tokenLeaseAhead, "\(3 * span) one") }
            }
            if migrate {
                _ = try run("storectl", ["migrate", "--json", "--group", group.path], boot: "two")
            } else {
                let add = ["add", "--title", "b", "--url", "https://b.example/", "--json", "--group", group.path]
                _ = try run("main-app", add, boot: "two")
            }
            let container = try group.open()
            #expect(try container.lostTokenRanges() == [2...(3 * span)], "migrate: \(migrate)")
            #expect(try container.currentToken().value == 3 * span + 2, "after the transaction marking the loss")
            #expect(try ahead(container) == nil, "a lease past it replaced the lease ahead")
        }
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
