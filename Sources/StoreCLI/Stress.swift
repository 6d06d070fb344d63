import Foundation
import ReadLater
import SharedStore

/// `storectl stress`: real writer, consumer and cleaner processes on one group directory, with
/// `kill -9` at random moments, then a check of the invariants against what every process logged.
struct Stress {
    struct Config {
        var writers = 4, consumers = 2
        var seconds: Double? = 30
        var saves: Int?
        var killEvery: Double? = 1.0
        var cleanEvery: Double? = 0.5
        var seed: UInt64 = 1
        /// Go on with a run after a power loss: the group and logs exist; the checks allow what
        /// the mode may lose.
        var resume = false
        /// The run is durable (`--durable`): a power loss may take no acknowledged save.
        var durable = false
        /// Where to write the report page (`--report DIR`), if anywhere.
        var report: String?
    }

    final class Worker {
        let role: String  // writer, consumer, cleaner
        let name: String
        let arguments: [String]
        var process: Process?
        var restarts = 0
        var finished = false
        init(role: String, name: String, arguments: [String]) {
            self.role = role
            self.name = name
            self.arguments = arguments
        }
    }

    let config: Config
    let group: String
    let logs: String
    let bin: URL
    var random: StressWorkers.Random
    var violations: [String] = []
    var kills = 0, cleans = 0
    /// The run over time, for the report: samples twice a second, and when each kill and each
    /// cleaner run happened (seconds since the writers started).
    var samples: [StressSample] = []
    var killTimes: [Double] = [], cleanTimes: [Double] = []
    var startedAt = Date()
    /// Each consumer log's "start" lines before this run (`--resume` goes on with the logs).
    var startsBefore: [Int] = []

    init(config: Config, group: String, logs: String) {
        self.config = config
        self.group = group
        self.logs = logs
        // The sibling executables: this one's directory, wherever PATH found it.
        let me =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        self.bin = URL(fileURLWithPath: me).deletingLastPathComponent()
        self.random = StressWorkers.Random(seed: config.seed)
    }

    func launch(_ w: Worker, executable: String = "storectl") throws {
        let p = Process()
        p.executableURL = bin.appendingPathComponent(executable)
        p.arguments = w.arguments
        p.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        p.standardError = Self.appending("\(logs)/\(w.name).stderr")
        if w.role == "cleaner" { p.standardOutput = Self.appending("\(logs)/cleaner.jsonl") }
        try p.run()
        w.process = p
    }

    /// Runs the whole stress test and returns the summary (violations inside).
    mutating func run() throws -> JSONValue {
        let container = try Container(group: group, model: ReadLater.model)
        // Held open for the whole run: killed readers' slots stay visible to mdb_reader_check.
        let registry = try TokenRegistry(group: group)
        let (writers, consumers) = workers()
        let cleaner = Worker(role: "cleaner", name: "cleaner", arguments: ["--json", "--group", group])
        if config.resume { try keepRetainedHistory(container) }
        startsBefore = (0..<config.consumers).map { Self.starts("\(logs)/consumer\($0).jsonl") }
        try startConsumers(consumers, registry, container)
        for w in writers { try launch(w) }
        let elapsed = try drive(
            writers: writers, consumers: consumers, cleaner: cleaner, observing: (container, registry))
        try stop(writers: writers, consumers: consumers, cleaner: cleaner)

        let report = try check(
            container: container, registry: registry, writers: writers.count, consumers: consumers.count)
        let saves = acknowledgedCount(writers)
        var fields: [(String, JSONValue)] = [
            ("seed", .number(Double(config.seed))), ("seconds", .number((elapsed * 10).rounded() / 10)),
            ("writers", .number(Double(config.writers))), ("consumers", .number(Double(config.consumers))),
            ("saves", .number(Double(saves))), ("saves_per_s", .number((Double(saves) / elapsed).rounded())),
            ("kills", .number(Double(kills))),
            ("restarts", .number(Double((writers + consumers).map(\.restarts).reduce(0, +)))),
            ("cleans", .number(Double(cleans))),
        ]
        fields += report
        fields.append(("violations", .array(violations.prefix(50).map(JSONValue.string))))
        fields.append(("ok", .bool(violations.isEmpty)))
        if let dir = config.report {
            let page = try StressReport.write(
                to: dir, summary: .object(fields), samples: samples, latencies: latencies(consumers: consumers.count),
                killTimes: killTimes, cleanTimes: cleanTimes, violations: violations)
            fields.append(("report", .string(page)))
        }
        return .object(fields)
    }

    /// On `--resume`: the history retained now, in the consumers' log shape, for the checks. What
    /// was saved between the power loss and this run (a mirror that brought back from the server
    /// what the loss took, the targets) comes before the consumers reload, reaches no consumer's
    /// log, and may be cleaned before the run ends.
    private func keepRetainedHistory(_ container: Container) throws {
        let log = try StressWorkers.Log(
            path: "\(logs)/retained-\(Int(Date().timeIntervalSince1970 * 1000)).jsonl", sync: false)
        for t in try container.fetchHistory(HistoryRequest()) { try log.write(t.json) }
    }

    /// The writer and consumer processes of the run (not started).
    private func workers() -> ([Worker], [Worker]) {
        let common = ["--group", group]
        let writers: [Worker] = (0..<config.writers).map { i in
            let seed = String(config.seed &+ UInt64(i) &* 1_000_003 % UInt64(Int.max))
            var args = ["stress-writer", "--author", "Writer\(i)", "--log", "\(logs)/writer\(i).jsonl", "--seed", seed]
            if let saves = config.saves { args += ["--saves", String(max(1, saves / max(1, config.writers)))] }
            return Worker(role: "writer", name: "writer\(i)", arguments: args + common)
        }
        let consumers: [Worker] = (0..<config.consumers).map { i in
            Worker(
                role: "consumer", name: "consumer\(i)",
                arguments: [
                    "stress-consumer", "--consumer", "Consumer\(i)", "--log", "\(logs)/consumer\(i).jsonl", "--view",
                    "\(logs)/consumer\(i).view",
                ] + common)
        }
        return (writers, consumers)
    }

    /// Consumers first, and writers only once each has made its first sync: a consumer's first
    /// sync loads the view in full, and transactions before it would reach no consumer's log.
    /// On `--resume`, each has synced to the store's newest transaction (a consumer whose position
    /// a power loss took reloads there).
    private mutating func startConsumers(_ consumers: [Worker], _ registry: TokenRegistry, _ container: Container)
        throws
    {
        for i in 0..<config.consumers { try registry.register("Consumer\(i)") }
        let current = try container.currentToken().value
        for w in consumers { try launch(w) }
        let deadline = Date().addingTimeInterval(30)
        func synced(_ i: Int) throws -> Bool {
            guard let token = try registry.consumer("Consumer\(i)")?.token else { return false }
            guard config.resume else { return true }
            let lost = try container.lostTokenRanges()
            let newest = try container.currentToken().value
            return token.value >= current && token.value <= newest && !lost.contains { $0.contains(token.value) }
        }
        while try (0..<config.consumers).contains(where: { try !synced($0) }) {
            guard Date() < deadline else {
                throw StoreError(.busy, "stress: the consumers did not start within 30 s (see \(logs))")
            }
            usleep(10_000)
        }
    }

    /// Restarts what exits, cleans and kills on schedule, until the time or the saves are done.
    /// Returns the seconds it ran.
    private mutating func drive(
        writers: [Worker], consumers: [Worker], cleaner: Worker, observing: (Container, TokenRegistry)
    ) throws -> Double {
        let start = Date()
        startedAt = start
        var nextKill = config.killEvery.map { start.addingTimeInterval($0) }
        var nextClean = config.cleanEvery.map { start.addingTimeInterval($0) }
        let progress = Progress("stress")
        var nextProgress = start
        while true {
            let elapsed = Date().timeIntervalSince(start)
            try reap(writers + consumers)
            if cleaner.process?.isRunning == false { cleaner.process = nil }
            if let t = nextClean, Date() >= t {
                if cleaner.process == nil {
                    try launch(cleaner, executable: "history-cleaner")
                    cleans += 1
                    cleanTimes.append(Date().timeIntervalSince(start))
                }
                nextClean = t.addingTimeInterval(config.cleanEvery ?? 1)
            }
            if let t = nextKill, Date() >= t {
                killOne(of: writers + consumers + [cleaner])
                nextKill = t.addingTimeInterval(config.killEvery ?? 1)
            }
            if Date() >= nextProgress {
                let saves = acknowledgedCount(writers)
                if config.report != nil { sample(elapsed, saves: saves, observing) }
                progress.update(
                    text:
                        "\(saves)\(config.saves.map { "/\($0)" } ?? "") saves, "
                        + "\(Int(Double(saves) / max(elapsed, 0.001))) saves/s, \(kills) kills, \(cleans) cleans",
                    left: config.seconds.map { max(0, $0 - elapsed) })
                nextProgress = Date().addingTimeInterval(0.5)
            }
            if config.saves == nil, let s = config.seconds, elapsed >= s { break }
            if config.saves != nil, writers.allSatisfy(\.finished) { break }
            if elapsed > 3600 * 24 { break }
            usleep(20_000)
        }
        progress.finish()
        return Date().timeIntervalSince(start)
    }

    /// A writer that reached its quota is done; any other exit is restarted (a non-kill exit is
    /// a violation).
    private mutating func reap(_ workers: [Worker]) throws {
        for w in workers where w.process?.isRunning == false && !w.finished {
            let status = w.process?.terminationStatus ?? 0
            let killed = w.process?.terminationReason == .uncaughtSignal
            if w.role == "writer" && status == 0 && !killed {
                w.finished = true
                continue
            }
            if !killed { violations.append("\(w.name) exited with status \(status) (see \(logs)/\(w.name).stderr)") }
            w.restarts += 1
            try launch(w)
        }
    }

    private mutating func killOne(of workers: [Worker]) {
        let victims = workers.filter { $0.process?.isRunning == true && !$0.finished }
        guard !victims.isEmpty else { return }
        let v = victims[random.below(victims.count)]
        if let pid = v.process?.processIdentifier {
            kill(pid, SIGKILL)
            kills += 1
            killTimes.append(Date().timeIntervalSince(startedAt))
        }
    }

    /// Writers first (SIGTERM ends them after the save in flight), then the cleaner, then the
    /// consumers, which make a final sync and write their view.
    private mutating func stop(writers: [Worker], consumers: [Worker], cleaner: Worker) throws {
        for w in writers where w.process?.isRunning == true { w.process?.terminate() }
        for w in writers { w.process?.waitUntilExit() }
        cleaner.process?.waitUntilExit()
        for c in consumers where c.process?.isRunning != true {
            // Killed at the very end: bring it back so that it can make its final sync.
            c.restarts += 1
            try launch(c)
        }
        // SIGTERM asks for the final sync; a consumer only handles it once it has started (it
        // logs "start" after installing its handler), so wait for every run's start line first.
        for (i, c) in consumers.enumerated() {
            let deadline = Date().addingTimeInterval(30)
            // Runs before this one (a run resumed after a power loss) logged their starts too.
            let before = startsBefore.indices.contains(i) ? startsBefore[i] : 0
            while Self.starts("\(logs)/consumer\(i).jsonl") < before + c.restarts + 1, c.process?.isRunning == true,
                Date() < deadline
            {
                usleep(10_000)
            }
        }
        for c in consumers { c.process?.terminate() }
        for c in consumers {
            c.process?.waitUntilExit()
            if c.process?.terminationStatus != 0 {
                violations.append("\(c.name) failed its final sync (see \(logs)/\(c.name).stderr)")
            }
        }
    }

    func acknowledgedCount(_ writers: [Worker]) -> Int {
        writers.reduce(0) { n, w in
            let path = "\(logs)/\(w.name).jsonl"
            guard let data = FileManager.default.contents(atPath: path) else { return n }
            return n + data.reduce(0) { $0 + ($1 == 10 ? 1 : 0) }
        }
    }

    /// A handle appending to `path` (created 0600), for a child's output.
    static func appending(_ path: String) -> FileHandle? {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0o600)
        return fd >= 0 ? FileHandle(fileDescriptor: fd, closeOnDealloc: true) : nil
    }

    static func lines(_ path: String) -> [[String: Any]] {
        var out: [[String: Any]] = []
        forEachLine(path) { if let object = parse($0) { out.append(object) } }
        return out
    }

    static func parse(_ line: Substring) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
    }

    /// Calls `body` with each line of `path`, reading 1 MiB at a time: a soak's logs run to
    /// millions of lines and need not sit in memory at once.
    static func forEachLine(_ path: String, _ body: (Substring) -> Void) {
        guard let handle = FileHandle(forReadingAtPath: path) else { return }
        defer { try? handle.close() }
        var pending = Data()
        while let chunk = try? handle.read(upToCount: 1 << 20), !chunk.isEmpty {
            pending.append(chunk)
            guard let last = pending.lastIndex(of: 10) else { continue }
            let text = String(decoding: pending[pending.startIndex...last], as: UTF8.self)
            for line in text.split(separator: "\n") { body(line) }
            pending = Data(pending[pending.index(after: last)...])
        }
        if !pending.isEmpty { body(Substring(String(decoding: pending, as: UTF8.self))) }
    }

    /// How many runs a consumer's log has begun (its "start" lines), without parsing the rest.
    static func starts(_ path: String) -> Int {
        var n = 0
        forEachLine(path) { if $0.hasPrefix("{\"start\"") { n += 1 } }
        return n
    }
}

extension Stress {
    /// One sample for the report: history retained and each consumer's lag, read as any
    /// process reads them (a failed read leaves the figure out, never the run).
    mutating func sample(_ t: Double, saves: Int, _ observing: (Container, TokenRegistry)) {
        let (container, registry) = observing
        let newest = (try? container.currentToken().value) ?? 0
        var lags: [String: Int] = [:]
        for c in (try? registry.consumers()) ?? [] where c.name.hasPrefix("Consumer") {
            lags[c.name] = Int(clamping: max(0, newest - (c.token?.value ?? 0)))
        }
        samples.append(
            StressSample(
                t: t, saves: saves, kills: kills, cleans: cleans, retained: (try? container.historyCount()) ?? 0,
                lags: lags))
    }

    /// Commit → merge latency of every transaction a consumer logged, with its commit time since
    /// the writers started.
    func latencies(consumers: Int) -> [(t: Double, seconds: Double)] {
        var out: [(t: Double, seconds: Double)] = []
        let start = startedAt.timeIntervalSince1970
        for i in 0..<consumers {
            for line in Self.lines("\(logs)/consumer\(i).jsonl") {
                guard let merged = line["merged_at"] as? Double, let committed = line["committed_at"] as? Double
                else { continue }
                out.append((committed - start, max(0, merged - committed)))
            }
        }
        return out
    }
}
