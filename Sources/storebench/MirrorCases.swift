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
    defer { mirrors.forEach(stopChild) }
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
    defer { stopChild(process) }
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

/// A machine joining a log of `n` live objects (1,000,000 in a full run) as users run it,
/// `storectl mirror --once` in a process of its own: it starts from the snapshot another mirror
/// made, and its time and peak memory are what joining costs (the goal: at most 128 MiB). The
/// snapshot is made first by the mirror of the machine that wrote them (its own figures too).
func mirrorBootstrapCase(_ s: Settings) throws -> Report {
    let n = s.pick(1_000_000, 100_000, 1000)
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let db = try BenchDatabase()
    let a = try openStore(group: dir + "/a", model: ReadLater.model)
    let context = a.newContext(name: "bench", author: "Writer")
    var i = 0
    while i < n {
        for _ in 0..<min(500, n - i) {
            try context.insert("Article", article(i))
            i += 1
        }
        try context.save()
    }
    let ma = try Mirror(
        container: a, registry: try TokenRegistry(group: dir + "/a"), connection: try PostgresConnection(db.conninfo))
    ma.snapshotEvery = 1
    var t0 = now()
    while try ma.push() > 0 {}
    let pushSeconds = now() - t0
    t0 = now()
    guard try ma.round().snapshotMade else { throw BenchError("the writer's mirror made no snapshot") }
    let snapshotSeconds = now() - t0
    // The joining machine's group directory, made as the targets make it, then left to the process.
    _ = try openStore(group: dir + "/b", model: ReadLater.model)
    let join = try measureProcess(
        binDirectory() + "/storectl", ["mirror", "--once", "--group", dir + "/b", "--json"],
        env: ["PGDATABASE": db.name])
    let joined = try openStore(group: dir + "/b", model: ReadLater.model).newContext().count(FetchRequest("Article"))
    guard joined == n else { throw BenchError("the joining machine holds \(joined) of \(n) articles") }
    return .object([
        ("case", .string("mirror-bootstrap-1m")), ("objects", .number(Double(n))),
        ("seconds", .number(round3(join.seconds))), ("objects_per_s", .number((Double(n) / join.seconds).rounded())),
        ("peak_rss_mib", .number(round3(join.peakMiB))), ("goal_peak_rss_mib", .number(128)),
        ("writer_push_seconds", .number(round3(pushSeconds))),
        ("snapshot_seconds", .number(round3(snapshotSeconds))),
        ("note", .string("storectl mirror --once on an empty store: the snapshot's objects, then the log after it")),
    ])
}

/// Uploads per second the whole server takes across 1,000 spaces: four connections, as one login
/// role granted every space, each uploading in turn to its quarter of the spaces, one transaction
/// per upload; against the same number of uploads into one space from the same four connections,
/// in the same run (they wait for its one upload lock). The quick run keeps the full size: what
/// is measured is a server with that many spaces, each connection past its first uploads to
/// each (200 spaces read 2.08× against 1.55× at 1,000; 1,000 spaces of 5 uploads 1.06× against
/// 1.67× with 20).
func mirrorSpacesServerCase(_ s: Settings) throws -> Report {
    let count = s.pick(1000, 1000, 8)
    let perSpace = s.pick(20, 20, 2)
    let tag = UUID().uuidString.prefix(8).lowercased()
    let role = "bench_machine_\(tag)"
    let db = try BenchDatabase()
    defer {
        _ = try? PostgresConnection().dropDatabase(db.name)
        _ = try? PostgresConnection().dropRole(role)
    }
    try PostgresConnection(db.conninfo).createLoginRole(role)
    let spaces = MirrorSpaces(connection: try PostgresConnection(db.conninfo))
    let names = (0..<count).map { "bench_\(tag)_\($0)" }
    let t0 = now()
    for name in names {
        try spaces.create(name)
        try spaces.grant(name, to: role)
    }
    let setup = now() - t0
    let total = count * perSpace
    let conninfo = db.conninfo + " user=\(role)"
    let many = try uploadRate(conninfo, names, rounds: perSpace)
    let one = try uploadRate(conninfo, [names[0]], rounds: total)
    return .object([
        ("case", .string("mirror-spaces-server")), ("spaces", .number(Double(count))),
        ("uploads", .number(Double(total))), ("uploads_per_s", .number(many.rounded())),
        ("one_space_uploads_per_s", .number(one.rounded())), ("ratio", .number(round3(many / max(one, 1)))),
        ("setup_seconds", .number(round3(setup))),
        (
            "note",
            .string("4 connections, one upload (one article) per server transaction; spaces made and granted first")
        ),
    ])
}

/// Uploads per second from four connections, each taking its share of `spaces` in turn for
/// `rounds` rounds (one space: every connection uploads to it).
private func uploadRate(_ conninfo: String, _ spaces: [String], rounds: Int) throws -> Double {
    let workers = 4
    let failures = FailureBox()
    // A one-article payload of the shape a mirror uploads.
    let payload =
        #"{"v":1,"model":3,"at":"1764460828.502","changes":[{"k":"u","e":"Article","g":"0193a0b1-0000-7000-8000-"#
        + #"000000000001","a":{"title":["s","An article"],"url":["s","https://example.com/1"],"#
        + #""createdAt":["t","1764460828.5"],"isRead":["b",false]},"r":{},"p":"1"}]}"#
    let t0 = now()
    DispatchQueue.concurrentPerform(iterations: workers) { w in
        do {
            let connection = try PostgresConnection(conninfo)
            let mine =
                spaces.count == 1 ? spaces : spaces.enumerated().filter { $0.offset % workers == w }.map(\.element)
            let servers = try mine.map { try MirrorServer(connection: connection, space: $0) }
            let origin = UUID()
            var token: Int64 = 0
            let turns = spaces.count == 1 ? rounds / workers : rounds
            for _ in 0..<turns {
                for server in servers {
                    token += 1
                    try server.upload(origin: origin, token: token, author: "Bench", payload: payload)
                }
            }
        } catch {
            failures.note("\(error)")
        }
    }
    let elapsed = now() - t0
    if let failure = failures.first { throw BenchError("an upload failed: \(failure)") }
    let uploads = spaces.count == 1 ? rounds / workers * workers : rounds * spaces.count
    return Double(uploads) / elapsed
}

/// The first failure of several threads.
final class FailureBox: @unchecked Sendable {
    private let lock = NSLock()
    private var failure: String?
    func note(_ text: String) { lock.withLock { if failure == nil { failure = text } } }
    var first: String? { lock.withLock { failure } }
}
