import Foundation
import ReadLater
import SharedStore
import SharedStoreMirror
import SharedStorePostgres
import SharedStoreSupport
import Testing

@testable import SharedStoreCore

/// The randomized convergence test of issue 19: three machines, each with `storectl mirror
/// --follow`, and random adds, edits, deletes, category renames onto colliding names, cleaner
/// evictions, kill -9 of followers, server restarts, a whole-group restore from a backup and
/// one machine on model version 1 until it is upgraded mid-run. It prints its seed
/// (`SHAREDSTORE_CHAOS_SEED` replays one). At the end every store equals the others and the
/// server's state (`storectl mirror --verify`), and every acknowledged save is there or was
/// overwritten by another machine's later change in the server's order.
///
/// It restarts the server, so it runs alone: `Scripts/test.sh` runs it after the other tests
/// for `SHAREDSTORE_CHAOS_SECONDS` (a short run), `Scripts/stress.sh --mirror` for 10 minutes.
@Suite(
    .enabled(
        if: ProcessInfo.processInfo.environment["PGHOST"] != nil
            && ProcessInfo.processInfo.environment["SHAREDSTORE_CHAOS_SECONDS"] != nil,
        "SHAREDSTORE_CHAOS_SECONDS and a PostgreSQL server (PGHOST)"), .tags(.postgres))
struct MirrorChaosTests {
    typealias Database = MirrorTests.Database

    @Test(.tags(.multiProcess)) func threeMachinesConvergeWhateverHappens() throws {
        let env = ProcessInfo.processInfo.environment
        let seconds = Double(env["SHAREDSTORE_CHAOS_SECONDS"] ?? "") ?? 20
        let seed = UInt64(env["SHAREDSTORE_CHAOS_SEED"] ?? "") ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("mirror chaos: seed \(seed), \(seconds) s (SHAREDSTORE_CHAOS_SEED=\(seed) replays it)")
        var chaos = try Chaos(seed: seed, database: try Database())
        defer { chaos.stopFollowers() }
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline { try chaos.step(progress: 1 - deadline.timeIntervalSinceNow / seconds) }
        try chaos.finish()
        print("mirror chaos: seed \(seed): \(chaos.counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" })")
    }
}

/// One machine of the chaos run: a group directory, the app (this process, through its own
/// container), and its follower process.
final class ChaosMachine {
    let group = TemporaryGroup()
    var modelVersion: Int
    var container: Container?
    var follower: Child?
    /// The last state this machine's app saved of each article (nil: deleted), by global id,
    /// with whether it was pushed before a restore could lose it.
    var acknowledged: [UUID: String?] = [:]

    init(modelVersion: Int) { self.modelVersion = modelVersion }

    func open() throws -> Container {
        if let container { return container }
        let c = try group.open(try ReadLater.model(version: modelVersion))
        container = c
        return c
    }
}

struct Chaos {
    var random: SeededRandom
    let database: MirrorTests.Database
    let machines = [ChaosMachine(modelVersion: 3), ChaosMachine(modelVersion: 3), ChaosMachine(modelVersion: 1)]
    var counts: [String: Int] = [:]
    /// What the run did, in order: each step's machine, kind and article (a failure lists the
    /// steps on the articles it names, with the evictions, kills and restarts around them).
    var log: [(at: Date, machine: Int, what: String, article: UUID?)] = []
    let seed: UInt64
    var backup: String?
    var restored = false
    var upgraded = false
    let categories = ["Swift", "Go", "Rust", "SQLite", "LMDB"]

    init(seed: UInt64, database: MirrorTests.Database) throws {
        self.seed = seed
        random = SeededRandom(state: seed)
        self.database = database
        // The old machine saves first and mirrors, so that its payloads of model 1 reach the others.
        for _ in 0..<3 { try add(machines[2]) }
        try mirrorOnce(machines[2])
        for m in machines { try startFollower(m) }
    }

    mutating func note(_ what: String, _ m: ChaosMachine? = nil, article: UUID? = nil, detail: String = "") {
        counts[what, default: 0] += 1
        let machine = m.flatMap { m in machines.firstIndex { $0 === m } } ?? -1
        log.append((Date(), machine, detail.isEmpty ? what : "\(what) \(detail)", article))
    }

    mutating func pick<T>(_ items: [T]) -> T { items[Int.random(in: 0..<items.count, using: &random)] }

    // MARK: - Steps

    /// Kinds of step left out (`SHAREDSTORE_CHAOS_SKIP=restore,evict,…`: to narrow a failure down).
    static let skipped = Set(
        (ProcessInfo.processInfo.environment["SHAREDSTORE_CHAOS_SKIP"] ?? "").split(separator: ",").map(String.init))

    mutating func step(progress: Double) throws {
        let skip = Self.skipped
        if !upgraded && progress > 0.4 && !skip.contains("upgrade") { try upgrade(machines[2]) }
        if backup == nil && progress > 0.2 && !skip.contains("restore") { try takeBackup(machines[0]) }
        if !restored && progress > 0.6, backup != nil { try restore(machines[0]) }
        let m = pick(machines.filter { $0.modelVersion == 3 || !upgraded })
        let roll = Int.random(in: 0..<100, using: &random)
        let kind =
            [(35, "add"), (55, "edit"), (65, "delete"), (80, "rename"), (86, "evict"), (94, "kill"), (97, "server")]
            .first { roll < $0.0 }?.1 ?? "pause"
        if skip.contains(kind) { return }
        do {
            try run(kind, m)
        } catch let error as StoreError where [.conflict, .objectNotFound, .uniqueness].contains(error.code) {
            // A pull changed what the app read: the save fails, as in any app, and is not
            // acknowledged.
            note("refused", m, detail: kind)
        }
    }

    mutating func run(_ kind: String, _ m: ChaosMachine) throws {
        switch kind {
        case "add": try add(m)
        case "edit": try edit(m)
        case "delete": try delete(m)
        case "rename": try rename(m)
        case "evict": try evict(m)
        case "kill": try killFollower(m)
        case "server": try restartServer()
        default: try Self.settleWait(0.05)
        }
    }

    static func settleWait(_ seconds: TimeInterval) throws {
        // A pause between bursts, waited on a pipe that nothing writes: no sleep call.
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return }
        defer { fds.forEach { close($0) } }
        var p = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
        _ = poll(&p, 1, Int32(seconds * 1000))
    }

    mutating func add(_ m: ChaosMachine) throws {
        let c = try m.open()
        let context = c.newContext(author: "MainApp")
        let n = Int.random(in: 0..<1_000_000, using: &random)
        var relationships: [String: ObjectID?] = [:]
        if Bool.random(using: &random) { relationships["category"] = try category(pick(categories), in: context) }
        let id = try context.insert(
            "Article", ["title": .string("t\(n)"), "url": .string("https://\(n).example"), "createdAt": .date(Date())],
            relationships: relationships)
        let saved = try context.save()
        let gid = try c.newContext().globalID(of: saved.permanentID(for: id))
        m.acknowledged[gid] = "t\(n)|false"
        note("add", m, article: gid)
    }

    /// The category named `name` in `context`'s store, made when missing.
    func category(_ name: String, in context: ObjectContext) throws -> ObjectID {
        let label = ReadLater.categoryName(context.container.model)
        if let found = try context.fetch(FetchRequest("Category", where: Key(label) == .string(name))).first {
            return found.id
        }
        return try context.insert("Category", [label: .string(name)])
    }

    mutating func someArticle(_ m: ChaosMachine) throws -> (ObjectContext, Snapshot)? {
        let context = try m.open().newContext(author: "MainApp")
        let all = try context.fetch(FetchRequest("Article", limit: 200))
        guard !all.isEmpty else { return nil }
        return (context, pick(all))
    }

    mutating func edit(_ m: ChaosMachine) throws {
        guard let (context, a) = try someArticle(m) else { return }
        let read = !(a["isRead"].boolValue ?? false)
        let title = "e\(Int.random(in: 0..<1_000_000, using: &random))"
        try context.update(a.id, ["isRead": .bool(read), "title": .string(title)])
        try context.save()
        let gid = try context.globalID(of: a.id)
        m.acknowledged[gid] = "\(title)|\(read)"
        note("edit", m, article: gid, detail: "\(title)|\(read)")
    }

    mutating func delete(_ m: ChaosMachine) throws {
        guard let (context, a) = try someArticle(m) else { return }
        let gid = try context.globalID(of: a.id)
        try context.delete(a.id)
        try context.save()
        m.acknowledged[gid] = .some(nil)
        note("delete", m, article: gid)
    }

    /// Renames a category onto another name — often one another machine uses: they merge.
    mutating func rename(_ m: ChaosMachine) throws {
        let context = try m.open().newContext(author: "MainApp")
        let label = ReadLater.categoryName(context.container.model)
        let all = try context.fetch(FetchRequest("Category"))
        guard !all.isEmpty else { return }
        let target = pick(categories)
        let c = pick(all)
        // On this machine the name is free, or this is a no-op: a rename onto a taken name here
        // is a uniqueness error, as in any save.
        guard try context.fetch(FetchRequest("Category", where: Key(label) == .string(target))).isEmpty else { return }
        try context.update(c.id, [label: .string(target)])
        try context.save()
        note("rename")
    }

    mutating func evict(_ m: ChaosMachine) throws {
        if ProcessInfo.processInfo.environment["SHAREDSTORE_CHAOS_DUMP"] != nil {
            let max = try PostgresConnection(database.conninfo).execute(
                "SELECT max(sequence) FROM sharedstore_mirror.transactions")
            print("mirror chaos: evict \(try m.open().storeID) at server sequence \(max.first?[0] ?? "-")")
        }
        let cleaner = try Child(
            "history-cleaner",
            ["--evict-after", "0", "--group", m.group.path, "--json", "--model-version", String(m.modelVersion)])
        #expect(try cleaner.waitForExit() == 0)
        note("evict", m)
    }

    mutating func killFollower(_ m: ChaosMachine) throws {
        m.follower?.kill9()
        _ = try m.follower?.waitForExit()
        try startFollower(m)
        note("kill", m)
    }

    func startFollower(_ m: ChaosMachine) throws {
        m.follower = try Child(
            "storectl",
            ["mirror", "--follow", "--group", m.group.path, "--json", "--model-version", String(m.modelVersion)],
            environment: database.environment)
    }

    func stopFollower(_ m: ChaosMachine) throws {
        guard let f = m.follower else { return }
        kill(f.process.processIdentifier, SIGTERM)
        let dump = ProcessInfo.processInfo.environment["SHAREDSTORE_CHAOS_DUMP"]
        do {
            // With a dump asked for, the follower is looked at as the deadline found it, then ended.
            _ = try f.waitForExit(timeout: 30, terminating: dump == nil)
        } catch {
            if let dump {
                defer { f.process.terminate() }
                let gdb = Process()
                gdb.executableURL = URL(fileURLWithPath: "/usr/bin/gdb")
                gdb.arguments = ["-p", String(f.process.processIdentifier), "-batch", "-ex", "thread apply all bt 25"]
                // Whether it still runs, and where: a zombie the harness missed, or a process
                // blocked in the kernel.
                let pid = f.process.processIdentifier
                let state =
                    (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8))?
                    .split(separator: "\n").first { $0.hasPrefix("State:") } ?? "State: gone"
                let wchan = (try? String(contentsOfFile: "/proc/\(pid)/wchan", encoding: .utf8)) ?? "-"
                // Each thread's state and kernel stack (a thread blocked in the kernel has no
                // user-space frames worth reading).
                var text = "pid \(pid) \(state) wchan \(wchan)\n"
                for t in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? [] {
                    let status = (try? String(contentsOfFile: "/proc/\(pid)/task/\(t)/status", encoding: .utf8)) ?? ""
                    let line = status.split(separator: "\n").first { $0.hasPrefix("State:") } ?? "State: ?"
                    let stack = (try? String(contentsOfFile: "/proc/\(pid)/task/\(t)/stack", encoding: .utf8)) ?? "-"
                    text += "thread \(t) \(line)\n\(stack)"
                }
                _ = FileManager.default.createFile(atPath: dump + ".gdb", contents: Data(text.utf8))
                let out = FileHandle(forWritingAtPath: dump + ".gdb")
                _ = try? out?.seekToEnd()
                gdb.standardOutput = out ?? FileHandle.nullDevice
                gdb.standardError = out ?? FileHandle.nullDevice
                try? gdb.run()
                gdb.waitUntilExit()
            }
            throw error
        }
        m.follower = nil
    }

    func stopFollowers() { for m in machines { try? stopFollower(m) } }

    /// Stops and starts the server (`pg_ctl restart` with the options it was started with).
    mutating func restartServer() throws {
        let env = ProcessInfo.processInfo.environment
        guard let bin = env["SHAREDSTORE_PG_BIN"], let dir = env["SHAREDSTORE_PG_DIR"] else { return }
        let asUser = (env["SHAREDSTORE_PG_AS"] ?? "").split(separator: " ").map(String.init)
        let command =
            ["/usr/bin/env"] + asUser + [
                "\(bin)/pg_ctl", "-D", "\(dir)/data", "-w", "-t", "60", "restart", "-m", "fast",
            ]
        // posix_spawn and waitpid: the server pg_ctl starts keeps no pipe of ours open (its
        // output goes to /dev/null), so waiting ends when pg_ctl does.
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for fd: Int32 in [0, 1, 2] { posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", O_RDWR, 0) }
        var argv = command.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        #expect(posix_spawn(&pid, command[0], &actions, nil, &argv, environ) == 0)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        #expect(status == 0, "pg_ctl restart")
        note("server-restart")
    }

    /// `storectl mirror --once` on `m` (its follower stopped meanwhile: one mirror per store).
    func mirrorOnce(_ m: ChaosMachine, verify: Bool = false) throws {
        let once = try Child(
            "storectl",
            ["mirror", "--group", m.group.path, "--json", "--model-version", String(m.modelVersion)]
                + (verify ? ["--verify"] : []), environment: database.environment)
        let status = try once.waitForExit()
        #expect(status == 0, "storectl mirror\(verify ? " --verify" : ""): \(once.lines.suffix(5))")
        if verify && status != 0, let dump = ProcessInfo.processInfo.environment["SHAREDSTORE_CHAOS_DUMP"] {
            let rows = try PostgresConnection(database.conninfo).execute(
                "SELECT sequence, origin, token, payload FROM sharedstore_mirror.transactions ORDER BY sequence")
            let origins = machines.map { ($0.container?.storeID.uuidString.lowercased() ?? "?") }
            var text = "machines: \(origins)\nverify: \(once.lines.prefix(3))\n"
            for r in rows { text += r.map { $0 ?? "NULL" }.joined(separator: " | ") + "\n" }
            try text.write(toFile: dump, atomically: true, encoding: .utf8)
        }
    }

    // MARK: - Restore and upgrade

    mutating func takeBackup(_ m: ChaosMachine) throws {
        try stopFollower(m)
        let path = m.group.root + "/backup"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        try m.open().writer.withConnection { c in try c.execute("VACUUM INTO '\(path)/Store.sqlite'") }
        try FileManager.default.copyItem(atPath: m.group.path + "/tokens.lmdb", toPath: path + "/tokens.lmdb")
        backup = path
        try startFollower(m)
        note("backup", m)
    }

    /// Puts the backup back in place of the whole group directory, after pushing everything
    /// (saves made since the backup are on the server: the restored store must take them back).
    mutating func restore(_ m: ChaosMachine) throws {
        guard let backup else { return }
        try stopFollower(m)
        try mirrorOnce(m)
        m.container = nil
        let fm = FileManager.default
        for name in try fm.contentsOfDirectory(atPath: m.group.path) {
            try fm.removeItem(atPath: m.group.path + "/" + name)
        }
        for name in ["Store.sqlite", "tokens.lmdb"] {
            try fm.copyItem(atPath: backup + "/" + name, toPath: m.group.path + "/" + name)
        }
        restored = true
        // What the replaced copy saved and never sent (it made and deleted an object between
        // two uploads) is gone with it, as on any machine put back to a backup.
        let origin = try m.open().storeID.uuidString.lowercased()
        let sent = Set(
            try PostgresConnection(database.conninfo).execute(
                "SELECT payload FROM sharedstore_mirror.transactions WHERE origin = $1", [origin]
            ).flatMap { row in
                m.acknowledged.keys.filter { row[0]?.contains(GlobalID.text($0)) == true }
            })
        m.acknowledged = m.acknowledged.filter { sent.contains($0.key) }
        try startFollower(m)
        note("restore", m)
        let max = try PostgresConnection(database.conninfo).execute(
            "SELECT max(sequence) FROM sharedstore_mirror.transactions")
        print("mirror chaos: restored \(try m.open().storeID) at server sequence \(max.first?[0] ?? "-")")
    }

    mutating func upgrade(_ m: ChaosMachine) throws {
        try stopFollower(m)
        m.container = nil
        let migrate = try Child("storectl", ["migrate", "--group", m.group.path, "--json"])
        #expect(try migrate.waitForExit() == 0)
        m.modelVersion = 3
        upgraded = true
        try startFollower(m)
        note("upgrade", m)
    }
}
