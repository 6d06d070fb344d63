import Foundation
import ReadLater
import SharedStore

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
        findings += try mirror(container)
        if let sqlLog { findings += try scans(sqlLog) }
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
            guard lstat(path, &st) == 0, st.st_mode & S_IFMT != S_IFLNK, st.st_mode & 0o077 != 0 else { continue }
            open.append("\(name) is \(String(st.st_mode & 0o777, radix: 8))")
        }
        guard !open.isEmpty else { return [] }
        return [
            AuditFinding(
                risk: "files-not-private",
                evidence: open.joined(separator: "; ") + " (other users can read or write them)",
                fix: "chmod 700 \(group), and chmod 600 each file in it")
        ]
    }

    // MARK: - History

    /// History never cleaned, or older than `idleAfter` while it piles up past `historyLimit`.
    func history(_ container: Container, _ registry: TokenRegistry?) throws -> [AuditFinding] {
        let retained = try container.historyStatistics().transactions
        guard retained >= historyLimit else { return [] }
        let deletedThrough = try container.historyDeletedThrough()
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
        guard let oldest = try container.fetchHistory(request).first,
            now.timeIntervalSince(oldest.timestamp) > idleAfter
        else { return [] }
        let holder = try registry.flatMap { r in
            try r.consumers().filter { !$0.isEvicted }.min { ($0.token?.value ?? 0) < ($1.token?.value ?? 0) }
        }
        return [
            AuditFinding(
                risk: "history-piling-up",
                evidence: "\(retained) transactions retained, the oldest from \(ISO8601.string(oldest.timestamp)) "
                    + "(\(days(now.timeIntervalSince(oldest.timestamp)))); deleted through token \(deletedThrough)"
                    + (holder.map { ", held back by consumer \($0.name)" } ?? ""),
                fix: "history grows faster than it is cleaned: run history-cleaner more often, and evict consumers "
                    + "that stopped (history-cleaner --evict-after SECONDS)")
        ]
    }

    // MARK: - Consumers

    /// Consumers idle past `idleAfter`, and consumers evicted that never came back.
    func consumers(_ container: Container, _ registry: TokenRegistry) throws -> [AuditFinding] {
        var findings: [AuditFinding] = []
        let newest = try container.currentToken().value
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
                let behind = try c.token.map { t in
                    t.storeID == container.storeID && t.value <= newest
                        ? "\(try container.historyCount() - container.historyCount(through: t.value)) transactions"
                        : "an unknown number of transactions"
                }
                findings.append(
                    AuditFinding(
                        risk: "consumer-idle",
                        evidence: "consumer \(c.name) last synced \(ISO8601.string(c.updatedAt)) (\(days(idle))), "
                            + "\(behind ?? "never") behind; it holds history back",
                        fix: "run \(c.name), or evict it (history-cleaner --evict-after SECONDS) or remove it "
                            + "(storectl reset-consumer \(c.name))"))
            }
            if c.name == "Mirror", !c.isEvicted, let t = c.token, t.storeID == container.storeID, t.value <= newest {
                let lag = try container.historyCount() - container.historyCount(through: t.value)
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

    // MARK: - WAL

    /// A WAL past `walLimit`, with the readers that keep a checkpoint from shrinking it.
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
                    ? "a checkpoint shrinks it at the next save; if it grows again, look for long reads"
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
        StoreVerifier.verify(container: container, registry: registry, registryProblem: problem).filter { !$0.ok }
            .map { check in
                AuditFinding(
                    risk: "verify-\(check.name)", evidence: check.detail,
                    fix: "storectl verify for the details; storectl recount when kept counts or derived values are "
                        + "out of step (a tool that does not keep them wrote the store)")
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

    /// The statements of an SQL debug log that scanned a whole table, most steps first (at most 10).
    func scans(_ path: String) throws -> [AuditFinding] {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw StoreError(.fileAccess, "cannot read the SQL log \(path): \(error.localizedDescription)")
        }
        var statement: String?
        var scanned: [String: (times: Int, steps: Int, plan: String)] = [:]
        for line in text.split(separator: "\n") {
            guard line.hasPrefix("sharedstore-sql: ") else { continue }
            let body = line.dropFirst("sharedstore-sql: ".count)
            if body.hasPrefix("  scan ("), let sql = statement {
                let steps = Int(body.dropFirst("  scan (".count).prefix { $0.isNumber }) ?? 0
                // The library's own small tables (its metadata, SQLite's schema) are read whole by
                // design; a scan that read no row costs nothing.
                guard steps > 0, !Self.isInternal(sql) else { continue }
                let plan = body.split(separator: ":", maxSplits: 1).last.map(String.init) ?? ""
                let old = scanned[sql] ?? (0, 0, "")
                scanned[sql] = (old.times + 1, max(old.steps, steps), plan.trimmingCharacters(in: .whitespaces))
            } else if let ms = body.range(of: " ms ") {
                statement = String(body[ms.upperBound...])
            }
        }
        return scanned.sorted { $0.value.steps > $1.value.steps }.prefix(10).map { sql, scan in
            AuditFinding(
                risk: "query-scanned",
                evidence: "\(TextSafety.visible(sql)) scanned a table \(scan.times) times (up to \(scan.steps) "
                    + "rows; plan: \(TextSafety.visible(scan.plan)))",
                fix: "declare an index on what it filters or sorts by (Index in the model), or change the query")
        }
    }

    /// Whether `sql` reads only SQLite's schema or the library's own tables (`ss_…`).
    static func isInternal(_ sql: String) -> Bool {
        sql.contains("FROM sqlite_schema") || sql.contains("FROM ss_") || sql.contains("FROM \"ss_")
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
        guard try Container.describeStore(group: inv.group) != nil else {
            throw StoreError(.fileAccess, "no store in \(inv.group)")
        }
        let a = inv.arguments
        var audit = Audit()
        audit.idleAfter = try a.seconds("idle-after", in: 0...(100 * 365 * 86_400)) ?? audit.idleAfter
        audit.historyLimit = try a.integer("history-limit", in: 0...Int(Int32.max)) ?? audit.historyLimit
        audit.walLimit = (try a.integer("wal-limit", in: 0...1_048_576) ?? 64) << 20
        audit.mirrorLag = try a.integer("mirror-lag", in: 0...Int(Int32.max)) ?? audit.mirrorLag
        audit.sqlLog = a.value("sql-log")
        let container = try inv.container()
        var registry: TokenRegistry?
        var problem: String?
        do { registry = try inv.registry() } catch let error as StoreError { problem = error.message }
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
                .verificationFailed, "audit found \(findings.count) risk(s): \(risks.joined(separator: ", "))")
        }
    }
}
