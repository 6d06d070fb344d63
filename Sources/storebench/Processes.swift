import Foundation
import SharedStore

/// Reads lines from a child's stdout, blocking.
final class LineReader {
    private let fd: Int32
    private var buffer: [UInt8] = []

    init(_ handle: FileHandle) { fd = handle.fileDescriptor }

    func next() -> String? {
        while true {
            if let nl = buffer.firstIndex(of: 10) {
                let line = String(decoding: buffer[..<nl], as: UTF8.self)
                buffer.removeSubrange(...nl)
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = read(fd, &chunk, chunk.count)
            if n <= 0 { return nil }
            buffer += chunk[..<n]
        }
    }
}

func spawnSelf(_ arguments: [String]) throws -> (Process, LineReader) {
    let p = Process()
    let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    p.executableURL = URL(fileURLWithPath: me)
    p.arguments = ["--child"] + arguments
    let out = Pipe()
    p.standardOutput = out
    try p.run()
    return (p, LineReader(out.fileHandleForReading))
}

func emitLine(_ v: JSONValue) { FileHandle.standardOutput.write(Data((v.serialized + "\n").utf8)) }

// MARK: - Children

/// `--child latency-consumer GROUP COUNT`: a consumer that prints `token time` after each merge.
func latencyConsumer(group: String, count: Int64) throws {
    let container = try openStore(group: group, model: benchModel)
    let registry = try TokenRegistry(group: group)
    let view = try ViewContext(container: container, registry: registry, consumer: "Latency")
    let observer = try ChangeObserver(container: container, pollInterval: 1)
    try view.sync()
    emitLine(.string("ready"))
    var last: Int64 = 0
    while last < count {
        guard try observer.next(timeout: 10) != nil else { continue }
        let result = try view.sync()
        let end = now()
        last = result.token.value
        emitLine(.array([.number(Double(last)), .number(end)]))
    }
}

/// `--child writer GROUP SECONDS START`: saves until SECONDS after START; prints counts.
func writerChild(group: String, seconds: Double, start: Double, author: String) throws {
    let container = try openStore(group: group, model: benchModel)
    let context = container.newContext(name: "writer", author: author)
    while now() < start { usleep(1000) }
    var saves = 0
    var failed = 0
    var i = 0
    let end = start + seconds
    while now() < end {
        i += 1
        do {
            try context.insert("Item", item(i))
            try context.save()
            saves += 1
        } catch {
            context.rollback()
            failed += 1
        }
    }
    emitLine(.object([("saves", .number(Double(saves))), ("failed", .number(Double(failed)))]))
}

/// `--child catch-up GROUP`: merges all history after token 0; prints peak memory.
func catchUpChild(group: String) throws {
    let container = try openStore(group: group, model: benchModel)
    let registry = try TokenRegistry(group: group)
    let view = try ViewContext(container: container, registry: registry, consumer: "CatchUp")
    try registry.reset("CatchUp", to: HistoryToken(storeID: container.storeID, value: 0))
    let t0 = now()
    var n = 0
    try view.sync { _ in n += 1 }
    emitLine(
        .object([
            ("merged", .number(Double(n))), ("seconds", .number(now() - t0)), ("peak_rss_mib", .number(peakRSSMiB())),
        ]))
}

// MARK: - Cases with processes

func latencyCase(_ s: Settings) throws -> Report {
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let group = dir + "/group"
    let container = try openStore(group: group, model: benchModel)
    let context = container.newContext(name: "bench", author: "Writer")
    let (child, lines) = try spawnSelf(["latency-consumer", group, String(s.latencyCommits)])
    defer { if child.isRunning { child.terminate() } }
    guard lines.next() != nil else { throw BenchError("latency consumer did not start") }
    var latencies: [Double] = []
    var saves: [Double] = []
    for i in 1...s.latencyCommits {
        try context.insert("Item", item(i))
        let t0 = now()
        let token = try context.save().token?.value ?? 0
        saves.append(now() - t0)
        // Wait for the consumer to report the merge of this commit.
        while let line = lines.next() {
            let parts = line.dropFirst().dropLast().split(separator: ",")
            guard parts.count == 2, let t = Double(parts[0]), let end = Double(parts[1]) else { continue }
            if Int64(t) >= token {
                latencies.append(end - t0)
                break
            }
        }
    }
    child.waitUntilExit()
    let ms = latencies.map { $0 * 1000 }
    return .object([
        ("case", .string("latency")), ("commits", .number(Double(latencies.count))),
        ("median_ms", .number(round3(median(ms)))), ("p99_ms", .number(round3(percentile(ms, 0.99)))),
        ("max_ms", .number(round3(ms.max() ?? 0))),
        ("save_median_ms", .number(round3(median(saves) * 1000))),
        ("note", .string("from just before save() in the writer to the end of sync() in the consumer process")),
    ])
}

func catchUpCase(_ s: Settings) throws -> Report {
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let (group, _) = try groupWithHistory(in: dir, count: s.bigHistory)
    let (child, lines) = try spawnSelf(["catch-up", group])
    let line = lines.next() ?? ""
    child.waitUntilExit()
    guard let data = line.data(using: .utf8), let obj = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
        let merged = obj["merged"] as? Double, let rss = obj["peak_rss_mib"] as? Double,
        let seconds = obj["seconds"] as? Double
    else {
        throw BenchError("catch-up child failed: \(line)")
    }
    return .object([
        ("case", .string("catch-up-memory")), ("transactions", .number(merged)), ("peak_rss_mib", .number(round3(rss))),
        ("merged_per_s", .number((merged / seconds).rounded())),
    ])
}

/// `writers-1` to `writers-8`: aggregate saves per second of 1, 2, 4 and 8 writer processes,
/// each N against one writer **in the same round** (the machine's speed moves between minutes,
/// and one run of each said more about the minute than about N). Rounds run the four counts
/// in a rotated order, so no count always runs first; each case reports the median rate, the
/// median of its rounds' ratios and their spread.
func writersCases(_ s: Settings) throws -> [Report] {
    let counts = [1, 2, 4, 8]
    var rates: [Int: [Double]] = [:]
    var failed: [Int: Double] = [:]
    var ratios: [Int: [Double]] = [:]
    // The share of the processors the host took while each count ran: on this virtual machine
    // it moves from minute to minute, and the writers' scaling with it.
    var ticks: [Int: (total: Double, steal: Double)] = [:]
    for round in 0..<s.writerRounds {
        var single = 0.0
        var thisRound: [Int: Double] = [:]
        for k in counts.indices {
            let n = counts[(k + round) % counts.count]
            let before = machineTicks()
            let (saves, failures) = try writersRun(s, writers: n)
            let after = machineTicks()
            ticks[n, default: (0, 0)].total += after.total - before.total
            ticks[n, default: (0, 0)].steal += after.steal - before.steal
            let rate = saves / s.writerSeconds
            rates[n, default: []].append(rate)
            failed[n, default: 0] += failures
            thisRound[n] = rate
            if n == 1 { single = rate }
        }
        // A round whose single writer saved nothing (it failed to start) has no ratio: the
        // rounds reported are those measured.
        for n in counts where n != 1 && single > 0 { ratios[n, default: []].append((thisRound[n] ?? 0) / single) }
    }
    return counts.map { n in
        var fields: [(String, JSONValue)] = [
            ("case", .string("writers-\(n)")), ("saves_per_s", .number(median(rates[n] ?? []).rounded())),
            ("failed", .number(failed[n] ?? 0)),
            ("rounds", .number(Double(n == 1 ? s.writerRounds : ratios[n]?.count ?? 0))),
            ("seconds", .number(s.writerSeconds)),
        ]
        if let t = ticks[n], t.total > 0 { fields.append(("steal_percent", .number(round3(100 * t.steal / t.total)))) }
        if let r = ratios[n], !r.isEmpty {
            fields.append(("ratio", .number(round3(median(r)))))
            fields.append(("spread", .array([.number(round3(r.min() ?? 0)), .number(round3(r.max() ?? 0))])))
        }
        return .object(fields)
    }
}

/// One run of `writers` writer processes saving for `s.writerSeconds` from a common start into
/// a new store: the saves they made, and those that failed.
func writersRun(_ s: Settings, writers: Int) throws -> (saves: Double, failed: Double) {
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let group = dir + "/group"
    _ = try openStore(group: group, model: benchModel)
    let start = now() + 0.5
    let children = try (0..<writers).map { w in
        try spawnSelf(["writer", group, String(s.writerSeconds), String(start), "W\(w)"])
    }
    var saves = 0.0
    var failed = 0.0
    for (p, lines) in children {
        if let line = lines.next(), let data = line.data(using: .utf8),
            let obj = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        {
            saves += obj["saves"] as? Double ?? 0
            failed += obj["failed"] as? Double ?? 0
        }
        p.waitUntilExit()
    }
    return (saves, failed)
}

/// Stops a process a case started: SIGTERM, up to 5 s for it to exit, then SIGKILL. A case removes
/// its directories after this: a follower still running would find them gone and say so.
func stopChild(_ p: Process) {
    guard p.isRunning else { return }
    p.terminate()
    let deadline = Monotonic.seconds() + 5
    while p.isRunning && Monotonic.seconds() < deadline { usleep(1000) }
    if p.isRunning {
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
    }
}
