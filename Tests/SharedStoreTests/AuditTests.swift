import Foundation
import ReadLater
import SharedStore
import SharedStoreSQLite
import Testing

/// Issue 24, point 2: `storectl audit` names what it finds in a group directory, as a process
/// would see it (the scenario `16-audit.sh` plants the rest of the risks).
@Suite(.tags(.multiProcess)) struct AuditTests {
    typealias Article = ReadLater.Records.Article

    /// `storectl audit --json` of `group` with `arguments`: its exit status and findings.
    func audit(_ group: TemporaryGroup, _ arguments: [String] = []) throws -> (Int32, [[String: Any]]) {
        let child = try Child("storectl", ["audit", "--group", group.path, "--json"] + arguments)
        let status = try child.waitForExit()
        let findings = child.lines.compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        return (status, findings)
    }

    @Test func quarantinedMirrorRowsAreARisk() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let context = container.newContext(author: "A")
        try context.insert(Article(title: "a", url: "https://q.example/1"))
        try context.save()
        var (status, findings) = try audit(group)
        #expect(status == 0 && findings.isEmpty, "a healthy group: \(findings)")
        try container.prepareMirroring()
        try container.quarantineMirrorRow(
            MirrorQuarantine(
                sequence: 7, origin: UUID(), token: 3, reason: "Category label is required",
                at: Date().timeIntervalSince1970
            ))
        (status, findings) = try audit(group)
        #expect(status == 1)
        let found = findings.first { $0["risk"] as? String == "mirror-quarantine" }
        #expect((found?["evidence"] as? String)?.contains("1 mirror rows quarantined") == true, "\(findings)")
        #expect((found?["fix"] as? String)?.contains("--retry-quarantined") == true)
    }

    /// A consumer registered under the mirror's name that is far behind is a lagging mirror.
    @Test func aMirrorFarBehindIsARisk() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let registry = try TokenRegistry(group: group.path)
        try registry.register("Mirror")
        try registry.advance("Mirror", to: try container.currentToken())
        let context = container.newContext(author: "A")
        for n in 0..<5 {
            try context.insert(Article(title: "m\(n)", url: "https://m.example/\(n)"))
            try context.save()
        }
        let (status, findings) = try audit(group, ["--mirror-lag", "3"])
        #expect(status == 1)
        let found = findings.first { $0["risk"] as? String == "mirror-behind" }
        #expect((found?["evidence"] as? String)?.contains("5 transactions") == true, "\(findings)")
    }

    /// The cleaner logs each run in the store (when, through which token, the newest then), keeps
    /// the newest 32, and a value another program wrote that does not parse is read as no run;
    /// the audit's rate of growth reads that log.
    @Test func theCleanerLogsItsRunsForTheRateHistoryIsCleanedAt() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let registry = try TokenRegistry(group: group.path)
        try registry.register("Widget")
        let context = container.newContext(author: "A")
        for n in 0..<40 {
            try context.insert(Article(title: "c\(n)", url: "https://c.example/\(n)"))
            try context.save()
            // The widget merges all but the newest n/8 transactions, then the cleaner runs.
            let newest = try container.currentToken()
            try registry.advance(
                "Widget", to: HistoryToken(storeID: newest.storeID, value: newest.value - Int64(n / 8)))
            _ = try HistoryCleaner.clean(container: container, registry: registry)
        }
        let runs = try container.cleanerRuns()
        #expect(runs.count == CleanerRun.kept)
        #expect(runs.last?.newest == (try container.currentToken().value))
        #expect(runs.last?.retained == 4 && runs.first?.retained == 1, "\(runs)")
        #expect(zip(runs, runs.dropFirst()).allSatisfy { $0.time <= $1.time && $0.through <= $1.through })
        var (status, findings) = try audit(group, ["--history-limit", "2"])
        let growing = findings.first { $0["risk"] as? String == "history-growing" }
        #expect(status == 1 && growing != nil, "\(findings)")
        #expect(
            (growing?["evidence"] as? String)?.contains("from 1 to 2 to 3") == true, "\(findings)")
        // Planted values: none parse, or out of order and range; the audit still runs.
        for planted in [
            "garbage", "1 2", "nan 1 2", "5 9 3;4 1 2", "-1 0 0", String(repeating: "1 1 1;", count: 2000),
            "1e400 1 2", "1 -5 2", "3 1 2;1 1 2",
        ] {
            try SQLiteConnection(path: group.storePath, busyTimeoutMilliseconds: 1000).execute(
                "UPDATE ss_meta SET value = '\(planted)' WHERE key = 'cleaner_runs'")
            let read = try container.cleanerRuns()
            #expect(read.count <= 1, "\(planted.prefix(20)): \(read)")
            (status, findings) = try audit(group, ["--history-limit", "2"])
            #expect(status <= 1 && !findings.contains { $0["risk"] as? String == "history-growing" })
        }
    }

    /// Rounds of saves, each followed by the widget merging all but the newest `lag` and a
    /// clean: what each clean leaves is `lag`.
    func rounds(_ container: Container, _ registry: TokenRegistry, lags: [Int64]) throws {
        let context = container.newContext(author: "A")
        for lag in lags {
            for _ in 0..<max(lag, 1) {
                try context.insert(Article(title: "r", url: "https://r.example/\(UUID().uuidString)"))
                try context.save()
            }
            let newest = try container.currentToken()
            try registry.advance("Widget", to: HistoryToken(storeID: newest.storeID, value: newest.value - lag))
            _ = try HistoryCleaner.clean(container: container, registry: registry)
        }
    }

    func growing(_ group: TemporaryGroup, limit: Int = 1) throws -> Bool {
        try audit(group, ["--history-limit", "\(limit)"]).1.contains { $0["risk"] as? String == "history-growing" }
    }

    /// The trend is read over every run kept, not two of them: a backlog cleared before a steady
    /// rise does not hide it; one write between a sync and a clean is no trend; and a run logged
    /// in the future (a clock that was wrong once) neither hides the runs after it nor counts.
    @Test func historyGrowingReadsTheTrendOfEveryRunWhateverTheClockSaid() throws {
        // A weekend's backlog, cleared, then a consumer that stopped merging.
        var group = TemporaryGroup()
        var container = try group.open()
        var registry = try TokenRegistry(group: group.path)
        try registry.register("Widget")
        try rounds(container, registry, lags: [20, 0, 3, 8, 13, 18])
        #expect(try growing(group), "\((try? container.cleanerRuns()) ?? [])")
        // Healthy: now and then one write lands between the sync and the clean.
        group = TemporaryGroup()
        container = try group.open()
        registry = try TokenRegistry(group: group.path)
        try registry.register("Widget")
        try rounds(container, registry, lags: [0, 0, 1, 0, 0, 1, 0, 1])
        #expect(try !growing(group))
        // A run from the future, then real growth: found.
        try SQLiteConnection(path: group.storePath, busyTimeoutMilliseconds: 1000).execute(
            "UPDATE ss_meta SET value = '1900000000.0 3 3' WHERE key = 'cleaner_runs'")
        try rounds(container, registry, lags: [2, 4, 6, 8, 10])
        #expect(try growing(group), "\((try? container.cleanerRuns()) ?? [])")
        // Runs an hour apart, planted: growth that zigzags is growth; a flat history with a small
        // uptick at the end is not.
        func plant(_ retained: [Int]) throws {
            let start = Date().timeIntervalSince1970 - Double(retained.count) * 3600
            let runs = retained.enumerated().map { i, r in
                "\(start + Double(i) * 3600) \(10_000_000 * i) \(10_000_000 * i + r)"
            }
            try SQLiteConnection(path: group.storePath, busyTimeoutMilliseconds: 1000).execute(
                "UPDATE ss_meta SET value = '\(runs.joined(separator: ";"))' WHERE key = 'cleaner_runs'")
        }
        try plant([100, 200, 150, 300, 250, 400, 350, 500, 450, 600, 550, 700])
        #expect(try growing(group, limit: 100))
        try plant(Array(repeating: 0, count: 27) + [1, 2, 3])
        #expect(try !growing(group))
        // A consumer that syncs every eighth run: a saw cleaned down to its floor each time.
        try plant((0..<32).map { ($0 % 8) * 70_000 })
        #expect(try !growing(group, limit: 1))
        // One jump to a level that then holds, one backlog: no trend.
        try plant(Array(repeating: 100, count: 16) + Array(repeating: 5000, count: 16))
        #expect(try !growing(group, limit: 1000))
        try plant([0, 0, 0, 0, 200_000, 200_000])
        #expect(try !growing(group, limit: 1))
        // Growth from a large base, by a fixed amount a run: found.
        try plant((0..<32).map { 1_000_000 + 10_000 * $0 })
        #expect(try growing(group, limit: 100_000))
        try plant([10, 20, 30, 40])
        #expect(try growing(group, limit: 20))
        #expect(try !growing(group, limit: 100))
        // Planted far in the future and alone: no rate from it.
        try SQLiteConnection(path: group.storePath, busyTimeoutMilliseconds: 1000).execute(
            "UPDATE ss_meta SET value = '1e308 1 2;1e10 1 3;1e10 1 4;1e10 1 5;1e10 1 9' WHERE key = 'cleaner_runs'")
        #expect(try !growing(group))
    }

    /// The bytes of every file of `group`, by name.
    func contents(_ group: TemporaryGroup) throws -> [String: Data] {
        var out: [String: Data] = [:]
        // The shared memory of SQLite's WAL index and of LMDB's reader table change with every
        // reader (their locks and read marks): what holds the data is compared.
        for name in try FileManager.default.contentsOfDirectory(atPath: group.path)
        where !name.hasSuffix("-shm") && !name.hasSuffix("-lock") {
            out[name] = FileManager.default.contents(atPath: group.path + "/" + name)
        }
        return out
    }

    /// The review's worst finding: the audit wrote what it audits. A store put back to a backup
    /// (which every other open reconciles), a WAL left by a killed process (which a closing
    /// writer checkpoints), an old model with --model-version (which migrates): after the audit,
    /// every file of the group is as it was.
    @Test func theAuditChangesNothing() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let registry = try TokenRegistry(group: group.path)
        try registry.register("Widget")
        let context = container.newContext(author: "A")
        try context.insert(Article(title: "a", url: "https://w.example/0"))
        try context.save()
        let backup = try Data(contentsOf: URL(fileURLWithPath: group.path + "/Store.sqlite"))
        for n in 1..<4 {
            try context.insert(Article(title: "a\(n)", url: "https://w.example/\(n)"))
            try context.save()
        }
        try backup.write(to: URL(fileURLWithPath: group.path + "/Store.sqlite"))
        let pin = try Child("sharedstore-helper", ["hold-pin", "--group", group.path])
        _ = try pin.waitForLine("the pin") { $0.contains("pinned") }
        pin.kill9()
        _ = try pin.waitForExit()
        let before = try contents(group)
        for arguments in [["--wal-limit", "0"], ["--idle-after", "0"], ["--model-version", "3"]] {
            _ = try audit(group, arguments)
            let after = try contents(group)
            let changed = Set(before.keys).union(after.keys).filter { before[$0] != after[$0] }
            #expect(changed.isEmpty, "after audit \(arguments): \(changed.sorted())")
        }
        let (status, _) = try audit(group, ["--model-version", "3"])
        #expect(status == 2, "--model-version is refused, not a migration")
    }

    /// An SQL log written with CR LF line ends reads as one with LF; a file that is no SQL log,
    /// or cannot be read, is a finding of its own, and the other findings stand.
    @Test func sqlLogsOfAnyShape() throws {
        let group = TemporaryGroup()
        _ = try group.open()
        let line =
            "sharedstore-sql: 0.2 ms SELECT t0.Z_PK FROM \"Article\" AS t0 WHERE t0.\"note\" = ? ORDER BY t0.Z_PK"
        let scan = "sharedstore-sql:   scan (7 full-scan steps): SCAN t0"
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sqllog-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try (line + "\r\n" + scan + "\r\n").write(
            to: dir.appendingPathComponent("crlf.log"), atomically: true, encoding: .utf8)
        try "root:x:0:0\n".write(to: dir.appendingPathComponent("other.log"), atomically: true, encoding: .utf8)
        var (status, findings) = try audit(group, ["--sql-log", dir.appendingPathComponent("crlf.log").path])
        #expect(status == 1 && findings.map { $0["risk"] as? String } == ["query-scanned"], "\(findings)")
        (status, findings) = try audit(group, ["--sql-log", dir.appendingPathComponent("other.log").path])
        #expect(findings.map { $0["risk"] as? String } == ["sql-log-empty"], "\(findings)")
        (status, findings) = try audit(group, ["--sql-log", dir.path])
        #expect(findings.map { $0["risk"] as? String } == ["sql-log-unreadable"], "\(findings)")
    }
}
