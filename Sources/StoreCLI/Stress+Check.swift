import Foundation
import ReadLater
import SharedStore

extension Stress {
    /// One transaction as some process saw it.
    struct Seen: Equatable {
        let author: String?
        let changes: [Change]
        struct Change: Equatable {
            let id: String
            let kind: String
            let updated: [String]
        }
    }

    /// Checks DESIGN.md's invariants against the store, the registry and every process's log.
    mutating func check(container: Container, registry: TokenRegistry, writers: Int, consumers: Int) throws -> [(
        String, JSONValue
    )] {
        var checker = StressChecker(
            container: container, logs: logs, current: try container.currentToken().value,
            lost: config.resume ? try container.lostTokenRanges() : [], lossAllowed: config.resume && !config.durable)
        try checker.collectRetainedHistory()
        for i in 0..<consumers { try checker.checkConsumer(i) }
        checker.checkNoGap()
        for i in 0..<writers { checker.collectAcknowledgements(writer: i) }
        checker.collectTargetAcknowledgements()
        try checker.checkAcknowledgedSaves()
        let cleared = try checker.checkAtRest(registry)
        violations += checker.violations
        let deleted = Self.lines("\(logs)/cleaner.jsonl").reduce(0) { $0 + Int($1["deleted"] as? Double ?? 0) }
        return [
            ("transactions", .number(Double(checker.current))),
            ("delivered_or_retained", .number(Double(checker.all.count))),
            ("acknowledged_objects", .number(Double(checker.acks.count))),
            ("checked_in_store", .number(Double(checker.checkedInStore))),
            ("history_deleted", .number(Double(deleted))), ("retained", .number(Double(try container.historyCount()))),
            ("expired", .number(Double(checker.expiredCount))),
            ("stale_reader_slots_cleared", .number(Double(cleared))),
            ("lost_token_ranges", .array(checker.lost.map { .string("\($0.lowerBound)-\($0.upperBound)") })),
            ("acknowledged_lost", .number(Double(checker.lostAcknowledged))),
            ("acknowledged_lost_per_range", .array(checker.lostAcknowledgedByRange.map { .number(Double($0)) })),
            ("target_acknowledged", .number(Double(checker.targetAcknowledged))),
        ]
    }
}

/// The checks of a stress run, one invariant at a time, over what every process logged.
struct StressChecker {
    let container: Container
    let logs: String
    /// The store's newest token.
    let current: Int64
    /// Every transaction, as retained history or as some consumer received it.
    private(set) var all: [Int64: Stress.Seen] = [:]
    private(set) var violations: [String] = []
    private(set) var expiredCount = 0
    private(set) var acks: [Ack] = []
    private(set) var checkedInStore = 0
    /// Every token a writer acknowledged.
    private var acknowledged = Set<Int64>()
    /// Token numbers the store recorded as lost (a power loss took their transactions), and
    /// whether losing acknowledged saves there is allowed (the default mode) or not (durable).
    let lost: [ClosedRange<Int64>]
    let lossAllowed: Bool
    /// Acknowledged saves a power loss took (allowed only as a suffix, in the default mode), in
    /// all and per lost range.
    private(set) var lostAcknowledged = 0
    private(set) var lostAcknowledgedByRange: [Int] = []
    private(set) var targetAcknowledged = 0

    /// One object of a save a writer acknowledged.
    struct Ack {
        let token: Int64
        let id: String
        let kind: String
        let values: [String: Any]
    }

    init(container: Container, logs: String, current: Int64, lost: [ClosedRange<Int64>] = [], lossAllowed: Bool = false)
    {
        self.container = container
        self.logs = logs
        self.current = current
        self.lost = lost
        self.lossAllowed = lossAllowed
        self.lostAcknowledgedByRange = lost.map { _ in 0 }
    }

    func isLost(_ token: Int64) -> Bool { lost.contains { $0.contains(token) } }

    /// A transaction as a log line of the `storectl history` shape tells it.
    static func seen(_ line: [String: Any]) -> Stress.Seen {
        let changes = (line["changes"] as? [[String: Any]] ?? []).map {
            Stress.Seen.Change(
                id: $0["id"] as? String ?? "", kind: $0["type"] as? String ?? "",
                updated: $0["updated"] as? [String] ?? [])
        }
        return Stress.Seen(author: line["author"] as? String, changes: changes)
    }

    private mutating func countLost(_ token: Int64) {
        lostAcknowledged += 1
        if let i = lost.firstIndex(where: { $0.contains(token) }) { lostAcknowledgedByRange[i] += 1 }
    }

    private mutating func add(_ token: Int64, _ seen: Stress.Seen, from source: String) {
        // A transaction a consumer merged before a power loss took it: it names nothing now.
        if isLost(token) { return }
        if let known = all[token], known != seen {
            violations.append("transaction \(token) differs between logs (\(source))")
        }
        all[token] = seen
    }

    mutating func collectRetainedHistory() throws {
        // What `--resume` found retained when it started (see `keepRetainedHistory`).
        let kept = (try? FileManager.default.contentsOfDirectory(atPath: logs)) ?? []
        for name in kept.sorted() where name.hasPrefix("retained-") && name.hasSuffix(".jsonl") {
            Stress.forEachLine("\(logs)/\(name)") { text in
                guard let line = Stress.parse(text), let t = line["token"] as? String,
                    let token = Int64(t.split(separator: ".").first ?? "")
                else { return }
                add(token, Self.seen(line), from: name)
            }
        }
        for t in try container.fetchHistory(HistoryRequest()) {
            add(
                t.token.value,
                Stress.Seen(
                    author: t.author,
                    changes: t.changes.map {
                        .init(id: $0.objectID.description, kind: $0.kind.rawValue, updated: $0.updatedProperties)
                    }), from: "retained history")
        }
    }

    // MARK: - Consumers

    /// Every run of consumer `i` delivers exactly the tokens after where it started, in order,
    /// and the view of its last run equals a fresh fetch.
    mutating func checkConsumer(_ i: Int) throws {
        // One run at a time, streamed: a soak's consumer logs run to millions of lines.
        var run: [[String: Any]] = []
        var number = 0
        Stress.forEachLine("\(logs)/consumer\(i).jsonl") { text in
            guard let line = Stress.parse(text) else { return }
            if line.keys.contains("start"), !run.isEmpty {
                number += 1
                checkRun(run, consumer: i, number: number)
                run.removeAll(keepingCapacity: true)
            }
            run.append(line)
        }
        if !run.isEmpty { checkRun(run, consumer: i, number: number + 1) }
        let view =
            (try? String(contentsOfFile: "\(logs)/consumer\(i).view", encoding: .utf8))?.split(separator: "\n").map(
                String.init) ?? []
        let context = container.newContext()
        let fresh = try container.model.entities.flatMap { try context.fetch(FetchRequest($0.name)) }
            .sorted { $0.id < $1.id }.map { "\($0.id)@\($0.version)" }
        if view != fresh {
            violations.append(
                "consumer\(i)'s view (\(view.count) objects) differs from a fresh fetch (\(fresh.count) objects)")
        }
    }

    private mutating func checkRun(_ run: [[String: Any]], consumer i: Int, number r: Int) {
        var received: [Int64] = []
        var base = (run.first?["start"] as? Double).map(Int64.init)
        var final: Int64?
        for line in run {
            if let t = line["token"] as? String {
                let token = Int64(t.split(separator: ".").first ?? "") ?? -1
                received.append(token)
                add(token, Self.seen(line), from: "consumer\(i)")
            } else if let e = line["expired"] as? Double {
                expiredCount += 1
                if let from = base, isLost(from) || from > current {
                    // Its position named a transaction a power loss took: it reloaded at `e`.
                    base = Int64(e)
                    received.removeAll()
                } else {
                    violations.append(
                        "consumer\(i) run \(r) got 'history expired' at \(Int64(e)): history it had not merged was "
                            + "deleted")
                }
            } else if let reloaded = line["reloaded"] as? Double, base == nil {
                base = Int64(reloaded)
            } else if let f = line["final"] as? Double {
                final = Int64(f)
            }
        }
        guard let from = base else { return }  // killed before its first sync
        // What it merged before a power loss took it is not compared: it names nothing now.
        received.removeAll(where: isLost)
        if let last = received.last {
            let expected = last > from ? ((from + 1)...last).filter { !isLost($0) } : []
            if received != expected {
                let missing = Set(expected).subtracting(received).sorted().prefix(5)
                violations.append(
                    "consumer\(i) run \(r) from \(from): received \(received.count) tokens, expected \(expected.count) "
                        + "(missing \(Array(missing)), duplicates \(received.count - Set(received).count))")
            }
        }
        if let final, final != current || (received.last ?? from) != current {
            violations.append(
                "consumer\(i) ended at \(received.last ?? from), final sync at \(final), store at \(current)")
        }
    }

    /// Every committed transaction was seen by a consumer or is still retained.
    mutating func checkNoGap() {
        guard current > 0 else { return }
        // The transaction that marks a loss (no changes) comes before the consumers reload: it
        // reaches no log once cleaned.
        let marks = Set(lost.map { $0.upperBound + 1 })
        let missing = (1...current).filter { all[$0] == nil && !isLost($0) && !marks.contains($0) }
        if !missing.isEmpty {
            violations.append(
                "\(missing.count) transactions were neither delivered nor retained, e.g. \(Array(missing.prefix(5)))")
        }
    }

    // MARK: - Writers

    /// One transaction per acknowledged save of writer `i`, with its author and objects, in order.
    mutating func collectAcknowledgements(writer i: Int) {
        var last: Int64 = 0
        for line in Stress.lines("\(logs)/writer\(i).jsonl") {
            let token = Int64(line["token"] as? Double ?? 0)
            if token <= last { violations.append("writer\(i): token \(token) after \(last), not in commit order") }
            last = token
            if !acknowledged.insert(token).inserted { violations.append("token \(token) acknowledged twice") }
            if isLost(token) {
                countLost(token)
                if !lossAllowed {
                    violations.append("writer\(i)'s acknowledged save \(token) was lost in a durable run")
                }
                continue
            }
            guard let tx = all[token] else {
                violations.append("writer\(i)'s acknowledged save \(token) is lost")
                continue
            }
            if tx.author != "Writer\(i)" {
                violations.append("transaction \(token) has author \(tx.author ?? "nil"), writer\(i) acknowledged it")
            }
            for o in line["objects"] as? [[String: Any]] ?? [] {
                let id = o["id"] as? String ?? ""
                let kind = o["kind"] as? String ?? ""
                guard let change = tx.changes.first(where: { $0.id == id && $0.kind == kind }) else {
                    violations.append("transaction \(token) lacks the \(kind) of \(id) writer\(i) acknowledged")
                    continue
                }
                var values = o["values"] as? [String: Any] ?? [:]
                if kind == "update" { values = values.filter { change.updated.contains($0.key) } }
                acks.append(Ack(token: token, id: id, kind: kind, values: values))
            }
        }
    }

    /// The saves of target processes a power-loss run made beside the stress writers
    /// (`targets.jsonl` in the logs: `{"token","author"}` per acknowledged save): each is in the
    /// store's history as its author's, or was lost with a power loss the mode allows.
    mutating func collectTargetAcknowledgements() {
        for line in Stress.lines("\(logs)/targets.jsonl") {
            guard let text = line["token"] as? String, let token = Int64(text.split(separator: ".").first ?? "")
            else { continue }
            targetAcknowledged += 1
            if isLost(token) {
                countLost(token)
                if !lossAllowed { violations.append("target save \(token) was lost in a durable run") }
                continue
            }
            guard let tx = all[token] else {
                violations.append("\(line["author"] as? String ?? "a target")'s acknowledged save \(token) is lost")
                continue
            }
            if tx.author != line["author"] as? String {
                violations.append(
                    "transaction \(token) has author \(tx.author ?? "nil"), \(line["author"] ?? "?") acknowledged it")
            }
        }
    }

    /// Every acknowledged save is in the store, or a later transaction touched the object.
    mutating func checkAcknowledgedSaves() throws {
        var touched: [String: Int64] = [:]
        for (token, seen) in all { for c in seen.changes { touched[c.id] = max(touched[c.id] ?? 0, token) } }
        let stored = Dictionary(
            uniqueKeysWithValues: try container.newContext().fetch(FetchRequest("Article")).map {
                ($0.id.description, $0)
            })
        for ack in acks where (touched[ack.id] ?? 0) <= ack.token {
            checkedInStore += 1
            let object = stored[ack.id]
            if ack.kind == "delete" {
                if object != nil { violations.append("\(ack.id) was deleted at \(ack.token) but is in the store") }
                continue
            }
            guard let object else {
                violations.append("\(ack.id) saved at \(ack.token) is missing from the store")
                continue
            }
            for (name, value) in ack.values {
                let actual = object[name]
                let same: Bool
                switch value {
                case let s as String: same = actual == .string(s)
                case let b as Bool: same = actual == .bool(b)
                default: same = true
                }
                if !same {
                    violations.append(
                        "\(ack.id).\(name) is \(actual) in the store, \(value) was acknowledged at \(ack.token)")
                }
            }
        }
    }

    // MARK: - At rest

    /// verify, stale reader slots, the registry's write lock. Returns the reader slots cleared.
    mutating func checkAtRest(_ registry: TokenRegistry) throws -> Int {
        for check in StoreVerifier.verify(container: container, registry: registry) where !check.ok {
            violations.append("storectl verify: \(check.name): \(check.detail)")
        }
        let cleared = try registry.clearStaleReaders()
        if try registry.clearStaleReaders() != 0 { violations.append("stale LMDB reader slots remain after clearing") }
        try registry.register("StressProbe")
        try registry.remove("StressProbe")
        return cleared
    }
}
