import Foundation
import ReadLater
import SharedStore
import SharedStoreMirror
import SharedStorePostgres

// MARK: - The mirror (issue 14), against the PostgreSQL server libpq's environment names

/// A database of its own on the server for one case, dropped at the end.
final class BenchDatabase {
    let name = "storebench_\(UUID().uuidString.prefix(8).lowercased())"
    init() throws { try PostgresConnection().createDatabase(name) }
    deinit { _ = try? PostgresConnection().dropDatabase(name) }
    var conninfo: String { "dbname=\(name)" }
}

/// Why the mirror cases did not run (nil: a server is named).
func mirrorSkipReason() -> String? {
    ProcessInfo.processInfo.environment["PGHOST"] == nil
        ? "no PostgreSQL server named (PGHOST unset): Scripts/bench.sh starts one" : nil
}

/// The server the mirror cases use, and whether it syncs its commits to disk.
func postgresDescription() -> String {
    guard mirrorSkipReason() == nil, let pg = try? PostgresConnection() else { return "none" }
    let fsync = (try? pg.fsyncSetting()) ?? nil ?? "?"
    return pg.serverDescription + ", fsync \(fsync)"
}

/// The directory of this executable: the targets and storectl sit beside it.
func binDirectory() -> String {
    URL(
        fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
    ).deletingLastPathComponent().path
}

/// `storectl mirror --follow` on `group`, through `database`, as users run it.
func startMirror(group: String, database: BenchDatabase) throws -> Process {
    try startProcess("storectl", ["mirror", "--follow", "--group", group, "--json"], database: database)
}

func article(_ i: Int) -> [String: Value] {
    [
        "title": .string("article \(i)"), "url": .string("https://example.com/\(i)"), "isRead": false,
        "createdAt": .date(Date()),
    ]
}

/// A commit on machine A until it is merged on machine B through the server: two
/// `storectl mirror --follow` processes, A's woken by the change signal, B's by LISTEN/NOTIFY.
func mirrorLatencyCase(_ s: Settings) throws -> Report {
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let db = try BenchDatabase()
    let a = try openStore(group: dir + "/a", model: ReadLater.model)
    let b = try openStore(group: dir + "/b", model: ReadLater.model)
    let mirrors = try [startMirror(group: dir + "/a", database: db), startMirror(group: dir + "/b", database: db)]
    defer { mirrors.forEach { $0.terminate() } }
    let observer = try ChangeObserver(container: b, pollInterval: 1)
    let writer = a.newContext(name: "bench", author: "Writer")
    let reader = b.newContext()
    let commits = s.pick(500, 100, 10)
    var latencies: [Double] = []
    for i in 0...commits {
        try writer.insert("Article", article(i))
        let t0 = now()
        try writer.save()
        // Until B's store holds it: B's change signal, then a count.
        let deadline = t0 + 30
        while try reader.count(FetchRequest("Article")) < i + 1 {
            guard now() < deadline else { throw BenchError("commit \(i) did not reach machine B in 30 s") }
            _ = try observer.next(timeout: 1)
        }
        // The first commit also waits for both mirrors to connect and prepare.
        if i > 0 { latencies.append((now() - t0) * 1000) }
    }
    observer.stop()
    return .object([
        ("case", .string("mirror-latency")), ("commits", .number(Double(latencies.count))),
        ("p50_ms", .number(round3(median(latencies)))), ("p99_ms", .number(round3(percentile(latencies, 0.99)))),
        ("max_ms", .number(round3(latencies.max() ?? 0))),
        ("note", .string("save() on A → the import committed on B, through two storectl mirror processes")),
    ])
}

/// Transactions per second a mirror uploads, and another applies, one article each.
func mirrorThroughputCase(_ s: Settings) throws -> Report {
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let db = try BenchDatabase()
    let a = try openStore(group: dir + "/a", model: ReadLater.model)
    let b = try openStore(group: dir + "/b", model: ReadLater.model)
    let n = s.pick(20_000, 5000, 200)
    let context = a.newContext(name: "bench", author: "Writer")
    for i in 0..<n {
        try context.insert("Article", article(i))
        try context.save()
    }
    let ma = try Mirror(
        container: a, registry: try TokenRegistry(group: dir + "/a"), connection: try PostgresConnection(db.conninfo))
    let mb = try Mirror(
        container: b, registry: try TokenRegistry(group: dir + "/b"), connection: try PostgresConnection(db.conninfo))
    var pushed = 0
    let pushRate = try throughput(n) { while case let k = try ma.push(), k > 0 { pushed += k } }
    var pulled = 0
    let pullRate = try throughput(n) { while case let k = try mb.pull(), k > 0 { pulled += k } }
    guard pushed == n, pulled == n else { throw BenchError("pushed \(pushed), pulled \(pulled) of \(n)") }
    return .object([
        ("case", .string("mirror-throughput")), ("transactions", .number(Double(n))),
        ("pushed_per_s", .number(pushRate.rounded())), ("pulled_per_s", .number(pullRate.rounded())),
        ("batch", .number(Double(ma.batchSize))),
        ("note", .string("one article per transaction; pulled: each applied in a local transaction of its own")),
    ])
}

/// Push and pull rates in a space, as a login role granted it (no superuser), against the same
/// in the log outside any space as the administrator, in the same run: what a space costs
/// (PostgreSQL's privilege checks on each statement; there is no row-level policy to run).
func mirrorSpaceThroughputCase(_ s: Settings) throws -> Report {
    let n = s.pick(20_000, 5000, 200)
    let tag = UUID().uuidString.prefix(8).lowercased()
    let (space, role) = ("bench_\(tag)", "bench_machine_\(tag)")
    let db = try BenchDatabase()
    defer {
        // Roles are the server's: dropped after the database that holds their privileges.
        _ = try? PostgresConnection().dropDatabase(db.name)
        _ = try? PostgresConnection().dropRole(MirrorServer.spacePrefix + space)
        _ = try? PostgresConnection().dropRole(role)
    }
    try PostgresConnection(db.conninfo).createLoginRole(role)
    let spaces = MirrorSpaces(connection: try PostgresConnection(db.conninfo))
    try spaces.create(space)
    try spaces.grant(space, to: role)
    var plain: [(push: Double, pull: Double)] = []
    var inSpace: [(push: Double, pull: Double)] = []
    // Alternated, three times each: the machine's drift falls on both alike.
    for _ in 0..<3 {
        plain.append(try mirrorRates(n, conninfo: db.conninfo, space: nil))
        inSpace.append(try mirrorRates(n, conninfo: db.conninfo + " user=\(role)", space: space))
    }
    let best = { (rates: [(push: Double, pull: Double)]) in
        (push: rates.map(\.push).max() ?? 0, pull: rates.map(\.pull).max() ?? 0)
    }
    let (p, q) = (best(plain), best(inSpace))
    return .object([
        ("case", .string("mirror-space-throughput")), ("transactions", .number(Double(n))),
        ("pushed_per_s", .number(q.push.rounded())), ("pulled_per_s", .number(q.pull.rounded())),
        ("default_log_pushed_per_s", .number(p.push.rounded())),
        ("default_log_pulled_per_s", .number(p.pull.rounded())),
        ("push_ratio", .number(round3(q.push / max(p.push, 1)))),
        ("pull_ratio", .number(round3(q.pull / max(p.pull, 1)))),
        ("note", .string("in a space as a granted login role, against the log outside any space (best of 3 each)")),
    ])
}

/// One mirror-throughput measure: `n` one-article transactions pushed by one store and pulled
/// by another, both through `conninfo` into `space`.
private func mirrorRates(_ n: Int, conninfo: String, space: String?) throws -> (push: Double, pull: Double) {
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let a = try openStore(group: dir + "/a", model: ReadLater.model)
    let b = try openStore(group: dir + "/b", model: ReadLater.model)
    let context = a.newContext(name: "bench", author: "Writer")
    for i in 0..<n {
        try context.insert("Article", article(i))
        try context.save()
    }
    let ma = try Mirror(
        container: a, registry: try TokenRegistry(group: dir + "/a"), connection: try PostgresConnection(conninfo),
        space: space)
    let mb = try Mirror(
        container: b, registry: try TokenRegistry(group: dir + "/b"), connection: try PostgresConnection(conninfo),
        space: space)
    var (pushed, pulled) = (0, 0)
    let push = try throughput(n) { while case let k = try ma.push(), k > 0 { pushed += k } }
    let pull = try throughput(n) { while case let k = try mb.pull(), k > 0 { pulled += k } }
    guard pushed == n, pulled >= n else { throw BenchError("pushed \(pushed), pulled \(pulled) of \(n)") }
    return (push, pull)
}

/// One-article saves on a store a `storectl mirror --follow` process mirrors, against the same
/// saves on a store nobody follows, interleaved: what mirroring costs the app. The same with a
/// `main-app watch` following instead (`save-history-watched`): what any process that follows
/// every save costs on this machine, for scale.
func saveFollowedCases(_ s: Settings) throws -> [Report] {
    let db = try BenchDatabase()
    let mirrored = try saveFollowedCase(s, name: "save-history-mirrored") { group in
        try startProcess("storectl", ["mirror", "--follow", "--group", group, "--json"], database: db)
    }
    let watched = try saveFollowedCase(s, name: "save-history-watched") { group in
        try startProcess("main-app", ["watch", "--group", group, "--json"], database: db)
    }
    return [mirrored, watched]
}

/// One-article saves while `storectl top --json` samples the store four times a second (four
/// times what its view does by default), against the same saves on a store nobody watches
/// (`save-history-top`): what watching a group directory costs its writers.
func saveTopCase(_ s: Settings) throws -> Report {
    try saveFollowedCase(s, name: "save-history-top") { group in
        let p = Process()
        p.executableURL = URL(fileURLWithPath: binDirectory() + "/storectl")
        p.arguments = ["top", "--group", group, "--json", "--interval", "0.25"]
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        return p
    }
}

func startProcess(_ tool: String, _ arguments: [String], database: BenchDatabase) throws -> Process {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: binDirectory() + "/" + tool)
    p.arguments = arguments
    p.environment = ProcessInfo.processInfo.environment.merging(["PGDATABASE": database.name]) { $1 }
    p.standardOutput = FileHandle.nullDevice
    try p.run()
    return p
}

private func saveFollowedCase(_ s: Settings, name: String, follower: (String) throws -> Process) throws -> Report {
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let followed = try openStore(group: dir + "/followed", model: ReadLater.model)
    let plain = try openStore(group: dir + "/plain", model: ReadLater.model)
    let process = try follower(dir + "/followed")
    defer { process.terminate() }
    let (f, p) = (followed.newContext(name: "bench", author: "Bench"), plain.newContext(name: "bench", author: "Bench"))
    var i = 0
    func saves(_ context: ObjectContext) throws -> Double {
        try throughput(s.saves) {
            for _ in 0..<s.saves {
                i += 1
                try context.insert("Article", article(i))
                try context.save()
            }
        }
    }
    var report = try compare(
        name, unit: "saves/s", rounds: s.rounds, ours: { try saves(f) }, baseline: { try saves(p) })
    if case .object(var pairs) = report {
        pairs.append(("note", .string("baseline: the same saves on a store nobody follows, same process")))
        report = .object(pairs)
    }
    return report
}
