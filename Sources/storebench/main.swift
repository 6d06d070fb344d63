import Foundation
import SharedStore

// storebench: SharedStore against raw SQLite in the same run. See Scripts/bench.sh.
//   storebench [--quick] [--json] [--rounds N] [--cases a,b,…]

var settings = Settings()
var json = false
var only: Set<String>?
var args = Array(CommandLine.arguments.dropFirst())

func usage(_ message: String) -> Never {
    FileHandle.standardError.write(Data("error: \(message)\nusage: storebench [--quick|--smoke] [--json] [--rounds N] [--cases a,b]\n".utf8))
    exit(2)
}

if args.first == "--child" {
    do {
        switch args.dropFirst().first {
        case "latency-consumer": try latencyConsumer(group: args[2], count: Int64(args[3]) ?? 0)
        case "writer": try writerChild(group: args[2], seconds: Double(args[3]) ?? 1, start: Double(args[4]) ?? 0, author: args[5])
        case "catch-up": try catchUpChild(group: args[2])
        default: usage("unknown child mode")
        }
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("error: \(error)\n".utf8))
        exit(1)
    }
}

while let a = args.first {
    args.removeFirst()
    switch a {
    case "--quick": settings.size = .quick; settings.rounds = 3
    case "--smoke": settings.size = .smoke; settings.rounds = 1
    case "--json": json = true
    case "--rounds":
        guard let v = args.first.flatMap(Int.init), (1...100).contains(v) else { usage("--rounds takes 1 to 100") }
        settings.rounds = v
        args.removeFirst()
    case "--cases":
        guard let v = args.first else { usage("--cases needs a list") }
        only = Set(v.split(separator: ",").map(String.init))
        args.removeFirst()
    case "--help": print("usage: storebench [--quick|--smoke] [--json] [--rounds N] [--cases a,b]"); exit(0)
    default: usage("unknown argument '\(a)'")
    }
}

@MainActor func want(_ name: String) -> Bool { only.map { $0.contains(name) || $0.contains(where: { name.hasPrefix($0) }) } ?? true }

@MainActor func show(_ r: Report) {
    if json { emitLine(r); return }
    guard case .object(let pairs) = r else { return }
    let name = pairs.first { $0.0 == "case" }.map { "\($0.1)".isEmpty ? "" : $0.1.serialized } ?? ""
    let rest = pairs.filter { $0.0 != "case" }.map { "\($0.0)=\($0.1.serialized)" }.joined(separator: " ")
    print("\(name.replacingOccurrences(of: "\"", with: "").padding(toLength: 18, withPad: " ", startingAt: 0)) \(rest)")
}

do {
    show(.object([("case", .string("meta")), ("sqlite", .string(sqliteVersion())),
                  ("pragmas", .string("journal_mode=WAL synchronous=NORMAL")), ("size", .string("\(settings.size)")),
                  ("rounds", .number(Double(settings.rounds))), ("cores", .number(Double(ProcessInfo.processInfo.activeProcessorCount)))]))
    if want("save-history") { show(try saveCase(settings, history: true)) }
    if want("save-no-history") { show(try saveCase(settings, history: false)) }
    if want("batch-insert") { show(try batchCase(settings)) }
    if want("update-property") { show(try updateCase(settings)) }
    if want("history-fetch-1k") { show(try historyFetchCase(settings, retained: 1000, name: "history-fetch-1k")) }
    if want("history-fetch-1m") { show(try historyFetchCase(settings, retained: settings.bigHistory, name: "history-fetch-1m")) }
    if want("latency") { show(try latencyCase(settings)) }
    if want("token-advance") { show(try tokenAdvanceCase(settings)) }
    if want("cleaner") { show(try cleanerCase(settings)) }
    if want("catch-up-memory") { show(try catchUpCase(settings)) }
    if want("writers") {
        var single: Double?
        for n in [1, 2, 4, 8] {
            let (r, rate) = try writersCase(settings, writers: n, single: single)
            if n == 1 { single = rate }
            show(r)
        }
    }
} catch {
    FileHandle.standardError.write(Data("error: \(error)\n".utf8))
    exit(1)
}
