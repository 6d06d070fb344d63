import Foundation
import ReadLater
import SharedStore

// MARK: - Typed paths against untyped ones, and the debug switches (issue 23)

/// `query-range-typed`: the date-range query of `query-range` written with key paths
/// (`\Article.createdAt >= t`, `.ascending(\Article.createdAt)`, a request naming its record type)
/// against the same query with string keys, in the same process on the same store: what typed
/// keys cost (their names are resolved once per key path and kept).
func queryRangeTypedCase(_ s: Settings, _ container: Container) throws -> Report {
    typealias Article = ReadLater.Records.Article
    let context = container.newContext()
    context.maximumReadsKept = s.readsKept
    let queries = s.pick(5000, 1000, 50)
    let span = Double(max(1, s.readRows - 100))
    func start(_ q: Int) -> Date { Date(timeIntervalSince1970: Double((q &* 7919) % Int(span))) }
    var q = 0
    func run(_ request: (Date) -> FetchRequest) throws -> Double {
        try throughput(queries) {
            for _ in 0..<queries {
                q += 1
                guard try context.fetch(request(start(q))).count == 100 else { throw BenchError("short range") }
            }
        }
    }
    return try compare(
        "query-range-typed", unit: "queries/s", rounds: s.rounds,
        ours: {
            try run { t in
                FetchRequest(
                    Article.self, where: \Article.createdAt >= t && \Article.createdAt < t + 100,
                    sortedBy: [.ascending(\Article.createdAt)])
            }
        },
        baseline: {
            try run { t in
                FetchRequest(
                    "Article", where: Key("createdAt") >= t && Key("createdAt") < t + 100,
                    sortedBy: [Key("createdAt").ascending])
            }
        })
}

/// `batch-insert-typed`: `batchInsert([Article])` (records encoded by their Codable conformance)
/// against `batchInsert("Article", rows)` of the same values as `[String: Value]` rows, each side
/// making its input in the round, on the newest ReadLater model. The ratio is of time; a large
/// typed batch encodes its records on a second thread beside the writer, so `cpu_ratio` (the
/// process's CPU time per row, all threads, as every compared case reports it) says what the
/// typed path costs in work.
func batchInsertTypedCase(_ s: Settings) throws -> Report {
    typealias Article = ReadLater.Records.Article
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let container = try openStore(group: dir + "/group", model: ReadLater.model)
    let context = container.newContext(name: "bench", author: "Bench")
    var i = 0
    func at(_ n: Int) -> Date { Date(timeIntervalSince1970: Double(n)) }
    return try compare(
        "batch-insert-typed", unit: "rows/s", rounds: s.rounds,
        ours: {
            defer { i += s.batch }
            return try throughput(s.batch) {
                let records = (0..<s.batch).map { k in
                    Article(title: "typed \(i + k)", url: "https://bench.example/t/\(i + k)", createdAt: at(i + k))
                }
                try context.batchInsert(records)
            }
        },
        baseline: {
            defer { i += s.batch }
            return try throughput(s.batch) {
                let rows = (0..<s.batch).map { k -> [String: Value] in
                    [
                        "title": .string("untyped \(i + k)"), "url": .string("https://bench.example/u/\(i + k)"),
                        "createdAt": .date(at(i + k)), "isRead": false,
                    ]
                }
                try context.batchInsert("Article", rows)
            }
        })
}

/// `batch-closure-typed`: records inserted one at a time in `batch { $0.insert(record) }` (each
/// encoded by the writer as it comes) against rows inserted the same way
/// (`$0.insert("Article", row, object:)`), each side making its input in the round.
func batchClosureTypedCase(_ s: Settings) throws -> Report {
    typealias Article = ReadLater.Records.Article
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let container = try openStore(group: dir + "/group", model: ReadLater.model)
    let context = container.newContext(name: "bench", author: "Bench")
    var i = 0
    func at(_ n: Int) -> Date { Date(timeIntervalSince1970: Double(n)) }
    return try compare(
        "batch-closure-typed", unit: "rows/s", rounds: s.rounds,
        ours: {
            defer { i += s.batch }
            return try throughput(s.batch) {
                try context.batch { b in
                    for k in 0..<s.batch {
                        _ = try b.insert(
                            Article(title: "c \(i + k)", url: "https://bench.example/c/\(i + k)", createdAt: at(i + k)))
                    }
                }
            }
        },
        baseline: {
            defer { i += s.batch }
            return try throughput(s.batch) {
                try context.batch { b in
                    for k in 0..<s.batch {
                        let row: [String: Value] = [
                            "title": .string("r \(i + k)"), "url": .string("https://bench.example/r/\(i + k)"),
                            "createdAt": .date(at(i + k)), "isRead": false,
                        ]
                        _ = try b.insert("Article", row, object: "Article (batch row \(k + 1))")
                    }
                }
            }
        })
}

/// `debug-switches`: one workload (a fresh context, a fetch of 20 rows, an update, a save) in a
/// child process with both switches off, against children with `SHAREDSTORE_SQL_DEBUG=1` (its
/// output thrown away) and `SHAREDSTORE_CONCURRENCY_DEBUG=1`. Off, the switches install nothing
/// (no SQLite trace callback, no owner recorded): each costs one load of a Bool read from the
/// environment once, per context, call, connection and statement prepared; the ratios say what
/// turning one on costs.
func debugSwitchesCase(_ s: Settings) throws -> Report {
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let group = dir + "/group"
    let container = try openStore(group: group, model: benchModel)
    _ = try container.newContext(author: "Fill").batchInsert("Item", (0..<100).map { item($0) })
    let count = s.pick(3000, 600, 50)
    func child(_ environment: [String: String]) throws -> Double {
        let p = Process()
        let me =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        p.executableURL = URL(fileURLWithPath: me)
        p.arguments = ["--child", "switch-workload", group, "\(count)"]
        var env = ProcessInfo.processInfo.environment
        env["SHAREDSTORE_SQL_DEBUG"] = nil
        env["SHAREDSTORE_CONCURRENCY_DEBUG"] = nil
        env.merge(environment) { _, new in new }
        p.environment = env
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        let line = LineReader(out.fileHandleForReading).next() ?? ""
        p.waitUntilExit()
        guard p.terminationStatus == 0, let rate = Double(line) else {
            throw BenchError("switch-workload child failed (\(p.terminationStatus)): \(line)")
        }
        return rate
    }
    var sqlOn: [Double] = []
    var report = try compare(
        "debug-switches", unit: "workloads/s", rounds: s.rounds,
        ours: { try child([:]) },
        baseline: {
            sqlOn.append(try child(["SHAREDSTORE_SQL_DEBUG": "1"]))
            return try child(["SHAREDSTORE_CONCURRENCY_DEBUG": "1"])
        })
    report = adding(
        report,
        [
            ("baseline_is", .string("the same workload with SHAREDSTORE_CONCURRENCY_DEBUG=1")),
            ("sql_debug_on", .number(median(sqlOn).rounded())),
        ])
    return report
}

/// `--child switch-workload GROUP COUNT`: the debug-switches workload; prints workloads per second.
func switchWorkloadChild(group: String, count: Int) throws {
    let container = try openStore(group: group, model: benchModel)
    let rate = try throughput(count) {
        for n in 0..<count {
            let context = container.newContext(name: "switches", author: "Bench")
            let rows = try context.fetch(
                FetchRequest("Item", where: Key("value") >= n % 80, sortedBy: [Key("value").ascending], limit: 20))
            guard let first = rows.first else { throw BenchError("no rows") }
            try context.update(first.id, ["isRead": .bool(n % 2 == 0)])
            try context.save()
        }
    }
    emitLine(.number(rate))
}
