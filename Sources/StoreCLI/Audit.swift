import Foundation
import ReadLater
import SharedStore
import SharedStoreSQLite

/// One risk `storectl audit` found: what it is, what shows it, and what to do.
struct AuditFinding {
    /// A short stable name (`history-never-cleaned`, `consumer-idle`, …).
    let risk: String
    /// What in the group directory shows it, with the figures.
    let evidence: String
    /// What to do about it.
    let fix: String

    var json: JSONValue {
        .object([("risk", .string(risk)), ("evidence", .string(evidence)), ("fix", .string(fix))])
    }
}

/// `storectl audit`: the seeds' project audit for one group directory. Each check reads what is
/// there (the store, the registry, the files, an SQL debug log) and writes nothing but what
/// opening them always does.
struct Audit {
    /// A consumer that has not synced for this long is idle; history older than this piles up.
    var idleAfter: TimeInterval = 7 * 86_400
    /// Retained transactions past which history that is never cleaned, or older than `idleAfter`,
    /// is a risk.
    var historyLimit = 100_000
    /// A WAL larger than this (bytes) is a risk.
    var walLimit = 64 << 20
    /// Unpushed transactions past which the mirror lags.
    var mirrorLag = 1000
    /// The SQL debug log (`SHAREDSTORE_SQL_DEBUG=1`'s stderr) to read scans from.
    var sqlLog: String?
    /// The time the audit runs at.
    var now = Date()

    /// Every finding, in the order of the checks.
    func run(group: String, container: Container, registry: TokenRegistry?, registryProblem: String?) throws
        -> [AuditFinding]
    {
        var findings: [AuditFinding] = []
        findings += privacy(group: group)
        findings += try history(container, registry)
        if let registry { findings += try consumers(container, registry) }
        findings += wal(container)
        findings += try model(group: group)
        findings += verify(container, registry, registryProblem)
        // (the mirror's quarantine is its own finding below, as is the files' privacy above)
        findings += try mirror(container)
        if let sqlLog { findings += scans(sqlLog) }
        return findings
    }

    // MARK: - Files

    /// The group directory must be 0700 and its files 0600: another user must read nothing.
    func privacy(group: String) -> [AuditFinding] {
        var open: [String] = []
        var st = stat()
        if lstat(group, &st) == 0, st.st_mode & 0o077 != 0 {
            open.append("\(group) is \(String(st.st_mode & 0o777, radix: 8))")
        }
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: group)) ?? []
        for name in entries.sorted() {
            let path = (group as NSString).appendingPathComponent(name)
            guard lstat(path, &st) == 0 else { continue }
            let shown = TextSafety.visible(name)
            switch st.st_mode & S_IFMT {
            case S_IFLNK: open.append("\(shown) is a symbolic link (the group's files must be its own)")
            case S_IFDIR where st.st_mode & 0o077 != 0:
                open.append("\(shown)/ is a directory of mode \(String(st.st_mode & 0o777, radix: 8))")
            case _ where st.st_mode & 0o077 != 0: open.append("\(shown) is \(String(st.st_mode & 0o777, radix: 8))")
            default: continue
            }
        }
        guard !open.isEmpty else { return [] }
        return [
            AuditFinding(
                risk: "files-not-private",
                evidence: open.joined(separator: "; ") + " (other users can read or write them)",
                fix: "chmod 700 \(Self.quoted(group)) and its directories, chmod 600 its files, and remove links "
                    + "that do not belong there")
        ]
    }

    // MARK: - History

    /// History never cleaned, or older than `idleAfter` while it piles up past `historyLimit`.
    func history(_ container: Container, _ registry: TokenRegistry?) throws -> [AuditFinding] {
        let retained = try container.historyStatistics().transactions
        let oldest = try registry.flatMap { r in
            try r.consumers().filter { !$0.isEvicted }.min { ($0.token?.value ?? 0) < ($1.token?.value ?? 0) }
        }
        // A trend is judged by its own rise (at least the limit), whatever is retained right now.
        if retained > 0, let growing = try growth(container, retained: retained, holder: oldest) { return [growing] }
        guard retained > 0, retained >= historyLimit else { return [] }
        let deletedThrough = try container.historyDeletedThrough()
        if deletedThrough == 0, let holder = oldest, (holder.token?.value ?? 0) == 0 {
            return [
                AuditFinding(
                    risk: "history-held-back",
                    evidence: "\(retained) transactions retained, none ever deleted: consumer "
                        + "\(TextSafety.visible(holder.name)) has merged none of them: the cleaner can delete nothing",
                    fix: "run it, or evict it (history-cleaner --evict-after SECONDS) or remove it "
                        + "(storectl reset-consumer \(Self.quoted(holder.name)))")
            ]
        }
        if deletedThrough == 0 {
            return [
                AuditFinding(
                    risk: "history-never-cleaned",
                    evidence: "\(retained) transactions retained, none ever deleted",
                    fix: "run history-cleaner regularly (after the main app's sync, or from a timer); it deletes only "
                        + "what every consumer merged")
            ]
        }
        var request = HistoryRequest()
        request.limit = 1
        guard let first = try container.fetchHistory(request).first,
            now.timeIntervalSince(first.timestamp) > idleAfter
        else { return [] }
        let holder = oldest
        return [
            AuditFinding(
                risk: "history-piling-up",
                evidence: "\(retained) transactions retained, the oldest from \(ISO8601.string(first.timestamp)) "
                    + "(\(days(now.timeIntervalSince(first.timestamp)))); deleted through token \(deletedThrough)"
                    + (holder.map { ", held back by consumer \($0.name)" } ?? ""),
                fix: "history grows faster than it is cleaned: run history-cleaner more often, and evict consumers "
                    + "that stopped (history-cleaner --evict-after SECONDS)")
        ]
    }

    /// History made faster than it is cleaned, from the cleaner's logged runs
    /// (``Container/cleanerRuns()``): the least history a run left, in each third of the runs kept
    /// (oldest first), rose from third to third, by at least the history limit in all. A consumer
    /// that syncs every few runs (a saw that is cleaned down to its floor), one backlog cleared,
    /// or a jump to a level that then holds, is no trend. Runs logged in the future (a clock that
    /// was wrong) are left out.
    func growth(_ container: Container, retained: Int, holder: TokenRegistry.Consumer?) throws -> AuditFinding? {
        let runs = try container.cleanerRuns().filter { $0.time <= now.timeIntervalSince1970 + 60 }
        guard runs.count >= 3, let first = runs.first, let last = runs.last else { return nil }
        let third = runs.count / 3
        let parts = [runs[..<third], runs[third..<(2 * third)], runs[(2 * third)...]]
        let floors = parts.map { part in part.map(\.retained).min() ?? 0 }
        guard floors[0] < floors[1], floors[1] < floors[2], floors[2] - floors[0] >= Int64(max(historyLimit, 1))
        else { return nil }
        let made = max(0, try container.currentToken().value - first.newest)
        let cleaned = max(0, last.through - first.through)
        let span = max(now.timeIntervalSince1970 - first.time, 1)
        let since = ISO8601.string(Date(timeIntervalSince1970: first.time))
        return AuditFinding(
            risk: "history-growing",
            evidence: "over the cleaner's last \(runs.count) runs (since \(since)), the least history a run left rose "
                + "from \(floors[0]) to \(floors[1]) to \(floors[2]) (by thirds of the runs; \(retained) retained "
                + "now, from \(first.retained) after the first run); \(made) transactions were made "
                + "(\(Self.rate(made, span))) and \(cleaned) deleted (\(Self.rate(cleaned, span)))"
                + (holder.map { ", held back by consumer \(TextSafety.visible($0.name))" } ?? ""),
            fix: "history grows faster than it is cleaned: sync the consumer that lags more often, run history-cleaner "
                + "after it, and evict consumers that stopped (history-cleaner --evict-after SECONDS)")
    }

    /// `n` events over `seconds` as a rate a person reads: per second, minute or hour.
    static func rate(_ n: Int64, _ seconds: Double) -> String {
        let perSecond = Double(n) / seconds
        if perSecond >= 1 { return String(format: "%.1f/s", perSecond) }
        if perSecond * 60 >= 1 { return String(format: "%.1f/min", perSecond * 60) }
        return String(format: "%.1f/h", perSecond * 3600)
    }

    // MARK: - Consumers

    /// Consumers idle past `idleAfter`, and consumers evicted that never came back.
    func consumers(_ container: Container, _ registry: TokenRegistry) throws -> [AuditFinding] {
        var findings: [AuditFinding] = []
        let newest = try container.currentToken().value
        // Counted once for all the consumers (a count of the history table).
        let retained = try container.historyCount()
        for c in try registry.consumers() {
            let idle = now.timeIntervalSince(c.updatedAt)
            if c.isEvicted {
                findings.append(
                    AuditFinding(
                        risk: "consumer-evicted",
                        evidence: "consumer \(c.name) was evicted and has not synced since "
                            + "\(ISO8601.string(c.updatedAt)) (\(days(idle)))",
                        fix: "run \(c.name) (it reloads in full), or remove it: storectl reset-consumer \(c.name)"))
            } else if idle > idleAfter {
                let lag = try lagOf(c, container, newest: newest, retained: retained)
                let state =
                    c.token == nil
                    ? "never synced; it holds all history back"
                    : lag.map { $0 == 0 ? "up to date" : "\($0) transactions behind; it holds history back" }
                        ?? "at a token of another store"
                findings.append(
                    AuditFinding(
                        risk: "consumer-idle",
                        evidence: "consumer \(TextSafety.visible(c.name)) last synced \(ISO8601.string(c.updatedAt)) "
                            + "(\(days(idle))), \(state)",
                        fix: "run it, or evict it (history-cleaner --evict-after SECONDS) or remove it "
                            + "(storectl reset-consumer \(Self.quoted(c.name)))"))
            }
            if c.name == "Mirror", !c.isEvicted, let lag = try lagOf(c, container, newest: newest, retained: retained) {
                if lag > mirrorLag {
                    findings.append(
                        AuditFinding(
                            risk: "mirror-behind",
                            evidence: "the mirror has \(lag) transactions of this store not pushed",
                            fix: "run storectl mirror --follow (or --once), and check the server is reachable"))
                }
            }
        }
        if registry.clearedStaleReaders > 0 {
            findings.append(
                AuditFinding(
                    risk: "stale-reader-slots",
                    evidence: "\(registry.clearedStaleReaders) reader slots of processes that died were left in "
                        + "tokens.lmdb (this audit's open cleared them)",
                    fix: "nothing now; if it recurs, find what kills processes mid-read (kill -9, a crash)"))
        }
        return findings
    }

    /// How many retained transactions `c` has not merged (all of them when it never synced; nil
    /// for a token of another store or past the newest).
    func lagOf(_ c: TokenRegistry.Consumer, _ container: Container, newest: Int64, retained: Int) throws -> Int? {
        guard let t = c.token else { return retained }
        guard t.storeID == container.storeID, t.value <= newest else { return nil }
        return try retained - container.historyCount(through: t.value)
    }

    /// `text` as one word for a shell (quoted when it holds anything but letters, digits and
    /// `._-@~/`; control characters shown escaped).
    static func quoted(_ text: String) -> String {
        let plain = text.unicodeScalars.allSatisfy {
            CharacterSet.alphanumerics.contains($0) && $0.isASCII || "._-@~/".unicodeScalars.contains($0)
        }
        return plain && !text.isEmpty
            ? text : "'" + TextSafety.visible(text).replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    // MARK: - WAL

    /// A WAL past `walLimit`, with the readers that keep it from starting over (and its file from
    /// being cut back).
    func wal(_ container: Container) -> [AuditFinding] {
        let size = container.fileSizes().wal
        guard size > walLimit else { return [] }
        let pins = WALReaders.of(storePath: container.storePath).map { r in
            "pid \(r.pid) (\(WALReaders.executable(of: r.pid).map(TextSafety.visible) ?? "?")) reads from frame "
                + "\(r.frame) of \(r.walFrames)"
        }
        return [
            AuditFinding(
                risk: "wal-large",
                evidence: "Store.sqlite-wal is \(self.size(size)) (limit \(self.size(walLimit)))"
                    + (pins.isEmpty ? "; no reader holds it now" : "; held by " + pins.joined(separator: ", ")),
                fix: pins.isEmpty
                    ? "saves start it over once no reader holds it, and cut the file to 16 MiB; "
                        + "if it stays, look for long reads"
                    : "end the long read of each holder (a pinned context, an open read transaction)")
        ]
    }

    // MARK: - Model, invariants, mirror

    /// A store whose model is older than the newest this build knows.
    func model(group: String) throws -> [AuditFinding] {
        guard let version = try Container.describeStore(group: group)?.version, version < ReadLater.newestVersion
        else { return [] }
        return [
            AuditFinding(
                risk: "model-behind",
                evidence: "the store is at model version \(version); the newest known is \(ReadLater.newestVersion)",
                fix: "storectl migrate (or run a target of the newest version, which migrates on open)")
        ]
    }

    /// What `storectl verify` finds, one finding per failed check.
    func verify(_ container: Container, _ registry: TokenRegistry?, _ problem: String?) -> [AuditFinding] {
        // No registry file: none was made yet, or one that held consumers is gone (verify says
        // which, as storectl verify does).
        let checks =
            registry == nil && problem == nil
            ? StoreVerifier.verifyWithoutRegistry(container: container, progress: nil)
            : StoreVerifier.verify(container: container, registry: registry, registryProblem: problem)
        // The files' modes are the audit's own check (files-not-private), as is the quarantine.
        return checks.filter { !$0.ok && $0.name != "files" && $0.name != "mirror-quarantine" }.map { check in
            AuditFinding(
                risk: "verify-\(check.name)", evidence: check.detail,
                fix: Self.fix(forVerify: check.name, detail: check.detail))
        }
    }

    /// What to do about a check of `storectl verify` that failed, as its detail calls for.
    static func fix(forVerify check: String, detail: String = "") -> String {
        switch check {
        case "kept-counts", "derived":
            return "storectl recount (a tool that does not keep them, such as sqlite3, wrote the store)"
        case "registry" where detail.contains("cannot read") || detail.contains("ermission denied"):
            return "give this user read access to tokens.lmdb, or run the audit as a user who has it (the registry "
                + "is not damaged by this)"
        case "registry" where !detail.contains("repair-registry"):
            return "run the consumers named: any target's open first moves the store's tokens past the registry's, "
                + "and each consumer reloads in full at its next sync; remove one that is gone for good with "
                + "storectl reset-consumer NAME"
        case "registry", "registry-readers":
            return "storectl repair-registry (every consumer reloads in full after it)"
        case "sqlite-integrity":
            return "do not write the store: copy the group aside and restore Store.sqlite from a backup"
        case "store-lock":
            return "find the process named and end it; storectl verify says more"
        case "mirror-quarantine":
            return "fix the cause, then storectl mirror --retry-quarantined"
        default:
            return "storectl verify for the details"
        }
    }

    /// Server rows the mirror could not apply here.
    func mirror(_ container: Container) throws -> [AuditFinding] {
        let quarantined = try container.quarantinedMirrorRows()
        guard let first = quarantined.first else { return [] }
        return [
            AuditFinding(
                risk: "mirror-quarantine",
                evidence: "\(quarantined.count) mirror rows quarantined (not applied here); the first: "
                    + TextSafety.visible(first.reason),
                fix: "fix the cause (update the app for a newer model), then storectl mirror --retry-quarantined")
        ]
    }

    // MARK: - SQL log

    /// The statements of an SQL debug log that scanned an entity's table, most rows first (at
    /// most 10). The log is read line by line (any size; CR LF or LF; bytes that are not UTF-8
    /// are shown replaced); a log that cannot be read, or holds no statement, is a finding of its
    /// own, so that the other findings stand.
    func scans(_ path: String) -> [AuditFinding] {
        var statement: String?
        var statements = 0
        var scanned: [String: (times: Int, steps: Int, plan: String)] = [:]
        let read = SQLLogReader.lines(of: path) { raw in
            let line = raw.hasSuffix("\r") ? raw.dropLast() : raw[...]
            guard line.hasPrefix("sharedstore-sql: ") else { return }
            let body = line.dropFirst("sharedstore-sql: ".count)
            if body.hasPrefix("  scan ("), let sql = statement {
                let steps = Int(body.dropFirst("  scan (".count).prefix { $0.isNumber }) ?? 0
                // The library's own small tables, and fetches of every object (no condition), read
                // every row by design.
                guard !SQLDebug.readsInternalTable(sql), !SQLDebug.fetchesEveryRow(sql) else { return }
                let plan = body.split(separator: ":", maxSplits: 1).last.map(String.init) ?? ""
                let old = scanned[sql] ?? (0, 0, "")
                scanned[sql] = (old.times + 1, max(old.steps, steps), plan.trimmingCharacters(in: .whitespaces))
            } else if let ms = body.range(of: " ms ") {
                statement = String(body[ms.upperBound...])
                statements += 1
            }
        }
        if let problem = read {
            return [
                AuditFinding(
                    risk: "sql-log-unreadable", evidence: "cannot read the SQL log \(path): \(problem)",
                    fix: "give the file a process's stderr went to with SHAREDSTORE_SQL_DEBUG=1")
            ]
        }
        guard statements > 0 else {
            return [
                AuditFinding(
                    risk: "sql-log-empty",
                    evidence: "\(TextSafety.visible(path)) holds no 'sharedstore-sql:' line: not an SQL debug log",
                    fix: "run the process with SHAREDSTORE_SQL_DEBUG=1 and give the file its stderr went to")
            ]
        }
        return scanned.sorted { ($0.value.steps, $0.key) > ($1.value.steps, $1.key) }.prefix(10).map { sql, scan in
            let walksIndex = scan.plan.contains("USING INDEX") || scan.plan.contains("USING COVERING INDEX")
            return AuditFinding(
                risk: "query-scanned",
                evidence: "\(TextSafety.visible(sql)) ran \(scan.times) times, reading up to \(scan.steps) rows "
                    + "in a full scan (plan: \(TextSafety.visible(scan.plan)))",
                fix: walksIndex
                    ? "it walks a whole index (for its order) and tests every row: add a condition an index serves "
                        + "(equality, a range, a prefix), or an index on what it filters by"
                    : "declare an index on what it filters or sorts by (Index in the model), or change the query")
        }
    }

    /// `bytes` for people: MiB from 1 MiB up, else KiB.
    func size(_ bytes: Int) -> String {
        bytes >= 1 << 20 ? "\(bytes >> 20) MiB" : "\(bytes >> 10) KiB"
    }

    /// `seconds` in days (or hours, under two days), for people.
    func days(_ seconds: TimeInterval) -> String {
        seconds >= 2 * 86_400 ? "\(Int(seconds / 86_400)) days ago" : "\(Int(seconds / 3600)) hours ago"
    }
}

extension Targets {
    /// `storectl audit`: one line (or JSON object) per risk found; exits 1 when there is one.
    static func audit(_ inv: Invocation) throws {
        let a = inv.arguments
        var audit = Audit()
        audit.idleAfter = try a.seconds("idle-after", in: 0...(100 * 365 * 86_400)) ?? audit.idleAfter
        audit.historyLimit = try a.integer("history-limit", in: 0...Int(Int32.max)) ?? audit.historyLimit
        audit.walLimit = (try a.integer("wal-limit", in: 0...1_048_576) ?? 64) << 20
        audit.mirrorLag = try a.integer("mirror-lag", in: 0...Int(Int32.max)) ?? audit.mirrorLag
        audit.sqlLog = a.value("sql-log")
        let (container, registry, problem) = try inv.inspect()
        let findings = try audit.run(
            group: inv.group, container: container, registry: registry, registryProblem: problem)
        if findings.isEmpty && !inv.output.json {
            inv.output.record(.object([("audit", .string("no risk found in \(inv.group)"))]))
        }
        // One record per finding (people get `risk`, `evidence` and `fix` lines, never cut short).
        for finding in findings { inv.output.record(finding.json) }
        if !findings.isEmpty {
            let risks = Array(Set(findings.map(\.risk))).sorted()
            throw StoreError(
                .verificationFailed,
                "audit found \(findings.count) finding(s) of \(risks.count) risk(s): \(risks.joined(separator: ", "))")
        }
    }
}

/// Reads a text file line by line in blocks, whatever its size.
enum SQLLogReader {
    /// Calls `body` with each line of the regular file at `path` (without its newline); returns
    /// why it cannot be read, or nil.
    static func lines(of path: String, _ body: (String) -> Void) -> String? {
        // A file the user names on the command line, never one of the group's: a link given on
        // purpose is followed (only a regular file is read).
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return String(cString: strerror(errno)) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return String(cString: strerror(errno)) }
        guard st.st_mode & S_IFMT == S_IFREG else { return "not a regular file" }
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n < 0, errno == EINTR { continue }
            guard n >= 0 else { return String(cString: strerror(errno)) }
            if n == 0 { break }
            var start = 0
            for i in 0..<n where chunk[i] == 10 {
                pending += chunk[start..<i]
                body(String(decoding: pending, as: UTF8.self))
                pending.removeAll(keepingCapacity: true)
                start = i + 1
            }
            // A line longer than 1 MiB is cut: a statement is never that long, and memory stays bounded.
            if pending.count < 1 << 20 { pending += chunk[start..<n].prefix((1 << 20) - pending.count) }
        }
        if !pending.isEmpty { body(String(decoding: pending, as: UTF8.self)) }
        return nil
    }
}
