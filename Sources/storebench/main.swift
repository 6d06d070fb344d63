import ArgumentParsing
import CSQLite
import Foundation
import SharedStore

// storebench: SharedStore against raw SQLite in the same run. See Scripts/bench.sh.
//   storebench [--quick] [--json] [--rounds N] [--cases a,b,…] [--reads-kept N]

var settings = Settings()
var json = false
var only: Set<String>?

func usage(_ message: String) -> Never {
    let usage = "usage: storebench [--quick|--smoke] [--json] [--rounds N] [--cases a,b] [--reads-kept N]"
    FileHandle.standardError.write(Data("error: \(message)\n\(usage)\n".utf8))
    exit(2)
}

/// `storebench --child MODE …`: a process of a cross-process case (see Processes.swift).
let childParser = CommandLineParser(
    tool: "storebench --child", summary: "a child process of a case",
    commands: [
        Command("latency-consumer", "follow the store, print each merge", positionals: ["GROUP", "COUNT"]),
        Command("writer", "save until the end time", positionals: ["GROUP", "SECONDS", "START", "AUTHOR"]),
        Command("catch-up", "merge everything, print the peak memory", positionals: ["GROUP"]),
        Command("live-query", "follow a live query, print each delivery", positionals: ["GROUP", "COUNT"]),
        Command("switch-workload", "the debug-switches workload", positionals: ["GROUP", "COUNT"]),
    ])
let benchParser = CommandLineParser(
    tool: "storebench", summary: "SharedStore against raw SQLite in the same run",
    commands: [
        Command(
            "", "run the cases",
            options: [
                .flag("quick", "about a minute"), .flag("smoke", "a few hundred operations"),
                .flag("json", "JSON lines"),
                .value("rounds", "N", "rounds per case (1 to 100)"),
                .value("cases", "a,b", "only these cases (or prefixes)"),
                .value("reads-kept", "N", "maximumReadsKept of the read cases' contexts (default: every read)"),
                .flag("help", "show this help"),
            ])
    ])

/// `storebench --child MODE …`: runs one child process of a cross-process case, then exits.
@MainActor func runChild(_ words: [String]) -> Never {
    do {
        guard case .run(let child) = try childParser.parse(Array(words.dropFirst())) else { exit(0) }
        let p = child.positionals
        switch child.command.name {
        case "latency-consumer": try latencyConsumer(group: p[0], count: Int64(p[1]) ?? 0)
        case "writer": try writerChild(group: p[0], seconds: Double(p[1]) ?? 1, start: Double(p[2]) ?? 0, author: p[3])
        case "live-query": try liveQueryChild(group: p[0], count: Int64(p[1]) ?? 0)
        case "switch-workload": try switchWorkloadChild(group: p[0], count: Int(p[1]) ?? 0)
        default: try catchUpChild(group: p[0])
        }
        exit(0)
    } catch let error as UsageError {
        usage(error.message)
    } catch {
        FileHandle.standardError.write(Data("error: \(error)\n".utf8))
        exit(1)
    }
}

/// Reads the command line into `settings`, `json` and `only` (or prints the help and exits).
@MainActor func parseOptions(_ words: [String]) {
    do {
        switch try benchParser.parse(words) {
        case .help(let command):
            print(benchParser.help(command), terminator: "")
            exit(0)
        case .run(let a):
            if a.has("quick") {
                settings.size = .quick
                settings.rounds = 3
            }
            if a.has("smoke") {
                settings.size = .smoke
                settings.rounds = 1
            }
            json = a.has("json")
            settings.rounds = try a.integer("rounds", in: 1...100) ?? settings.rounds
            settings.readsKept = try a.integer("reads-kept", in: 1...Int.max) ?? settings.readsKept
            only = a.value("cases").map { Set($0.split(separator: ",").map(String.init)) }
        }
    } catch {
        usage("\(error)")
    }
}

@MainActor func want(_ name: String) -> Bool {
    let wanted = only.map { $0.contains(name) || $0.contains(where: { name.hasPrefix($0) }) } ?? true
    if wanted { benchProgress.starting(name) }
    return wanted
}

/// The case running now and how far the run is, on stderr when it is a terminal (nothing
/// otherwise: a run piped into a file, as `Scripts/bench.sh` tees it, stays as it was).
let benchProgress = BenchProgress()

@MainActor final class BenchProgress {
    private let tty = isatty(2) == 1
    private let start = Date()
    private(set) var done = 0
    /// A case starts (the line shows it until the next).
    func starting(_ name: String) {
        guard tty else { return }
        let elapsed = Int(Date().timeIntervalSince(start))
        let line = "\r\u{1B}[2Kstorebench: \(done) cases done, running \(name) (\(elapsed / 60)m\(elapsed % 60)s)"
        FileHandle.standardError.write(Data(line.utf8))
    }
    /// A case ended (its line follows on stdout).
    func finished() {
        done += 1
        if tty { FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8)) }
    }
}

@MainActor func show(_ r: Report) {
    benchProgress.finished()
    if json {
        emitLine(r)
        return
    }
    guard case .object(let pairs) = r else { return }
    let name = pairs.first { $0.0 == "case" }.map { "\($0.1)".isEmpty ? "" : $0.1.serialized } ?? ""
    let rest = pairs.filter { $0.0 != "case" }.map { "\($0.0)=\($0.1.serialized)" }.joined(separator: " ")
    print("\(name.replacingOccurrences(of: "\"", with: "").padding(toLength: 18, withPad: " ", startingAt: 0)) \(rest)")
}

/// The meta line, then the cases of one process: saves, batches, history.
@MainActor func runStoreCases() throws {
    show(
        .object([
            ("case", .string("meta")), ("sqlite", .string(sqliteVersion())),
            ("pragmas", .string("journal_mode=WAL synchronous=NORMAL")), ("size", .string("\(settings.size)")),
            ("rounds", .number(Double(settings.rounds))),
            ("cores", .number(Double(ProcessInfo.processInfo.activeProcessorCount))),
            ("postgres", .string(postgresDescription())),
            // The code measured, as Scripts/bench.sh names it (a commit, "+changes" when Sources
            // differed from it): a report says what it reports on.
            ("code", .string(ProcessInfo.processInfo.environment["SHAREDSTORE_BENCH_CODE"] ?? "not named")),
        ]))
    if want("save-history") { show(try saveCase(settings, history: true)) }
    if want("save-no-history") { show(try saveCase(settings, history: false)) }
    if want("save-history-durable") { show(try saveCase(settings, history: true, durable: true)) }
    if want("batch-insert") { show(try batchCase(settings)) }
    if want("batch-insert-full-model") { show(try batchInsertFullModelCase(settings)) }
    if want("update-property") { show(try updateCase(settings)) }
    if want("batch-insert-typed") { show(try batchInsertTypedCase(settings)) }
    if want("batch-closure-typed") { show(try batchClosureTypedCase(settings)) }
    if want("debug-switches") { show(try debugSwitchesCase(settings)) }
    if want("history-fetch-1k") { show(try historyFetchCase(settings, retained: 1000, name: "history-fetch-1k")) }
    if want("history-fetch-1m") {
        show(try historyFetchCase(settings, retained: settings.bigHistory, name: "history-fetch-1m"))
    }
}

/// The cases that follow, read at scale, mirror, clean and write from many processes.
@MainActor func runProcessCases() throws {
    if want("latency") { show(try latencyCase(settings)) }
    if want("query-indexed") { show(try queryIndexedCase(settings)) }
    if want("query-range") || want("query-prefix") || want("record-fetch") || want("query-range-typed") {
        for report in try articleQueryCases(settings, only: want) { show(report) }
    }
    if want("live-query-latency") { show(try liveQueryLatencyCase(settings)) }
    if want("share-batch-1m") || want("list-1m") || want("widget-show-1m") {
        for report in try targetsCase(settings) { show(report) }
    }
    if want("share-batch-1m-categories") { show(try shareBatchCategoriesCase(settings)) }
    if want("migrate-add-attribute-1m") { show(try migrateCase(settings)) }
    // Any mirror case asked for (by its name, or by a prefix of it) needs the server.
    let serverCases = [
        "mirror-latency", "mirror-throughput", "mirror-space-throughput", "mirror-bootstrap-1m", "mirror-spaces-server",
        "save-history-mirrored",
    ]
    let mirrorCases = only?.contains { asked in serverCases.contains { $0.hasPrefix(asked) } }
    if mirrorCases ?? true {
        if let reason = mirrorSkipReason() {
            show(.object([("case", .string("mirror")), ("skipped", .string(reason))]))
        } else {
            if want("mirror-latency") { show(try mirrorLatencyCase(settings)) }
            if want("mirror-throughput") { show(try mirrorThroughputCase(settings)) }
            if want("mirror-space-throughput") { show(try mirrorSpaceThroughputCase(settings)) }
            if want("mirror-bootstrap-1m") { show(try mirrorBootstrapCase(settings)) }
            if want("mirror-spaces-server") { show(try mirrorSpacesServerCase(settings)) }
            if want("save-history-mirrored") { for r in try saveFollowedCases(settings) { show(r) } }
        }
    }
    if want("save-history-top") { show(try saveTopCase(settings)) }
    if want("token-advance") { show(try tokenAdvanceCase(settings)) }
    if want("cleaner") { show(try cleanerCase(settings)) }
    if want("catch-up-memory") { show(try catchUpCase(settings)) }
    if want("writers") { for r in try writersCases(settings) { show(r) } }
}

// SQLite configured as SharedStore configures it (no memory statistics), before anything opens
// a database: the C baselines and SharedStore run on the same library settings.
_ = sharedstore_sqlite_no_memory_statistics()
let words = Array(CommandLine.arguments.dropFirst())
if words.first == "--child" { runChild(words) }
parseOptions(words)
do {
    try runStoreCases()
    try runProcessCases()
} catch {
    FileHandle.standardError.write(Data("error: \(error)\n".utf8))
    exit(1)
}
