import Foundation
import SharedStore

// MARK: - Reads (issue 11): an indexed query, and the targets as processes on a big store

/// The `Item` entity with the index "50 newest unread" uses.
let indexedModel = itemModel(indexes: [Index("isRead", "createdAt")])

/// "50 newest unread": what `query-indexed` runs and `live-query-latency` follows.
let newestUnread = FetchRequest(
    "Item", where: Key("isRead") == false, sortedBy: [Key("createdAt").descending], limit: 50)

/// `rows` items in one transaction, a third of them read, with increasing creation dates.
func fillItems(_ context: ObjectContext, rows: Int) throws {
    try context.batch { batch in
        for i in 0..<rows {
            var values = item(i)
            values["isRead"] = .bool(i % 3 == 0)
            values["createdAt"] = .date(Date(timeIntervalSince1970: Double(i)))
            _ = try batch.insert("Item", values, object: "row \(i)")
        }
    }
}

/// "50 newest unread of N": the library's fetch against the same SQL through the C API, both on
/// the same store and index, in queries per second.
func queryIndexedCase(_ s: Settings) throws -> Report {
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let container = try openStore(group: dir + "/group", model: indexedModel)
    let context = container.newContext(author: "Filler")
    try fillItems(context, rows: s.readRows)
    let request = newestUnread
    let queries = s.pick(2000, 500, 50)
    let baseline = try Baseline.NewestUnread(path: dir + "/group/" + Container.storeFileName)
    var report = try compare(
        "query-indexed", unit: "queries/s", rounds: s.rounds,
        ours: {
            try throughput(queries) {
                for _ in 0..<queries { guard try context.fetch(request).count == 50 else { throw BenchError("short") } }
            }
        },
        baseline: {
            try throughput(queries) {
                for _ in 0..<queries { guard try baseline.run() == 50 else { throw BenchError("short") } }
            }
        })
    if case .object(var pairs) = report {
        pairs.append(("rows", .number(Double(s.readRows))))
        pairs.append(("plan", .string(try container.queryPlan(request).joined(separator: "; "))))
        report = .object(pairs)
    }
    return report
}

/// The targets as processes on a store of `readRows` articles: `share-batch` of that many lines,
/// `main-app list --json`, and `widget show` against the same command on a 1-article store —
/// wall time and peak resident memory of each process.
func targetsCase(_ s: Settings) throws -> [Report] {
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let bin = executableDirectory()
    let rows = s.readRows
    let file = dir + "/batch.tsv"
    try writeBatchFile(file, lines: rows)
    let big = ["SHAREDSTORE_GROUP": dir + "/big"]
    let small = ["SHAREDSTORE_GROUP": dir + "/small"]
    // The newest model (derived attributes, an index on searchTitle, an awakeFromInsert), and
    // version 2 — the model issue 11's goal was set with — on a group of its own.
    let share = try measureProcess(bin + "/share-extension", ["share-batch", file, "--json"], env: big)
    let shareV2 = try measureProcess(
        bin + "/share-extension", ["share-batch", file, "--json", "--model-version", "2"],
        env: ["SHAREDSTORE_GROUP": dir + "/v2"])
    _ = try measureProcess(
        bin + "/share-extension", ["share", "--url", "https://one.example", "--title", "one"], env: small)
    // Three runs, the median taken: one run of a process of a few seconds on a shared machine
    // moved by a third between runs.
    let lists = try (0..<3).map { _ in
        try measureProcess(bin + "/main-app", ["list", "--json"], env: big, discardOutput: true)
    }
    let list = ProcessFigures(
        seconds: median(lists.map(\.seconds)), peakMiB: lists.map(\.peakMiB).max() ?? 0,
        cpuSeconds: median(lists.map(\.cpuSeconds)))
    var bigShows: [ProcessFigures] = []
    var smallShows: [ProcessFigures] = []
    for _ in 0..<max(3, s.rounds) {
        smallShows.append(try measureProcess(bin + "/widget", ["show", "--json"], env: small))
        bigShows.append(try measureProcess(bin + "/widget", ["show", "--json"], env: big))
    }
    let bigMedian = median(bigShows.map(\.seconds))
    let smallMedian = median(smallShows.map(\.seconds))
    return [
        .object([
            ("case", .string("share-batch-1m")), ("rows", .number(Double(rows))),
            ("rows_per_s", .number((Double(rows) / shareV2.seconds).rounded())),
            ("peak_rss_mib", .number(round3(shareV2.peakMiB))), ("model_version", .number(2)),
        ]),
        .object([
            ("case", .string("share-batch-1m-newest")), ("rows", .number(Double(rows))),
            ("rows_per_s", .number((Double(rows) / share.seconds).rounded())),
            ("peak_rss_mib", .number(round3(share.peakMiB))),
            ("cost_vs_v2", .number(round3(share.seconds / shareV2.seconds))),
        ]),
        .object([
            ("case", .string("list-1m")), ("rows", .number(Double(rows))),
            ("rows_per_s", .number((Double(rows) / list.seconds).rounded())),
            ("peak_rss_mib", .number(round3(list.peakMiB))),
        ]),
        .object([
            ("case", .string("widget-show-1m")), ("rows", .number(Double(rows))),
            ("median_s", .number(round3(bigMedian))), ("one_article_median_s", .number(round3(smallMedian))),
            ("ratio_to_one_article", .number(round3(bigMedian / max(smallMedian, 1e-6)))),
            ("peak_rss_mib", .number(round3(bigShows.map(\.peakMiB).max() ?? 0))),
        ]),
    ]
}

private func writeBatchFile(_ path: String, lines: Int) throws {
    let categories = ["Swift", "Linux", "Databases", "Misc", ""]
    var text = ""
    text.reserveCapacity(lines * 48)
    for i in 0..<lines {
        let c = categories[i % categories.count]
        text += "https://bench.example/\(i)\tarticle number \(i)" + (c.isEmpty ? "" : "\t\(c)") + "\n"
    }
    try text.write(toFile: path, atomically: false, encoding: .utf8)
}

struct ProcessFigures {
    let seconds: Double
    let peakMiB: Double
    /// The process's CPU time, user and system, all its threads (from `wait4`).
    var cpuSeconds = 0.0
}

/// Runs an executable to its end; its wall time and peak resident memory (the target writes its
/// own VmHWM to `SHAREDSTORE_PEAK_RSS_FILE` as it ends).
func measureProcess(_ path: String, _ arguments: [String], env: [String: String], discardOutput: Bool = false) throws
    -> ProcessFigures
{
    var environment = ProcessInfo.processInfo.environment
    for (k, v) in env { environment[k] = v }
    let peakFile = NSTemporaryDirectory() + "/storebench-peak-\(UUID().uuidString)"
    environment["SHAREDSTORE_PEAK_RSS_FILE"] = peakFile
    defer { try? FileManager.default.removeItem(atPath: peakFile) }
    let argv = ([path] + arguments).map { strdup($0) } + [nil]
    let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer {
        argv.forEach { free($0) }
        envp.forEach { free($0) }
    }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    if !discardOutput { posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0) }
    var pid: pid_t = 0
    let t0 = now()
    guard posix_spawn(&pid, path, &actions, nil, argv, envp) == 0 else { throw BenchError("cannot start \(path)") }
    var status: Int32 = 0
    var usage = rusage()
    while wait4(pid, &status, 0, &usage) < 0 {
        guard errno == EINTR else { throw BenchError("wait4 failed for \(path)") }
    }
    let seconds = now() - t0
    guard status == 0 else {
        throw BenchError("\(path) \(arguments.joined(separator: " ")) exited with status \(status)")
    }
    let peakKiB =
        (try? String(contentsOfFile: peakFile, encoding: .utf8)).flatMap { Double($0) } ?? Double(usage.ru_maxrss)
    let cpu = [usage.ru_utime, usage.ru_stime].reduce(0.0) { $0 + Double($1.tv_sec) + Double($1.tv_usec) / 1e6 }
    return ProcessFigures(seconds: seconds, peakMiB: peakKiB / 1024, cpuSeconds: cpu)
}

// MARK: - Live query latency

/// `--child live-query GROUP COUNT`: a live query ("50 newest unread") that prints
/// `[token, time, rss]` for each result it delivers.
func liveQueryChild(group: String, count: Int64) throws {
    let container = try openStore(group: group, model: indexedModel)
    let registry = try TokenRegistry(group: group)
    let query = try LiveQuery(
        container: container, registry: registry, consumer: "Live",
        request: newestUnread)
    let observer = try ChangeObserver(container: container, pollInterval: 1)
    _ = try query.next()
    emitLine(.string("ready"))
    var last: Int64 = 0
    while last < count {
        if let result = try query.next() {
            last = result.token.value
            emitLine(.array([.number(Double(last)), .number(now()), .number(peakRSSMiB())]))
            continue
        }
        _ = try observer.next(timeout: 10)
    }
}

/// A commit here until the diff of a live query over a table of `readRows` rows is delivered in
/// another process: p50, p99, and the consumer's resident memory at the start and the end.
func liveQueryLatencyCase(_ s: Settings) throws -> Report {
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let group = dir + "/group"
    let container = try openStore(group: group, model: indexedModel)
    let context = container.newContext(name: "bench", author: "Writer")
    try fillItems(context, rows: s.readRows)
    let commits = s.latencyCommits
    let (child, lines) = try spawnSelf([
        "live-query", group, String(try container.currentToken().value + Int64(commits)),
    ])
    defer { if child.isRunning { child.terminate() } }
    guard lines.next() != nil else { throw BenchError("live query did not start") }
    var latencies: [Double] = []
    var rss: [Double] = []
    for i in 1...commits {
        try context.insert("Item", item(s.readRows + i))  // the newest unread: the result changes
        let t0 = now()
        let token = try context.save().token?.value ?? 0
        while let line = lines.next() {
            let parts = line.dropFirst().dropLast().split(separator: ",")
            guard parts.count == 3, let t = Double(parts[0]), let end = Double(parts[1]), let r = Double(parts[2])
            else { continue }
            if Int64(t) >= token {
                latencies.append(end - t0)
                rss.append(r)
                break
            }
        }
    }
    child.waitUntilExit()
    let ms = latencies.map { $0 * 1000 }
    return .object([
        ("case", .string("live-query-latency")), ("rows", .number(Double(s.readRows))),
        ("commits", .number(Double(ms.count))),
        ("median_ms", .number(round3(median(ms)))), ("p99_ms", .number(round3(percentile(ms, 0.99)))),
        ("rss_first_mib", .number(round3(rss.first ?? 0))), ("rss_last_mib", .number(round3(rss.last ?? 0))),
        ("note", .string("from just before save() to the diff delivered in the other process")),
    ])
}
