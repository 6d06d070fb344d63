import Foundation
import ReadLater
import SharedStore

/// The flags every command takes that a command which only reads does not: it opens the store at
/// its own model version and writes nothing, so it has nothing to make durable.
let inspecting: Set<String> = ["model-version", "durable"]

extension Targets {
    /// `storectl`: inspect and operate a group directory. Not a consumer: it never syncs.
    public static let storectl = Tool(
        name: "storectl", summary: "inspect and operate a SharedStore group directory",
        commands: [
            Command(
                "history", "the retained history, oldest first",
                options: [
                    .value("after", "TOKEN", "only transactions after this token"),
                    .value("author", "A", "only this author's transactions"),
                    .value("exclude-author", "A", "skip this author's transactions"),
                    .value("entity", "E", "only changes of this entity"),
                    .value("limit", "N", "at most N transactions"),
                ], notTaking: inspecting),
            Command(
                "tokens", "every consumer's token, when it last synced and how far behind it is",
                notTaking: inspecting),
            Command("stats", "objects, transactions, changes and file sizes", notTaking: inspecting),
            Command(
                "verify", "check the invariants that can be checked at rest; exit 0 only when all hold",
                notTaking: inspecting),
            Command(
                "top",
                "a live view of the group directory, redrawn every interval: saves per second by author, each "
                    + "consumer's lag, history, the WAL and its oldest reader, the model, the mirror, the processes "
                    + "holding the store; q or Ctrl-C quits",
                options: [
                    .value("interval", "S", "seconds between samples (default 1)"),
                    .value("count", "N", "stop after N samples"),
                ], notTaking: inspecting),
            Command(
                "audit",
                "look for the risks of a group directory (history never cleaned, idle consumers, a large WAL, files "
                    + "not private, an old model, counts out of step, the mirror); one finding each with its evidence "
                    + "and fix; exit 1 when one is found",
                options: [
                    .value(
                        "idle-after", "S", "a consumer idle, or history kept, this long is a risk (default 7 days)"),
                    .value(
                        "history-limit", "N", "retained transactions from which history is checked (default 100000)"),
                    .value("wal-limit", "MIB", "a WAL larger than this is a risk (default 64)"),
                    .value("mirror-lag", "N", "unpushed transactions past which the mirror lags (default 1000)"),
                    .value("sql-log", "FILE", "an SQL debug log (SHAREDSTORE_SQL_DEBUG=1's stderr): its full scans"),
                ], notTaking: inspecting),
            Command(
                "schema", "the store's model version and schema, one line per entity (nothing is migrated)",
                notTaking: inspecting),
            Command(
                "migrate",
                "bring the store to --model-version (default: the newest); prints the steps, one line each",
                options: [.flag("dry-run", "print the plan without running it")]),
            Command(
                "recount",
                "count kept counts, compute derived attributes again and give objects without one a global id "
                    + "(after a tool that does not keep them wrote the store)"),
            Command(
                "reset-consumer", "remove a consumer from the registry (it reloads in full next time)",
                positionals: ["NAME"], notTaking: ["model-version"]),
            Command(
                "repair-registry",
                "move a damaged tokens.lmdb aside and start an empty registry (every consumer reloads in full)",
                options: [.flag("force", "move the registry aside even when it is healthy")],
                notTaking: ["model-version"]),
            Command(
                "stress",
                "writers, consumers and a cleaner as real processes, killed at random; then every invariant is checked",
                options: [
                    .value("writers", "N", "writer processes (default 4)"),
                    .value("consumers", "N", "consumer processes (default 2)"),
                    .value("seconds", "S", "run this long (default 30)"),
                    .value("saves", "N", "or until the writers acknowledged N saves"),
                    .value("kill-every", "MS", "kill -9 a random process this often (default 1000; 0: never)"),
                    .value("clean-every", "MS", "run history-cleaner this often (default 500; 0: never)"),
                    .value("seed", "N", "the seed of every random choice (printed; replays a run)"),
                    .value(
                        "logs", "DIR",
                        "where the processes log what they saw (default: GROUP/stress-logs, or a temporary directory); "
                            + "outside the group for a power-loss run"),
                    .value("report", "DIR", "write DIR/index.html: the run's charts and violations (HTML and SVG)"),
                    .flag(
                        "resume",
                        "go on with a run whose group and logs exist (after a power loss), then check it; the checks "
                            + "allow the acknowledged saves a power loss may take, unless --durable"),
                ]),
            Command(
                "stress-writer", "(internal) a writer process of stress",
                options: [
                    .value("author", "A", ""), .value("log", "FILE", ""), .value("seed", "N", ""),
                    .value("saves", "N", ""),
                ]),
            Command(
                "stress-consumer", "(internal) a consumer process of stress",
                options: [
                    .value("consumer", "NAME", ""), .value("log", "FILE", ""), .value("view", "FILE", ""),
                ]),
        ]
    ) { inv in
        switch inv.command {
        case "history": try history(inv)
        case "tokens": try tokens(inv)
        case "stats": try stats(inv)
        case "verify": try verify(inv)
        case "audit": try audit(inv)
        case "top": try top(inv)
        case "repair-registry":
            let report = try TokenRegistry.repair(group: inv.group, force: inv.arguments.has("force"))
            if let damage = report.damage {
                inv.warn(
                    (report.moved == nil ? "started a new token registry: " : "moved the token registry aside: ")
                        + damage)
            }
            inv.output.record(
                .object([
                    ("moved", report.moved.map(JSONValue.string) ?? .null),
                    ("consumers_lost", .number(Double(report.consumersLost))),
                ]))
        case "stress": try stress(inv)
        case "stress-writer": try StressWorkers.writer(inv)
        case "stress-consumer": try StressWorkers.consumer(inv)
        case "schema": try schema(inv)
        case "migrate": try migrate(inv)
        case "recount": try recount(inv)
        case "reset-consumer":
            let name = inv.arguments.positionals[0]
            let removed = try inv.registry().remove(name)
            guard removed else { throw StoreError(.invalidArgument, "no consumer named '\(name)' in the registry") }
            inv.output.record(.object([("consumer", .string(name)), ("removed", .bool(true))]))
        default:
            throw UsageError("unknown command '\(inv.command)'")
        }
    }

    /// `storectl recount`: counts kept counts again, computes derived values again and gives
    /// objects without one a global id; prints what it fixed.
    static func recount(_ inv: Invocation) throws {
        // Each step is one pass over the tables in SQL: the line says which runs, of three.
        let progress = Progress("recounting")
        progress.update(text: "derived values (step 1 of 3)")
        let derived = try inv.container().recomputeDerived()
        progress.update(text: "kept counts (step 2 of 3)")
        let fixed = try inv.container().recountKeptCounts()
        progress.update(text: "global ids (step 3 of 3)")
        let identified = try inv.container().assignMissingGlobalIDs()
        progress.finish()
        inv.output.record(
            .object([
                ("recounted", .number(Double(fixed.count))),
                ("global_ids", .number(Double(identified))),
                (
                    "fixed",
                    .array(
                        fixed.map {
                            .object([
                                ("count", .string($0.name)), ("was", $0.was.map { .number(Double($0)) } ?? .null),
                                ("now", .number(Double($0.now))),
                            ])
                        })
                ),
                (
                    "derived",
                    .array(
                        derived.map {
                            .object([("attribute", .string($0.name)), ("objects", .number(Double($0.objects)))])
                        })
                ),
            ]))
    }

    static func history(_ inv: Invocation) throws {
        let container = try inv.inspect().container
        var request = HistoryRequest()
        if let after = inv.arguments.value("after") { request.start = .after(try inv.token(after)) }
        if let author = inv.arguments.value("author") { request.authors = [author] }
        if let excluded = inv.arguments.value("exclude-author") { request.excludedAuthors = [excluded] }
        if let entity = inv.arguments.value("entity") {
            guard container.model.entity(named: entity) != nil else {
                throw UsageError(
                    "--entity: unknown entity '\(entity)' (entities: "
                        + "\(container.model.entities.map(\.name).joined(separator: ", ")))"
                )
            }
            request.entities = [entity]
        }
        request.limit = try inv.arguments.integer("limit", in: 0...Int.max)
        let progress = Progress("reading history")
        var n = 0
        if inv.output.json {
            try container.history(request) { batch in
                for t in batch { inv.output.record(t.json) }
                n += batch.count
                progress.update(n)
            }
        } else {
            var rows: [JSONValue] = []
            try container.history(request) { batch in
                for t in batch {
                    let summary = t.changes.map {
                        "\($0.kind.rawValue) \($0.objectID)"
                            + ($0.updatedProperties.isEmpty ? "" : " {\($0.updatedProperties.joined(separator: ","))}")
                    }
                    rows.append(
                        .object([
                            ("token", .string(t.token.description)),
                            ("author", t.author.map(JSONValue.string) ?? .null),
                            ("context", t.contextName.map(JSONValue.string) ?? .null),
                            ("timestamp", .string(ISO8601.string(t.timestamp))),
                            ("changes", .string(summary.joined(separator: "; "))),
                        ]))
                }
                n += batch.count
                progress.update(n)
            }
            inv.output.table(
                rows,
                columns: [
                    ("token", "TOKEN"), ("author", "AUTHOR"), ("context", "CONTEXT"), ("timestamp", "TIME"),
                    ("changes", "CHANGES"),
                ])
        }
        progress.finish()
    }

    static func tokens(_ inv: Invocation) throws {
        let (container, registry, problem) = try inv.inspect()
        // A registry that cannot be read is an error naming it; none yet is no consumer.
        if let problem { throw StoreError(problem.hasPrefix("cannot read") ? .fileAccess : .registryDamaged, problem) }
        let retained = try container.historyCount()
        let newest = try container.currentToken().value
        let lost = try container.lostTokenRanges()
        let rows = try (registry?.consumers() ?? []).map { c -> JSONValue in
            // The lag in transactions; a consumer that must reload in full has no lag to count.
            let lag: JSONValue
            if c.isEvicted {
                lag = .string("evicted")
            } else if let t = c.token, t.storeID != container.storeID {
                lag = .string("another store")
            } else if let t = c.token, t.value > newest {
                lag = .string("ahead of the store")
            } else if let t = c.token, lost.contains(where: { $0.contains(t.value) }) {
                lag = .string("lost in a restore")
            } else {
                lag = .number(Double(try retained - container.historyCount(through: c.token?.value ?? 0)))
            }
            var fields: [(String, JSONValue)] = [
                ("consumer", .string(c.name)),
                ("token", c.token.map { .string($0.description) } ?? .null),
                ("updated_at", .string(ISO8601.string(c.updatedAt))),
                ("lag", lag),
            ]
            if c.isEvicted { fields.append(("evicted", .bool(true))) }
            return .object(fields)
        }
        inv.output.table(
            rows + pinRows(container),
            columns: [
                ("consumer", "CONSUMER"), ("token", "TOKEN"), ("updated_at", "UPDATED"), ("lag", "LAG"),
                ("evicted", "EVICTED"),
            ])
    }

    /// The read transactions other processes hold open (a pinned context, a long read): each
    /// keeps the WAL from being checkpointed past its snapshot. One row each, after the consumers,
    /// named `pin pid <pid> (<executable>)`, with how many WAL frames were written since.
    static func pinRows(_ container: Container) -> [JSONValue] {
        WALReaders.of(storePath: container.storePath).map { r in
            let name = "pin pid \(r.pid) (\(WALReaders.executable(of: r.pid).map(TextSafety.visible) ?? "?"))"
            return .object([
                ("consumer", .string(name)), ("token", .null), ("updated_at", .null),
                ("lag", .string("\(r.walFrames &- min(r.frame, r.walFrames)) WAL frames")), ("pin", .bool(true)),
                ("pid", .number(Double(r.pid))), ("wal_frame", .number(Double(r.frame))),
            ])
        }
    }

    /// `storectl schema`: one line per entity, each with the store's model version.
    static func schema(_ inv: Invocation) throws {
        guard let d = try Container.describeStore(group: inv.group) else {
            throw StoreError(.fileAccess, "no store in \(inv.group)")
        }
        inv.output.table(
            d.schema.entities.map { e in
                .object([
                    ("version", .number(Double(d.version))), ("entity", .string(e.name)),
                    (
                        "attributes",
                        .array(e.attributes.map { .string("\($0.name) \($0.type.rawValue)\($0.optional ? "?" : "")") })
                    ),
                    (
                        "relationships",
                        .array(
                            e.relationships.map {
                                .string(
                                    "\($0.name) \($0.toMany ? "to-many" : "to-one") \($0.destination).\($0.inverse)")
                            })
                    ),
                    ("unique", .array(e.uniquenessConstraints.map { .string($0.joined(separator: ",")) })),
                    ("indexes", .array(e.indexes.map { .string($0.map(\.text).joined(separator: ",")) })),
                    ("counts", .array(e.keptCounts.keys.sorted().map(JSONValue.string))),
                ])
            },
            columns: [
                ("version", "VERSION"), ("entity", "ENTITY"), ("attributes", "ATTRIBUTES"),
                ("relationships", "RELATIONSHIPS"), ("unique", "UNIQUE"), ("indexes", "INDEXES"),
            ])
    }

    /// `storectl migrate [--dry-run]`: the plan's steps, then what happened.
    static func migrate(_ inv: Invocation) throws {
        let model = try inv.model()
        guard let plan = try Container.migrationPlan(group: inv.group, model: model) else {
            let version = try Container.describeStore(group: inv.group)?.version
            inv.output.record(
                .object([("migrated", .bool(false)), ("version", version.map { .number(Double($0)) } ?? .null)]))
            return
        }
        if plan.isRefused || inv.arguments.has("dry-run") {
            for step in plan.steps { inv.output.record(.object([("step", .string(step))])) }
            for reason in plan.refusals { inv.output.record(.object([("refused", .string(reason))])) }
        }
        if plan.isRefused {
            throw StoreError(
                .migrationRefused,
                "migration from model \(plan.fromVersion) to \(plan.toVersion) refused; nothing was touched")
        }
        if inv.arguments.has("dry-run") { return }
        let container = try inv.container()
        // Another process may have migrated the store between the plan and the open: the steps
        // are printed only when this process ran them (its migration's transaction says so).
        let current = try container.currentToken()
        // Not from inside a range of lost numbers (a reboot records one): that is "expired".
        let lostEnd =
            try container.lostTokenRanges().last { $0.upperBound < current.value }.map { $0.upperBound + 1 } ?? 0
        let recent = HistoryToken(storeID: container.storeID, value: max(0, current.value - 64, lostEnd))
        let last = (try? container.fetchHistory(HistoryRequest(after: recent)))?.last { $0.author == "Migration" }
        let ranHere = last?.processID == Int64(getpid())
        if ranHere { for step in plan.steps { inv.output.record(.object([("step", .string(step))])) } }
        inv.output.record(
            .object(
                [
                    ("migrated", .bool(ranHere)), ("from", .number(Double(plan.fromVersion))),
                    ("to", .number(Double(plan.toVersion))),
                    ("token", .string(current.description)),
                ] + (ranHere ? [] : [("by", .string("another process, at the same time"))])))
    }

    static func stats(_ inv: Invocation) throws {
        let container = try inv.inspect().container
        let context = container.newContext()
        let objects = try container.model.entities.map { e in
            (e.name, JSONValue.number(Double(try context.count(FetchRequest(e.name)))))
        }
        let history = try container.historyStatistics()
        let sizes = container.fileSizes()
        // The derived Category.articleCount (model version 3 on), by category name.
        let counts = try ReadLater.articleCounts(context)?.map { ($0.0, JSONValue.number(Double($0.1))) }
        var pairs: [(String, JSONValue)] = [
            ("objects", .object(objects)),
            ("transactions", .number(Double(history.transactions))),
            ("changes", .number(Double(history.changes))),
            (
                "bytes",
                .object([
                    ("store", .number(Double(sizes.store))), ("wal", .number(Double(sizes.wal))),
                    ("tokens", .number(Double(sizes.tokens))),
                ])
            ),
        ]
        if let counts { pairs.append(("articleCount", .object(counts))) }
        if inv.output.json {
            inv.output.record(.object(pairs))
        } else {
            inv.output.record(
                .object(
                    objects.map { ("objects.\($0.0)", $0.1) } + [
                        ("transactions", .number(Double(history.transactions))),
                        ("changes", .number(Double(history.changes))),
                        ("bytes.store", .number(Double(sizes.store))), ("bytes.wal", .number(Double(sizes.wal))),
                        ("bytes.tokens", .number(Double(sizes.tokens))),
                    ] + (counts ?? []).map { ("articleCount.\($0.0)", $0.1) }))
        }
    }

    static func verify(_ inv: Invocation) throws {
        let (container, registry, problem) = try inv.inspect()
        let progress = PhaseProgress("verifying")
        let done = Protected(0)
        let tell: @Sendable (String) -> Void = { name in
            let n = done.withLock { n in
                defer { n += 1 }
                return n
            }
            progress.update("\(n) checks done, \(name)")
        }
        // No registry file: none was made yet (no target that reads ran), or one that held
        // consumers was deleted, which the verifier names.
        let checks =
            registry == nil && problem == nil
            ? StoreVerifier.verifyWithoutRegistry(container: container, progress: tell)
            : StoreVerifier.verify(container: container, registry: registry, registryProblem: problem, progress: tell)
        progress.finish()
        inv.output.table(
            checks.map {
                .object([("check", .string($0.name)), ("ok", .bool($0.ok)), ("detail", .string($0.detail))])
            },
            columns: [("check", "CHECK"), ("ok", "OK"), ("detail", "DETAIL")])
        // The table cuts a long detail: each failed check's whole detail follows it.
        if !inv.output.json {
            for check in checks where !check.ok {
                inv.output.line("\(check.name): \(TextSafety.visible(check.detail))")
            }
        }
        let failed = checks.filter { !$0.ok }.map(\.name)
        if !failed.isEmpty { throw StoreError(.verificationFailed, "verify failed: \(failed.joined(separator: ", "))") }
    }

    /// The settings of `storectl stress`, from its arguments.
    static func stressConfig(_ inv: Invocation) throws -> Stress.Config {
        var config = Stress.Config()
        let a = inv.arguments
        config.writers = try a.integer("writers", in: 1...64) ?? config.writers
        config.consumers = try a.integer("consumers", in: 0...16) ?? config.consumers
        if a.value("seconds") != nil && a.value("saves") != nil {
            throw UsageError("give --seconds or --saves, not both")
        }
        config.saves = try a.integer("saves", in: 1...100_000_000)
        config.seconds = try a.seconds("seconds", in: 1...86_400) ?? (config.saves == nil ? 30 : nil)
        config.killEvery =
            try a.integer("kill-every", in: 0...3_600_000).map { $0 == 0 ? nil : Double($0) / 1000 } ?? 1.0
        config.cleanEvery =
            try a.integer("clean-every", in: 0...3_600_000).map { $0 == 0 ? nil : Double($0) / 1000 } ?? 0.5
        config.seed = UInt64(try a.integer("seed", in: 0...Int.max) ?? Int.random(in: 1...999_999))
        config.resume = a.has("resume")
        config.durable = inv.durable
        config.report = a.value("report")
        return config
    }

    static func stress(_ inv: Invocation) throws {
        let config = try stressConfig(inv)
        let a = inv.arguments
        // A fresh group: the given one must hold no store yet; by default a temporary one.
        let explicit = a.value("group")
        let work: String
        let group: String
        if let explicit {
            let holdsStore = FileManager.default.fileExists(
                atPath: (explicit as NSString).appendingPathComponent(Container.storeFileName))
            if holdsStore, !config.resume {
                throw StoreError(
                    .invalidArgument, "stress needs an empty group directory; \(explicit) already holds a store")
            }
            if !holdsStore, config.resume {
                throw StoreError(.invalidArgument, "--resume needs the group of a run; \(explicit) holds no store")
            }
            group = explicit
            work = a.value("logs") ?? (explicit as NSString).appendingPathComponent("stress-logs")
        } else {
            if config.resume { throw UsageError("--resume needs --group and --logs of the run to go on with") }
            work =
                FileManager.default.temporaryDirectory.appendingPathComponent("sharedstore-stress-\(UUID().uuidString)")
                .path
            group = work + "/group"
        }
        let logs = explicit == nil ? work + "/logs" : work
        try FileManager.default.createDirectory(
            atPath: logs, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var stress = Stress(config: config, group: group, logs: logs)
        let banner =
            "stress: seed \(config.seed), \(config.writers) writers, \(config.consumers) consumers, "
            + "group \(group)\n"
        FileHandle.standardError.write(Data(banner.utf8))
        let summary = try stress.run()
        inv.output.record(summary)
        if !stress.violations.isEmpty {
            throw StoreError(
                .verificationFailed,
                "stress found \(stress.violations.count) violation(s); replay with --seed \(config.seed); logs "
                    + "in \(logs)"
            )
        }
        if explicit == nil { try? FileManager.default.removeItem(atPath: work) }
    }
}
