import ArgumentParsing
import Foundation
import ReadLater
import SharedStore

// A second process for the tests and the demo: one command per run (see `--help`).

/// The commands of the helper, and their options.
enum HelperCLI {
    static let consumerOption = Option.value("consumer", "C", "the consumer name", required: true)
    static let commands: [Command] = [
        Command(
            "write", "one save per article",
            options: [
                .value("author", "A", "the transaction author", required: true),
                .value("count", "N", "how many saves", required: true),
                .flag("times", "print each token with a monotonic time"),
            ]),
        Command(
            "history", "print the history",
            options: [.value("after", "TOKEN", "after this token"), .value("exclude-author", "A", "skip")]),
        Command(
            "watch", "follow the store as a view",
            options: [
                consumerOption, .value("count", "N", "stop after N transactions"),
                .value("seconds", "S", "stop after S seconds"),
                .flag("times", "print each token with a monotonic time"),
                .value("poll", "S", "the observer's poll interval"),
            ]),
        Command("sync", "sync a view once", options: [consumerOption]),
        Command(
            "advance", "advance one consumer to each token, in that order",
            options: [consumerOption, .value("tokens", "3,1,2", "token values", required: true)]),
        Command("register", "register a consumer", options: [consumerOption]),
        Command("hold-read", "open a registry read transaction, print, wait to be killed"),
        Command("hold-write", "open a registry write transaction, print, wait to be killed (a frozen writer)"),
        Command(
            "clean", "run the cleaner",
            options: [.value("evict-after", "S", "evict after S seconds"), .flag("dry-run", "delete nothing")]),
        Command(
            "set-title", "another process's save of one title",
            options: [
                .value("id", "ID", "the article", required: true),
                .value("title", "T", "the new title", required: true),
            ]),
        Command("delete", "another process's delete", options: [.value("id", "ID", "the object", required: true)]),
        Command(
            "add-category", "another process's insert of a category",
            options: [.value("name", "N", "its name", required: true)]),
        Command(
            "migrate-slowly",
            "migrate the store to the newest model plus an index on Article.title, print in-migration inside the "
                + "migration's transaction, then wait to be killed"),
        Command("live-query", "follow the articles with an ephemeral live query until killed"),
        Command("hold-pin", "pin a context to the store as it is, print, wait to be killed (a long-held pin)"),
        Command("cross-thread", "use a context from a thread other than its own (the concurrency debug switch)"),
        Command("readers", "the registry's reader slots"),
        Command("tokens", "every consumer's token"),
    ]
}

let parser = CommandLineParser(
    tool: "sharedstore-helper", summary: "a second process for the tests and the demo",
    commands: HelperCLI.commands + TypedCLI.commands,
    common: [.value("group", "DIR", "the group directory", required: true), .flag("help", "show this help")])

func fail(_ message: String, code: Int32) -> Never {
    FileHandle.standardError.write(Data("error: \(message)\n".utf8))
    exit(code)
}

/// One line on stdout, written at once (not buffered: tests read it while the process runs).
func line(_ value: JSONValue) {
    FileHandle.standardOutput.write(Data((value.serialized + "\n").utf8))
}

func emit(_ pairs: [(String, JSONValue)]) { line(.object(pairs)) }

func monotonicNanoseconds() -> Double { Double(Monotonic.nanoseconds()) }

let arguments: Arguments
do {
    switch try parser.parse(Array(CommandLine.arguments.dropFirst())) {
    case .help(let command):
        print(parser.help(command), terminator: "")
        exit(0)
    case .run(let parsed): arguments = parsed
    }
} catch {
    fail("\(error)", code: 2)
}
let command = arguments.command.name
let options = HelperOptions(arguments)
guard let group = options["group"] else { fail("'\(command)' needs --group", code: 2) }
let times = options["times"] != nil

/// The parsed flags by name: values as given, flags as "1".
struct HelperOptions {
    let arguments: Arguments
    init(_ arguments: Arguments) { self.arguments = arguments }
    subscript(name: String) -> String? { arguments.value(name) ?? (arguments.has(name) ? "1" : nil) }
}

/// A migration that does real work (an index over every article) and then hangs inside its
/// transaction, for a test to kill it there.
func migrateSlowly(_ group: String) -> Never {
    do {
        var entities = ReadLater.model.entities
        entities[0].indexes.append(Index("title"))
        let model = try Model(version: ReadLater.newestVersion, entities)
        let hang = MigrationStep(version: ReadLater.newestVersion, "hang until killed") { _ in
            FileHandle.standardOutput.write(Data("in-migration\n".utf8))
            while true { sleep(60) }
        }
        _ = try Container(group: group, model: model, migrations: [hang])
        fail("the migration ended", code: 1)
    } catch let error as StoreError {
        fail(error.message, code: 1)
    } catch {
        fail("\(error)", code: 1)
    }
}

/// The commands about the process itself: a live query that outlives nothing but its process,
/// a context used from another thread.
@MainActor
func processCommand(_ container: Container) throws {
    switch command {
    case "live-query":
        // A live query with no consumer name of its own, then nothing until killed (the test of
        // ephemeral consumers: a dead process must not hold history back).
        let query = try LiveQuery(
            container: container, registry: try TokenRegistry(group: group), request: FetchRequest("Article"))
        let result = try query.next()
        emit([("consumer", .string(query.consumerName)), ("objects", .number(Double(result?.objects.count ?? 0)))])
        while true { sleep(60) }
    case "hold-pin":
        // A pinned context held for long: `storectl tokens` must show it.
        let context = container.newContext(name: "pinned", author: "Helper")
        try context.pin()
        emit([("pinned", .bool(true)), ("articles", .number(Double(try context.count(FetchRequest("Article")))))])
        while true { sleep(60) }
    case "cross-thread":
        // A context made here and used from another thread (SHAREDSTORE_CONCURRENCY_DEBUG's test):
        // a misuse strict concurrency refuses, made through an unchecked box.
        final class Box: @unchecked Sendable {
            let context: ObjectContext
            init(_ context: ObjectContext) { self.context = context }
        }
        let box = Box(container.newContext(name: "crossing", author: "Helper"))
        let done = DispatchSemaphore(value: 0)
        Thread {
            _ = try? box.context.count(FetchRequest("Article"))
            done.signal()
        }.start()
        done.wait()
        emit([("crossed", .bool(true))])
    default:
        fail("unknown command '\(command)'", code: 2)
    }
}

/// The commands that save or read the store: `write`, `history`, and another process's saves.
@MainActor
func storeCommand(_ container: Container) throws {
    switch command {
    case "write":
        guard let author = options["author"], let count = Int(options["count"] ?? "") else {
            fail("write needs --author and --count", code: 2)
        }
        let context = container.newContext(name: "helper", author: author)
        var last: HistoryToken?
        for i in 0..<count {
            try context.insert(ReadLater.Article(title: "\(author)-\(i)", url: "https://example.com/\(author)/\(i)"))
            last = try context.save().token
            if times, let last { emit([("token", .string(last.description)), ("t", .number(monotonicNanoseconds()))]) }
        }
        emit([("written", .number(Double(count))), ("token", last.map { .string($0.description) } ?? .null)])
    case "history":
        var request = HistoryRequest()
        if let after = options["after"] { request.start = .after(try container.token(parsing: after)) }
        if let excluded = options["exclude-author"] { request.excludedAuthors = [excluded] }
        try container.history(request) { batch in
            for t in batch { line(t.json) }
        }
    case "set-title":
        // Another process's save of one article's title (merge-policy tests).
        guard let idText = options["id"], let title = options["title"] else {
            fail("set-title needs --id and --title", code: 2)
        }
        let context = container.newContext(name: "helper", author: "Other")
        try context.update(try container.objectID(parsing: idText), ["title": .string(title)])
        emit([("token", try context.save().token.map { .string($0.description) } ?? .null)])
    case "live-query", "cross-thread", "hold-pin":
        try processCommand(container)
    case "delete":
        guard let idText = options["id"] else { fail("delete needs --id", code: 2) }
        let context = container.newContext(name: "helper", author: "Other")
        try context.delete(try container.objectID(parsing: idText))
        emit([("token", try context.save().token.map { .string($0.description) } ?? .null)])
    case "add-category":
        guard let name = options["name"] else { fail("add-category needs --name", code: 2) }
        let context = container.newContext(name: "helper", author: "Other")
        context.mergePolicy = .storeTrump
        let temp = try context.insert(ReadLater.Category(name: name))
        emit([("id", .string(try context.save().permanentID(for: temp).description))])
    default:
        try viewCommand(container)
    }
}

/// `watch` and `sync`: a view of the store, as a target keeps one.
@MainActor
func viewCommand(_ container: Container) throws {
    switch command {
    case "watch", "sync":
        guard let consumer = options["consumer"] else { fail("\(command) needs --consumer", code: 2) }
        let registry = try TokenRegistry(group: group)
        let view = try ViewContext(container: container, registry: registry, consumer: consumer)
        if command == "sync" {
            let result = try view.sync { line($0.json) }
            emit([
                ("synced", .number(Double(result.transactions))), ("token", .string(result.token.description)),
                ("expired", .bool(result.expired)), ("view", .number(Double(view.objects.count))),
            ])
            break
        }
        let observer = try ChangeObserver(container: container, pollInterval: Double(options["poll"] ?? "1") ?? 1)
        func report(_ t: HistoryTransaction) {
            var line: [(String, JSONValue)] = [
                ("token", .string(t.token.description)), ("author", t.author.map(JSONValue.string) ?? .null),
            ]
            if times { line.append(("t", .number(monotonicNanoseconds()))) }
            emit(line)
        }
        // Ready only once the first sync is done: a new consumer's first sync loads the view in
        // full, and what was committed before it would not be reported as transactions.
        var reported = 0
        try view.sync {
            report($0)
            reported += 1
        }
        emit([("ready", .bool(true)), ("inotify", .bool(observer.usesInotify))])
        let count = options["count"].flatMap(Int.init).map { $0 - reported }
        if count.map({ $0 > 0 }) ?? true {
            try view.watch(observer: observer, duration: options["seconds"].flatMap(Double.init), count: count, report)
        }
        // The view, to compare with a fresh fetch.
        let view_ = view.objects.values.sorted { $0.id < $1.id }.map { JSONValue.string("\($0.id)@\($0.version)") }
        emit([("view", .array(view_)), ("token", view.token.map { .string($0.description) } ?? .null)])
    default:
        try registryCommand(container)
    }
}

/// The commands on the token registry.
@MainActor
func registryCommand(_ container: Container) throws {
    switch command {
    case "advance":
        guard let consumer = options["consumer"], let list = options["tokens"] else {
            fail("advance needs --consumer and --tokens", code: 2)
        }
        let registry = try TokenRegistry(group: group)
        for v in list.split(separator: ",") {
            guard let value = Int64(v) else { fail("bad token value '\(v)'", code: 2) }
            try registry.advance(consumer, to: HistoryToken(storeID: container.storeID, value: value))
        }
        emit([("done", .bool(true))])
    case "register":
        guard let consumer = options["consumer"] else { fail("register needs --consumer", code: 2) }
        try TokenRegistry(group: group).register(consumer)
        emit([("registered", .string(consumer))])
    case "hold-read":
        let registry = try TokenRegistry(group: group)
        try registry.holdReadTransactionForTesting {
            emit([("holding", .bool(true))])
            while true { pause() }
        }
    case "hold-write":
        // Inside a registry write transaction, then stop itself: a frozen writer.
        let registry = try TokenRegistry(group: group)
        try registry.holdWriteTransactionForTesting {
            emit([("holding", .bool(true))])
            while true { pause() }
        }
    case "readers":
        let registry = try TokenRegistry(group: group)
        emit([
            ("cleared", .number(Double(registry.clearedStaleReaders))),
            ("in_use", .number(Double(registry.readerSlotsInUse))),
        ])
    case "tokens":
        let registry = try TokenRegistry(group: group)
        for c in try registry.consumers() {
            emit([
                ("consumer", .string(c.name)), ("token", c.token.map { .string($0.description) } ?? .null),
                ("value", .number(Double(c.token?.value ?? 0))), ("evicted", .bool(c.isEvicted)),
            ])
        }
    default:
        try cleanCommand(container)
    }
}

/// `clean`: the history cleaner, once.
@MainActor
func cleanCommand(_ container: Container) throws {
    switch command {
    case "clean":
        let registry = try TokenRegistry(group: group)
        let report = try HistoryCleaner.clean(
            container: container, registry: registry, dryRun: options["dry-run"] != nil,
            evictAfter: options["evict-after"].flatMap(Double.init))
        emit([
            ("deleted", .number(Double(report.deleted))),
            ("through", report.through.map { .string($0.description) } ?? .null),
            ("oldest_consumer", report.oldestConsumer.map(JSONValue.string) ?? .null),
            ("remaining", .number(Double(report.remaining))),
            ("evicted", .array(report.evicted.map(JSONValue.string))),
        ])
    default:
        fail("unknown command '\(command)'", code: 2)
    }
}

if command == "migrate-slowly" { migrateSlowly(group) }
if command.hasPrefix("typed-") { typedCommand(group) }

do {
    let container = try Container(group: group, model: ReadLater.model)
    try ChangeSignal.attach(to: container)
    try storeCommand(container)
} catch let error as StoreError {
    fail(error.message, code: 1)
} catch {
    fail("\(error)", code: 1)
}
