import Foundation
import SharedStore

/// The entity every case writes: the baseline's table has the same columns.
let benchModel = itemModel(indexes: [])

/// The `Item` entity with `indexes`.
func itemModel(indexes: [Index]) -> Model {
    do {
        return try Model([
            Entity(
                "Item",
                attributes: [
                    Attribute("title", .string), Attribute("value", .integer), Attribute("createdAt", .date),
                    Attribute("isRead", .bool, default: false),
                ], indexes: indexes)
        ])
    } catch {
        preconditionFailure("bench model: \(error)")
    }
}

func item(_ i: Int) -> [String: Value] {
    ["title": .string("item \(i)"), "value": .integer(Int64(i)), "createdAt": .date(Date()), "isRead": false]
}

struct Settings {
    enum Size { case full, quick, smoke }
    var size = Size.full
    var rounds = 7
    func pick<T>(_ full: T, _ quick: T, _ smoke: T) -> T { size == .full ? full : size == .quick ? quick : smoke }
    /// Saves per round of the save cases: the quick run keeps the full count (a round of them
    /// takes a tenth of a second), since 300 saves made a round's ratio swing with one pause.
    var saves: Int { pick(2000, 2000, 50) }
    /// Rows per batch, and transactions per history fetch: the quick run keeps the full sizes
    /// (each costs milliseconds), since a smaller one weighs a transaction's or a fetch's fixed
    /// cost differently and the ratio would not be the full run's.
    var batch: Int { pick(10_000, 10_000, 200) }
    var fetch: Int { pick(10_000, 10_000, 200) }
    /// Saves per round of the durable case (an fsync each): the same in the quick run, enough
    /// that one slow flush does not decide a round.
    var durableSaves: Int { pick(200, 200, 20) }
    var bigHistory: Int { pick(1_000_000, 100_000, 2000) }
    var latencyCommits: Int { pick(1000, 200, 20) }
    /// How long each run of the writer cases saves, and how many rounds of them run.
    var writerSeconds: Double { pick(1.5, 1, 0.2) }
    var writerRounds: Int { pick(5, 3, 1) }
    /// The store size of the read cases.
    var readRows: Int { pick(1_000_000, 100_000, 2000) }
    /// `maximumReadsKept` of the read cases' contexts (`--reads-kept`): every read by default.
    var readsKept = Int.max
}

/// Result of one case: one JSON line.
typealias Report = JSONValue

/// Runs `ours` and `baseline` interleaved for `rounds` rounds; reports the median ratio.
func compare(_ name: String, unit: String, rounds: Int, ours: () throws -> Double, baseline: () throws -> Double)
    rethrows -> Report
{
    var o: [Double] = []
    var b: [Double] = []
    var ratios: [Double] = []
    // The same ratio in CPU time, where both sides timed their work through `throughput`: what
    // the code costs, without what the machine made either side wait.
    var cpuRatios: [Double] = []
    for _ in 0..<rounds {
        cpuTally.withLock { $0 = CPUTally() }
        let x = try ours()
        let cpuOurs = cpuTally.withLock { t in
            defer { t = CPUTally() }
            return t.rate
        }
        let y = try baseline()
        let cpuBaseline = cpuTally.withLock { $0.rate }
        o.append(x)
        b.append(y)
        ratios.append(x / y)
        if let cpuOurs, let cpuBaseline { cpuRatios.append(cpuOurs / cpuBaseline) }
    }
    var fields: [(String, JSONValue)] = [
        ("case", .string(name)), ("ratio", .number(round3(median(ratios)))),
        ("ours", .number(median(o).rounded())), ("baseline", .number(median(b).rounded())), ("unit", .string(unit)),
        ("rounds", .number(Double(rounds))),
        ("spread", .array([.number(round3(ratios.min() ?? 0)), .number(round3(ratios.max() ?? 0))])),
    ]
    if cpuRatios.count == rounds {
        fields.append(("cpu_ratio", .number(round3(median(cpuRatios)))))
        fields.append(
            ("cpu_spread", .array([.number(round3(cpuRatios.min() ?? 0)), .number(round3(cpuRatios.max() ?? 0))])))
    }
    return .object(fields)
}

func round3(_ x: Double) -> Double { (x * 1000).rounded() / 1000 }

// MARK: - Saves

/// One save per transaction. `durable`: the store with `synchronous = .full` against SQLite at
/// FULL (`save-history-durable`: what a save costs when it survives a power loss).
func saveCase(_ s: Settings, history: Bool, durable: Bool = false) throws -> Report {
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    var options = Container.Options()
    options.historyTracking = history
    if durable { options.synchronous = .full }
    let container = try openStore(group: dir + "/group", model: benchModel, options: options)
    let context = container.newContext(name: "bench", author: "Bench")
    let baseline = try Baseline(path: dir + "/baseline.sqlite", synchronous: durable ? "FULL" : "NORMAL")
    var i = 0
    // An fsync per save: fewer saves, the same rounds.
    let saves = durable ? s.durableSaves : s.saves
    return try compare(
        durable ? "save-history-durable" : history ? "save-history" : "save-no-history", unit: "saves/s",
        rounds: s.rounds,
        ours: {
            try throughput(saves) {
                for _ in 0..<saves {
                    i += 1
                    try context.insert("Item", item(i))
                    try context.save()
                }
            }
        },
        baseline: {
            try throughput(saves) {
                for _ in 0..<saves {
                    i += 1
                    try baseline.saveOne(i)
                }
            }
        })
}

func batchCase(_ s: Settings) throws -> Report {
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let container = try openStore(group: dir + "/group", model: benchModel)
    let context = container.newContext(name: "bench", author: "Bench")
    let baseline = try Baseline(path: dir + "/baseline.sqlite")
    var i = 0
    return try compare(
        "batch-insert", unit: "rows/s", rounds: s.rounds,
        ours: {
            let rows = (0..<s.batch).map { item(i + $0) }
            i += s.batch
            return try throughput(s.batch) { try context.batchInsert("Item", rows) }
        },
        baseline: {
            defer { i += s.batch }
            return try throughput(s.batch) { try baseline.saveBatch(s.batch, from: i) }
        })
}

func updateCase(_ s: Settings) throws -> Report {
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let container = try openStore(group: dir + "/group", model: benchModel)
    let context = container.newContext(name: "bench", author: "Bench")
    let temp = try context.insert("Item", item(0))
    let id = try context.save().permanentID(for: temp)
    let baseline = try Baseline(path: dir + "/baseline.sqlite")
    try baseline.saveOne(0)
    var flag = false
    return try compare(
        "update-property", unit: "saves/s", rounds: s.rounds,
        ours: {
            try throughput(s.saves) {
                for _ in 0..<s.saves {
                    flag.toggle()
                    try context.update(id, ["isRead": .bool(flag)])
                    try context.save()
                }
            }
        },
        baseline: {
            try throughput(s.saves) {
                for _ in 0..<s.saves {
                    flag.toggle()
                    try baseline.updateOne(pk: 1, isRead: flag)
                }
            }
        })
}

// MARK: - History

func historyFetchCase(_ s: Settings, retained: Int, name: String) throws -> Report {
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let container = try openStore(group: dir + "/group", model: benchModel)
    let path = dir + "/group/" + Container.storeFileName
    try fillHistory(container, path: path, count: retained)
    let after = try container.currentToken()
    try fillHistory(container, path: path, count: s.fetch)
    let request = HistoryRequest(after: after)
    var report = try compare(
        name, unit: "transactions/s", rounds: s.rounds,
        ours: {
            var n = 0
            let rate = try throughput(s.fetch) { try container.history(request) { n += $0.count } }
            guard n == s.fetch else { throw BenchError("fetched \(n) of \(s.fetch)") }
            return rate
        },
        baseline: {
            try throughput(s.fetch) { _ = try Baseline.readHistory(path: path, after: after.value, count: s.fetch) }
        })
    if case .object(var pairs) = report {
        pairs.append(("retained_before", .number(Double(retained))))
        report = .object(pairs)
    }
    return report
}

// MARK: - Cleaner

/// A fresh group in `dir` whose store holds `count` history transactions.
func groupWithHistory(in dir: String, count: Int) throws -> (group: String, container: Container) {
    let group = dir + "/group"
    let container = try openStore(group: group, model: benchModel)
    try fillHistory(container, path: group + "/" + Container.storeFileName, count: count)
    return (group, container)
}

func cleanerCase(_ s: Settings) throws -> Report {
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let (group, container) = try groupWithHistory(in: dir, count: s.bigHistory)
    // Rows made by SQL take no token lease: one save takes it as the store's saves would have,
    // so that no measured write waits for a synced commit that real history never needs.
    let setup = container.newContext(name: "setup", author: "Filler")
    try setup.insert("Item", item(1))
    try setup.save()
    let through = try container.currentToken()
    // A writer in another thread, with its own connections, saving as fast as it can.
    let writer = try openStore(group: group, model: benchModel)
    let stop = StopBox()
    let stalls = StallBox()
    let thread = Thread {
        let context = writer.newContext(name: "writer", author: "Writer")
        var i = 0
        while !stop.stopped {
            i += 1
            let t0 = now()
            do {
                try context.insert("Item", item(i))
                try context.save()
            } catch { stalls.fail() }
            stalls.record(now() - t0)
        }
        stop.done()
    }
    thread.start()
    let t0 = now()
    let deleted = try container.deleteHistory(through: through, chunkSize: 1000)
    let elapsed = now() - t0
    stop.stop()
    stop.waitDone()
    return .object([
        ("case", .string("cleaner")), ("deleted", .number(Double(deleted))),
        ("deleted_per_s", .number((Double(deleted) / elapsed).rounded())),
        ("max_writer_stall_ms", .number(round3(stalls.max * 1000))), ("writer_saves", .number(Double(stalls.count))),
        ("p99_writer_save_ms", .number(round3(stalls.percentile(0.99) * 1000))),
        ("p999_writer_save_ms", .number(round3(stalls.percentile(0.999) * 1000))),
        ("writer_failed", .number(Double(stalls.failed))), ("chunk", .number(1000)),
    ])
}

final class StopBox: @unchecked Sendable {
    private let lock = NSCondition()
    private var flag = false, finished = false
    var stopped: Bool { lock.withLock { flag } }
    func stop() { lock.withLock { flag = true } }
    func done() {
        lock.withLock {
            finished = true
            lock.broadcast()
        }
    }
    func waitDone() { lock.withLock { while !finished { lock.wait() } } }
}

/// The writer thread's stalls and failures, read by the measuring thread.
final class StallBox: Sendable {
    private struct Figures { var times: [Double] = [], failed = 0 }
    private let figures = Protected(Figures())
    func record(_ d: Double) { figures.withLock { $0.times.append(d) } }
    func fail() { figures.withLock { $0.failed += 1 } }
    var max: Double { figures.withLock { $0.times.max() ?? 0 } }
    var count: Int { figures.withLock { $0.times.count } }
    var failed: Int { figures.withLock { $0.failed } }
    /// The save time that fraction `p` of the saves took at most.
    func percentile(_ p: Double) -> Double {
        figures.withLock { f in
            let sorted = f.times.sorted()
            guard !sorted.isEmpty else { return 0 }
            return sorted[min(sorted.count - 1, Int(p * Double(sorted.count)))]
        }
    }
}

// MARK: - Token registry

/// The cost of advancing a consumer's token: LMDB write transactions without and with fsync.
func tokenAdvanceCase(_ s: Settings) throws -> Report {
    var fields: [(String, JSONValue)] = [("case", .string("token-advance"))]
    for (label, durability, count) in [
        ("advance_us", TokenRegistry.Durability.processCrash, s.saves * 5),
        ("advance_durable_us", TokenRegistry.Durability.powerLoss, max(20, s.saves / 10)),
    ] {
        let dir = scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let registry = try TokenRegistry(group: dir, durability: durability)
        let store = UUID()
        var rounds: [Double] = []
        for r in 0..<s.rounds {
            let rate = try throughput(count) {
                for i in 0..<count {
                    try registry.advance("Bench", to: HistoryToken(storeID: store, value: Int64(r * count + i + 1)))
                }
            }
            rounds.append(1e6 / rate)
        }
        fields.append((label, .number(round3(median(rounds)))))
    }
    // What naming a new group file durably costs: an fsync of its directory.
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    var syncs: [Double] = []
    for _ in 0..<s.rounds {
        let rate = throughput(max(20, s.saves / 10)) {
            for _ in 0..<max(20, s.saves / 10) { GroupDirectory.syncDirectory(dir) }
        }
        syncs.append(1e6 / rate)
    }
    fields.append(("directory_sync_us", .number(round3(median(syncs)))))
    return .object(fields)
}
