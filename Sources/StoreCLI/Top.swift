import Foundation
import ReadLater
import SharedStore

/// One sample of `storectl top`: the numbers of a group directory at one moment.
struct TopSample {
    struct Consumer {
        let name: String
        /// Transactions not merged yet (nil: evicted, another store's token, or never synced).
        let lag: Int?
        /// How old the oldest transaction it has not merged is (0 when up to date).
        let lagSeconds: Double?
        let evicted: Bool
        let updatedAt: Date
        /// Its token is older than the history kept: its next sync reloads in full.
        var expired = false
    }
    var at = Date()
    var group = ""
    var modelVersion = 0
    var format = ""
    var newest: Int64 = 0
    var retained = 0
    var historyBytes = 0
    var cleanedThrough: Int64 = 0
    var cleanedUpTo: Date?
    var savesPerSecond: [(author: String, rate: Double)] = []
    var consumers: [Consumer] = []
    var storeBytes = 0
    var walBytes = 0
    /// The reader holding the WAL furthest back: pid, executable, frames written since its snapshot.
    var oldestReader: (pid: Int32, executable: String, behind: Int)?
    var mirrorPushLag: Int?
    var quarantined = 0
    var processes: [(pid: Int32, executable: String)] = []
    /// Why the consumers are not shown (no registry, a damaged one), or nil.
    var registryProblem: String?
    /// Saves per second were counted from a part of the transactions of the interval (more than
    /// 100,000), scaled to the whole.
    var ratesScaled = false

    var json: JSONValue {
        .object([
            ("at", .string(ISO8601.string(at))), ("model_version", .number(Double(modelVersion))),
            ("format", .string(format)), ("token", .number(Double(newest))),
            (
                "history",
                .object([
                    ("transactions", .number(Double(retained))), ("bytes", .number(Double(historyBytes))),
                    ("cleaned_through", .number(Double(cleanedThrough))),
                    ("cleaned_up_to", cleanedUpTo.map { .string(ISO8601.string($0)) } ?? .null),
                ])
            ),
            ("saves_per_s", .object(savesPerSecond.map { ($0.author, .number(round2($0.rate))) })),
            (
                "consumers",
                .array(
                    consumers.map { c in
                        .object([
                            ("consumer", .string(c.name)), ("lag", c.lag.map { .number(Double($0)) } ?? .null),
                            ("lag_s", c.lagSeconds.map { .number(round2($0)) } ?? .null), ("evicted", .bool(c.evicted)),
                            ("expired", .bool(c.expired)), ("updated_at", .string(ISO8601.string(c.updatedAt))),
                        ])
                    })
            ),
            ("bytes", .object([("store", .number(Double(storeBytes))), ("wal", .number(Double(walBytes)))])),
            (
                "oldest_reader",
                oldestReader.map { r in
                    .object([
                        ("pid", .number(Double(r.pid))), ("executable", .string(r.executable)),
                        ("frames_behind", .number(Double(r.behind))),
                    ])
                } ?? .null
            ),
            (
                "mirror",
                .object([
                    ("push_lag", mirrorPushLag.map { .number(Double($0)) } ?? .null),
                    ("quarantined", .number(Double(quarantined))),
                ])
            ),
            ("registry_problem", registryProblem.map(JSONValue.string) ?? .null),
            ("saves_per_s_scaled", .bool(ratesScaled)),
            (
                "processes",
                .array(
                    processes.map { p in
                        .object([("pid", .number(Double(p.pid))), ("executable", .string(p.executable))])
                    })
            ),
        ])
    }

    private func round2(_ x: Double) -> Double { (x * 100).rounded() / 100 }
}

/// Takes the samples of `storectl top`: everything from what the store, the registry and the
/// kernel already keep, by small reads (the history after the last sample, the registry's
/// entries, the WAL index's locks), so that watching never slows the writers.
final class TopSampler {
    let group: String
    private(set) var container: Container
    private(set) var registry: TokenRegistry?
    /// Why there is no registry to read (shown on the screen), or nil.
    var registryProblem: String?
    /// The store file and the registry file as they were opened (device, inode): a file deleted
    /// or replaced under the view is said, not shown as it was.
    private var storeFile: FileIdentity?
    private var registryFile: FileIdentity?
    private var lastToken: Int64
    private var lastTime: Date
    private var description: (version: Int, format: String)

    init(group: String, container: Container, registry: TokenRegistry?) throws {
        self.group = group
        self.container = container
        self.registry = registry
        lastToken = try container.currentToken().value
        lastTime = Date()
        let d = try Container.describeStore(group: group)
        description = (d?.version ?? container.model.version, d?.format ?? "?")
        storeFile = FileIdentity(container.storePath)
        registryFile = FileIdentity(Self.registryPath(group))
    }

    static func registryPath(_ group: String) -> String { (group as NSString).appendingPathComponent("tokens.lmdb") }

    /// The store must still be the file the view opened; a registry that appeared since is
    /// opened, one replaced or removed since is said.
    private func checkFiles() throws {
        guard let now = FileIdentity(container.storePath), now == storeFile else {
            throw StoreError(
                .fileAccess, "\(container.storePath) was deleted or replaced while top watched it; start top again")
        }
        let registryNow = FileIdentity(Self.registryPath(group))
        if registry == nil, registryNow != nil, registryFile == nil {
            registry = try? TokenRegistry(group: group, readOnly: true)
            registryFile = registryNow
            registryProblem = registry == nil ? "the token registry cannot be opened" : nil
        } else if registry != nil, registryNow != registryFile {
            registryProblem = "tokens.lmdb was removed or replaced since top started: restart top to read the new one"
        }
    }

    /// The numbers now; `reopen` opens the store again when another process migrated it.
    func sample(reopen: () throws -> Container) throws -> TopSample {
        do {
            return try take()
        } catch let error as StoreError where error.code == .modelOutdated {
            container = try reopen()
            if let d = try Container.describeStore(group: group) { description = (d.version, d.format) }
            // Tokens go on across a migration: the saves since the last sample (the migration's
            // own transaction among them) are counted as any others.
            return try take()
        }
    }

    private func take() throws -> TopSample {
        try checkFiles()
        var s = TopSample()
        s.registryProblem = registryProblem
        s.group = group
        s.modelVersion = description.version
        s.format = description.format
        s.newest = try container.currentToken().value
        let cleaning = try container.historyCleaning()
        s.cleanedThrough = cleaning.through
        s.cleanedUpTo = cleaning.time > 0 ? Date(timeIntervalSince1970: cleaning.time) : nil
        s.retained = max(0, Int(clamping: s.newest) - Int(clamping: cleaning.through))
        s.historyBytes = Int((Double(s.retained) * cleaning.meanBytes).rounded())
        (s.savesPerSecond, s.ratesScaled) = try rates(now: s.at, newest: s.newest, floor: cleaning.through)
        if let registry, registryProblem == nil {
            s.consumers = try consumers(registry, newest: s.newest, floor: cleaning.through, at: s.at)
        }
        let sizes = container.fileSizes()
        s.storeBytes = sizes.store
        s.walBytes = sizes.wal
        if let oldest = WALReaders.of(storePath: container.storePath).min(by: { $0.frame < $1.frame }) {
            let behind = Int(oldest.walFrames) - Int(min(oldest.frame, oldest.walFrames))
            s.oldestReader = (oldest.pid, name(oldest.pid), behind)
        }
        s.mirrorPushLag = s.consumers.first { $0.name == "Mirror" }?.lag
        s.quarantined = try container.quarantinedMirrorRows().count
        s.processes = WALReaders.holders(storePath: container.storePath).map { ($0, name($0)) }
        return s
    }

    /// Saves per second of each author since the last sample, from the history written since
    /// (at most 100,000 transactions are read per sample).
    private func rates(now: Date, newest: Int64, floor: Int64) throws -> ([(author: String, rate: Double)], Bool) {
        defer {
            lastToken = newest
            lastTime = now
        }
        let elapsed = max(now.timeIntervalSince(lastTime), 0.001)
        guard newest > lastToken else { return ([], false) }
        var request = HistoryRequest(after: HistoryToken(storeID: container.storeID, value: max(lastToken, floor)))
        request.limit = 100_000
        var counts: [String: Int] = [:]
        // History cleaned past the last sample: what is left is counted.
        let transactions = (try? container.fetchHistory(request)) ?? []
        for t in transactions where t.token.value <= newest { counts[t.author ?? "(none)", default: 0] += 1 }
        // More than were read: each author's share of those read, of all the interval made.
        let read = counts.values.reduce(0, +)
        let made = Int(clamping: newest - max(lastToken, floor))
        let scale = transactions.count >= 100_000 && read > 0 ? Double(made) / Double(read) : 1
        let rates = counts.map { ($0.key, Double($0.value) * scale / elapsed) }.sorted { $0.1 > $1.1 }
        return (rates, scale != 1)
    }

    /// Each consumer's lag as `storectl tokens` counts it: the retained transactions it has not
    /// merged (all of them for one that never synced, or one whose token the cleaner passed: it
    /// reloads in full, and shows as expired), and how old the oldest of them is.
    private func consumers(_ registry: TokenRegistry, newest: Int64, floor: Int64, at now: Date) throws
        -> [TopSample.Consumer]
    {
        let retained = Int(clamping: max(0, newest - floor))
        var request = HistoryRequest()
        request.limit = 1
        let oldest = try container.fetchHistory(request).first?.timestamp.timeIntervalSince1970
        return try registry.consumers().map { c in
            var lag: Int?
            var seconds: Double?
            var expired = false
            if !c.isEvicted, c.token.map({ $0.storeID == container.storeID && $0.value <= newest }) ?? true {
                let t = c.token?.value ?? 0
                expired = c.token != nil && t < floor
                lag = t < floor ? retained : Int(clamping: newest - t)
                if lag == 0 {
                    seconds = 0
                } else if !expired {
                    let first = t < floor ? oldest : try container.historyTimestamp(of: t + 1)
                    seconds = first.map { max(0, now.timeIntervalSince1970 - $0) }
                }
            }
            return TopSample.Consumer(
                name: c.name, lag: lag, lagSeconds: seconds, evicted: c.isEvicted, updatedAt: c.updatedAt,
                expired: expired)
        }
    }

    private func name(_ pid: Int32) -> String { WALReaders.executable(of: pid).map(TextSafety.visible) ?? "?" }
}

/// The text of one frame of `storectl top`, fitted to a terminal of `width` × `height`.
enum TopScreen {
    static func lines(_ s: TopSample, interval: Double, width: Int, height: Int) -> [String] {
        var out: [String] = []
        out.append(
            "SharedStore top  \(TextSafety.visible(s.group))  model \(s.modelVersion) (format \(s.format))  "
                + "\(ISO8601.string(s.at))  every \(String(format: "%.1f", interval))s  q: quit")
        let reader = s.oldestReader.map { "pid \($0.pid) (\($0.executable)), \($0.behind) frames behind" } ?? "none"
        out.append("store \(mib(s.storeBytes))   WAL \(mib(s.walBytes))   oldest reader holding the WAL: \(reader)")
        out.append(
            "history \(s.retained) transactions (≈ \(mib(s.historyBytes))), cleaned through token \(s.cleanedThrough)"
                + (s.cleanedUpTo.map { " (transactions up to \(ISO8601.string($0)))" } ?? " (never cleaned)"))
        out.append(
            "mirror: push lag \(s.mirrorPushLag.map(String.init) ?? "-") transactions, \(s.quarantined) quarantined")
        if let problem = s.registryProblem { out.append("registry: \(TextSafety.visible(problem))") }
        out.append("")
        out.append(pad("SAVES/S BY AUTHOR", 32) + "SAVES/S" + (s.ratesScaled ? " (from a part of the interval)" : ""))
        if s.savesPerSecond.isEmpty { out.append("  (no saves since the last sample)") }
        for (author, rate) in s.savesPerSecond {
            out.append(pad("  " + TextSafety.visible(author), 32) + String(format: "%.1f", rate))
        }
        out.append("")
        out.append(pad("CONSUMER", 32) + pad("LAG (TX)", 12) + pad("LAG (TIME)", 14) + "LAST SYNC")
        for c in s.consumers {
            let lag = c.evicted ? "evicted" : c.expired ? "expired" : c.lag.map(String.init) ?? "-"
            let time = c.lagSeconds.map { String(format: "%.1fs", $0) } ?? "-"
            out.append(
                pad("  " + TextSafety.visible(c.name), 32) + pad(lag, 12) + pad(time, 14)
                    + ISO8601.string(c.updatedAt))
        }
        out.append("")
        out.append("PROCESSES HOLDING THE STORE (\(s.processes.count) besides this one)")
        for p in s.processes { out.append("  \(p.pid)  \(p.executable)") }
        // Fitted: each line cut to the width, the screen to the height (the last line says so).
        var fitted = out.map { cut($0, width) }
        if fitted.count > height, height > 0 {
            fitted = Array(fitted.prefix(height - 1)) + [cut("… \(fitted.count - height + 1) more lines", width)]
        }
        return fitted
    }

    /// `s` padded with spaces to `n` columns of the terminal (one space at least).
    static func pad(_ s: String, _ n: Int) -> String {
        let w = width(s)
        return w >= n ? s + " " : s + String(repeating: " ", count: n - w)
    }

    /// `s` cut to `columns` of the terminal, ending with "…" when it was cut.
    static func cut(_ s: String, _ columns: Int) -> String {
        guard columns > 0, width(s) > columns else { return s }
        var out = ""
        var used = 0
        for ch in s {
            let w = width(String(ch))
            guard used + w <= columns - 1 else { break }
            out.append(ch)
            used += w
        }
        return out + "…"
    }

    /// The columns `s` takes on a terminal: two for East Asian wide and fullwidth characters and
    /// most emoji, none for combining marks and zero-width characters, one for the rest.
    static func width(_ s: String) -> Int {
        s.unicodeScalars.reduce(0) { sum, u in
            switch u.properties.generalCategory {
            case .nonspacingMark, .enclosingMark, .format: return sum
            default: break
            }
            let v = u.value
            let wide =
                (0x1100...0x115F).contains(v) || (0x2E80...0xA4CF).contains(v) || (0xAC00...0xD7A3).contains(v)
                || (0xF900...0xFAFF).contains(v) || (0xFE30...0xFE4F).contains(v) || (0xFF00...0xFF60).contains(v)
                || (0xFFE0...0xFFE6).contains(v) || (0x1F300...0x1FAFF).contains(v) || (0x20000...0x3FFFD).contains(v)
            return sum + (wide ? 2 : 1)
        }
    }

    static func mib(_ bytes: Int) -> String {
        bytes >= 1 << 20 ? String(format: "%.1f MiB", Double(bytes) / 1_048_576) : "\(bytes >> 10) KiB"
    }
}

extension Targets {
    /// `storectl top [--interval S] [--count N] [--json]`.
    static func top(_ inv: Invocation) throws {
        let interval = try inv.arguments.seconds("interval", in: 0.05...3600) ?? 1
        let count = try inv.arguments.integer("count", in: 1...Int(Int32.max))
        let (container, registry, problem) = try inv.inspect()
        let sampler = try TopSampler(group: inv.group, container: container, registry: registry)
        // Said on the screen and in each JSON line (a warning would be hidden by the view).
        sampler.registryProblem = problem
        let reopen = { () throws -> Container in
            var options = Container.Options()
            options.readOnly = true
            let model = try ReadLater.model(
                version: max(try Container.describeStore(group: inv.group)?.version ?? 1, 1))
            return try Container(group: inv.group, model: model, options: options)
        }
        if inv.output.json {
            var n = 0
            while count.map({ n < $0 }) ?? true {
                if n > 0 { Thread.sleep(forTimeInterval: interval) }
                inv.output.record(try sampler.sample(reopen: reopen).json)
                inv.output.flush()
                n += 1
            }
            return
        }
        // Signals from outside (kill, a supervisor, a logout) end the view as q does, at once,
        // and a resize redraws it: the terminal is always put back.
        let signals = try SignalPipe([SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGWINCH])
        let terminal = try RawTerminal()
        defer { terminal.restore() }
        var n = 0
        while count.map({ n < $0 }) ?? true {
            let sample = try sampler.sample(reopen: reopen)
            var size = terminal.size
            terminal.draw(TopScreen.lines(sample, interval: interval, width: size.width, height: size.height))
            n += 1
            var event = terminal.wait(interval, signals: signals)
            while event == .resize {
                size = terminal.size
                terminal.draw(TopScreen.lines(sample, interval: interval, width: size.width, height: size.height))
                event = terminal.wait(interval, signals: signals)
            }
            if event == .quit { break }
        }
    }
}

/// A file as the kernel knows it (device and inode): the same path may name another file later.
struct FileIdentity: Equatable {
    let device: UInt64
    let inode: UInt64

    /// The file at `path`, or nil when there is none.
    init?(_ path: String) {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
    }
}
