@_exported import ArgumentParsing
import Foundation
import ReadLater
import SharedStore

/// An executable: its commands and what runs them. Each target's `main.swift` is one call to
/// ``run(_:)``.
public struct Tool: Sendable {
    public let name: String
    public let summary: String
    /// The commands; a tool with one command named "" takes no command word (history-cleaner).
    public let commands: [Command]
    /// The consumer name of a target in the token registry (nil: never a consumer).
    public let consumer: String?
    /// A target with no view (share-extension): it only writes, so it is never a consumer and
    /// never holds history back (an entry an older version registered is removed).
    public let hasNoView: Bool
    let handler: @Sendable (Invocation) throws -> Void

    public init(
        name: String, summary: String, consumer: String? = nil, hasNoView: Bool = false, commands: [Command],
        handler: @escaping @Sendable (Invocation) throws -> Void
    ) {
        self.name = name
        self.summary = summary
        self.consumer = consumer
        self.hasNoView = hasNoView
        self.commands = commands
        self.handler = handler
    }

    /// This tool with one more command, run by `run` (storectl's `mirror`, which lives in a
    /// module of its own so that only storectl links PostgreSQL's client library).
    public func adding(_ command: Command, _ run: @escaping @Sendable (Invocation) throws -> Void) -> Tool {
        let handler = self.handler
        return Tool(
            name: name, summary: summary, consumer: consumer, hasNoView: hasNoView, commands: commands + [command]
        ) { inv in
            if inv.command == command.name { try run(inv) } else { try handler(inv) }
        }
    }

    /// The parser of this tool's command line.
    public var parser: CommandLineParser {
        CommandLineParser(tool: name, summary: summary, commands: commands, common: commonOptions)
    }

    /// Parses `argv`, runs the command and returns the exit status: 0 success, 1 the operation
    /// failed (one `error:` line on stderr), 2 a usage error naming the argument.
    public func run(_ argv: [String]) -> Int32 {
        // A reader that goes away (`storectl history | head`) must not kill the process: the
        // write fails with EPIPE instead, and the output names it.
        signal(SIGPIPE, SIG_IGN)
        // CommandLine.arguments replaces invalid UTF-8 with U+FFFD: a title or an id would change
        // silently. Check the raw bytes when `argv` is this process's own.
        if argv == CommandLine.arguments, let bad = CommandLineParser.invalidUTF8Argument() {
            return usage("argument \(bad) is not valid UTF-8")
        }
        do {
            switch try parser.parse(Array(argv.dropFirst()), interactive: isatty(0) == 1) {
            case .help(let command):
                Output.writeStandardOutput(Array(parser.help(command).utf8))
                return command != nil || argv.contains("--help") ? 0 : 2
            case .run(let args):
                let invocation = Invocation(tool: name, arguments: args)
                // What a command streamed before it failed is written, then its error.
                defer {
                    invocation.output.flush()
                    Self.reportPeakMemory()
                }
                try handler(invocation)
                invocation.afterCommand(consumer: consumer, hasNoView: hasNoView)
                for warning in invocation.warnings {
                    FileHandle.standardError.write(Data("warning: \(TextSafety.visible(warning))\n".utf8))
                }
                return 0
            }
        } catch let e as UsageError {
            return usage(e.message)
        } catch let e as StoreError where e.code == .malformedID || e.code == .malformedToken {
            return usage(e.message)
        } catch let e as StoreError {
            return failure(e.message)
        } catch {
            return failure("\(error)")
        }
    }

    /// For the benchmark: when `SHAREDSTORE_PEAK_RSS_FILE` names a file, the process's peak
    /// resident memory (VmHWM, in KiB) is written there as it ends (a parent cannot read a
    /// child's own peak: wait4 counts the parent's memory at the fork).
    static func reportPeakMemory() {
        guard let path = ProcessInfo.processInfo.environment["SHAREDSTORE_PEAK_RSS_FILE"], !path.isEmpty,
            let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
        else { return }
        let kib = line.split(separator: " ").dropFirst().first.map(String.init) ?? "0"
        try? kib.write(toFile: path, atomically: false, encoding: .utf8)
    }

    // Messages quote arguments and stored values: control characters are shown escaped, so that
    // one error is always one line and never drives the terminal.
    private func usage(_ message: String) -> Int32 {
        Progress.clearLine()
        FileHandle.standardError.write(Data("error: \(TextSafety.visible(message))\n".utf8))
        return 2
    }

    private func failure(_ message: String) -> Int32 {
        // A progress line left by the work that failed goes first: the error is a line of its own.
        Progress.clearLine()
        FileHandle.standardError.write(Data("error: \(TextSafety.visible(message))\n".utf8))
        return 1
    }
}

/// Flags every command of the targets and storectl accepts.
let commonOptions: [Option] = [
    .value(
        "group", "DIR", "the app-group directory (default: $SHAREDSTORE_GROUP, else $XDG_DATA_HOME/sharedstore/default)"
    ),
    .value(
        "model-version", "N",
        "the model version this process runs (default: the newest, \(ReadLater.newestVersion)); "
            + "a newer one migrates the store"
    ),
    .flag(
        "durable",
        "sync every save and every token advance to disk (survives a power loss with every acknowledged save; "
            + "also $SHAREDSTORE_DURABLE=1)"),
    .flag("json", "one JSON object per line on stdout"),
    .flag("help", "show this help"),
]

/// One run of a command: its arguments, its output, and the store it works on (opened lazily).
public final class Invocation {
    public let tool: String
    public let arguments: Arguments
    public let output: Output
    public let group: String
    private var openedContainer: Container?
    private var openedRegistry: TokenRegistry?
    /// Printed as `warning:` lines on stderr when the command succeeds.
    public private(set) var warnings: [String] = []
    /// A command that only looks (audit, top): nothing is recorded in the registry after it.
    public var readsOnly = false

    init(tool: String, arguments: Arguments) {
        self.tool = tool
        self.arguments = arguments
        self.output = Output(json: arguments.has("json"))
        self.group = arguments.value("group") ?? Self.defaultGroup()
    }

    /// `$SHAREDSTORE_GROUP`, else `$XDG_DATA_HOME/sharedstore/default`, else
    /// `~/.local/share/sharedstore/default`.
    static func defaultGroup() -> String {
        let env = ProcessInfo.processInfo.environment
        if let g = env["SHAREDSTORE_GROUP"], !g.isEmpty { return g }
        // The XDG spec: a relative XDG_DATA_HOME is invalid and must be ignored.
        if let xdg = env["XDG_DATA_HOME"], xdg.hasPrefix("/") { return xdg + "/sharedstore/default" }
        let home = env["HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? NSHomeDirectory()
        return home + "/.local/share/sharedstore/default"
    }

    public var command: String { arguments.command.name }

    /// `--durable` or `$SHAREDSTORE_DURABLE=1`: SQLite's synchronous=FULL and a registry synced
    /// at every commit. Without it a power loss may take the last acknowledged saves (a suffix,
    /// never a hole: see README, "Power loss").
    public var durable: Bool {
        arguments.has("durable") || ProcessInfo.processInfo.environment["SHAREDSTORE_DURABLE"] == "1"
    }

    public func container() throws -> Container {
        if let c = openedContainer { return c }
        guard !group.isEmpty else { throw UsageError("--group needs a directory") }
        var options = Container.Options()
        if durable { options.synchronous = .full }
        // A migration run by this open shows its phases (when stderr is a terminal).
        let progress = PhaseProgress("migrating")
        let model = try model()
        let c = try Container.withMigrationProgress({ progress.update($0) }) {
            try Container(group: group, model: model, options: options)
        }
        progress.finish()
        try ReadLater.registerHooks(c)
        // Every commit of a target wakes the observers of every process.
        try ChangeSignal.attach(to: c)
        openedContainer = c
        // Before anything is saved: a store put back to an older copy moves its tokens past every
        // one the registry knows. A damaged or busy registry does not stop a writer.
        do {
            try registry().reconcile(c)
        } catch let error as StoreError where error.code != .tokenSpaceExhausted {
            warn("could not check the store against the token registry: \(error.message)")
        }
        return c
    }

    /// The model of `--model-version` (default: the newest this build knows, which migrates an
    /// older store). storectl inspects and operates a store as it is: without the option, it
    /// opens the store at its own version (only `storectl migrate` migrates).
    public func model() throws -> Model {
        if let version = try arguments.integer("model-version", in: 1...ReadLater.newestVersion) {
            return try ReadLater.model(version: version)
        }
        if tool == "storectl", command != "migrate", let stored = try Container.describeStore(group: group)?.version,
            stored < ReadLater.newestVersion
        {
            // A store of format 2 (version 0) opens as version 1, which it was.
            return try ReadLater.model(version: max(stored, 1))
        }
        return ReadLater.model
    }

    public func warn(_ message: String) { warnings.append(message) }

    /// After a command succeeded: a target that reads registers as a consumer; a target that only
    /// writes drops a consumer entry an older version made; and the store's newest token is
    /// recorded as its high-water mark. None of it may fail a command whose work is done: a
    /// registry that is busy, damaged or full is a warning.
    func afterCommand(consumer: String?, hasNoView: Bool) {
        guard !readsOnly else { return }
        do {
            if let consumer {
                let registry = try registry()
                if hasNoView {
                    if try registry.consumer(consumer) != nil { try registry.remove(consumer) }
                } else {
                    try registry.register(consumer)
                }
            }
            if let c = openedContainer { try registry().noteHighWater(c.currentToken()) }
        } catch let error as StoreError {
            warn(error.message)
        } catch {
            warn("\(error)")
        }
    }

    /// The store opened read-only at its own model version (``Container/Options/readOnly``) and
    /// the registry when there is one, for a command that only looks: nothing is made, migrated,
    /// reconciled or checkpointed, and nothing is recorded after it. `registryProblem` says why
    /// there is no registry.
    public func inspect() throws -> (container: Container, registry: TokenRegistry?, registryProblem: String?) {
        readsOnly = true
        guard arguments.value("model-version") == nil else {
            throw UsageError(
                "storectl \(command) reads the store at its own model version and changes nothing: "
                    + "--model-version is not taken (storectl migrate migrates)")
        }
        guard !group.isEmpty else { throw UsageError("--group needs a directory") }
        guard let stored = try Container.describeStore(group: group) else {
            throw StoreError(.fileAccess, "no store in \(group)")
        }
        var options = Container.Options()
        options.readOnly = true
        let container = try Container(
            group: group, model: try ReadLater.model(version: max(stored.version, 1)), options: options)
        openedContainer = container
        // A registry is opened only when there is one to open: opening makes a missing one.
        let path = (group as NSString).appendingPathComponent(TokenRegistry.fileName)
        var st = stat()
        // None yet (no target that reads has run): no consumer, nothing to lag.
        if lstat(path, &st) != 0 {
            if errno == ENOENT { return (container, nil, nil) }
            return (container, nil, "cannot inspect \(path): \(String(cString: strerror(errno)))")
        }
        guard st.st_mode & S_IFMT == S_IFREG, st.st_size > 0 else {
            return (
                container, nil,
                "token registry \(TextSafety.visible(path)) is damaged (empty, or not a regular file); run "
                    + "'storectl repair-registry' to move it aside and start an empty one (every consumer then reloads "
                    + "in full)"
            )
        }
        if container.readsFileAsItIs {
            warn(
                "\(group) cannot be written by this user: Store.sqlite is read as the file is, without SQLite's "
                    + "locks (a writer working now is not seen)")
        }
        do {
            let r = try TokenRegistry(group: group, readOnly: true)
            openedRegistry = r
            if r.readsFileAsItIs {
                warn("tokens.lmdb-lock cannot be written by this user: the registry is read as the file is")
            }
            return (container, r, nil)
        } catch let error as StoreError
            where error.code == .fileAccess
            && (error.message.contains("Permission denied") || error.message.contains("Read-only file system"))
        {
            return (
                container, nil,
                "cannot read the token registry \(TextSafety.visible(path)) as this user: LMDB writes its lock file "
                    + "(tokens.lmdb-lock) even to read, unless the file system is read-only (\(error.message)); it is "
                    + "not damaged by this"
            )
        } catch let error as StoreError {
            return (container, nil, error.message)
        }
    }

    public func registry() throws -> TokenRegistry {
        if let r = openedRegistry { return r }
        // A command that only looks never makes a registry (opening one makes a missing file).
        guard !readsOnly else { throw StoreError(.fileAccess, "no token registry in \(group)") }
        let r = try TokenRegistry(group: group, durability: durable ? .powerLoss : .processCrash)
        openedRegistry = r
        return r
    }

    /// A context writing as `author`, resolving conflicts with store trump (the playbook's choice).
    public func context(author: String) throws -> ObjectContext {
        let context = try container().newContext(name: "\(tool).\(command)", author: author)
        context.mergePolicy = .storeTrump
        return context
    }

    /// Syncs consumer `name`: merges what other targets saved since its token — reporting each
    /// transaction to `each` — and advances the token, loading no object (the target then reads
    /// what it shows through queries: memory stays that of what it shows, whatever the store's
    /// size).
    public func syncedConsumer(_ name: String, _ each: (HistoryTransaction) throws -> Void = { _ in }) throws
        -> SyncResult
    {
        let consumer = try ViewContext(container: container(), registry: registry(), consumer: name, entities: [])
        let result = try consumer.sync(each)
        if let warning = result.registryWarning { warn(warning) }
        return result
    }

    /// A context to read with (the target's queries).
    public func readContext() throws -> ObjectContext {
        try container().newContext(name: "\(tool).\(command)")
    }

    /// Parses an object id argument of `entity`.
    public func objectID(_ text: String, entity: String) throws -> ObjectID {
        let id = try container().objectID(parsing: text)
        guard id.entity == entity else { throw UsageError("'\(text)' is not an \(entity) id (expected \(entity)/N)") }
        return id
    }

    /// Parses a token argument: malformed is a usage error, another store's token a failure.
    public func token(_ text: String) throws -> HistoryToken {
        try container().token(parsing: text)
    }

    /// `{"id","token"}` after a save; the current token when the save changed nothing.
    public func saved(_ id: ObjectID, _ result: SaveResult, extra: [(String, JSONValue)] = []) throws {
        let token = try result.token ?? container().currentToken()
        output.record(.object([("id", .string(id.description))] + extra + [("token", .string(token.description))]))
    }
}

/// A progress line updated from a closure the library may hold (`@Sendable`): the line behind a
/// lock, shown as ``Progress`` shows it.
final class PhaseProgress: @unchecked Sendable {
    private let progress: Progress
    private let lock = NSLock()
    /// The phase being told, and when its rows started (for their rate).
    private var phase = 0
    private var phaseStart = Date()
    init(_ label: String) { progress = Progress(label) }
    func update(_ text: String) { lock.withLock { progress.update(text: text) } }
    func finish() { lock.withLock { progress.finish() } }

    /// A migration's phase, with the rows it has done of its table, their rate and the time
    /// left when it counts them.
    func update(_ p: MigrationProgress) {
        lock.withLock {
            if p.phase != phase {
                phase = p.phase
                phaseStart = Date()
            }
            var text = "\(p.name) (phase \(p.phase) of \(p.phases))"
            guard let total = p.total, total > 0 else { return progress.update(text: text) }
            let elapsed = Date().timeIntervalSince(phaseStart)
            let rate = elapsed > 0 ? Double(p.done) / elapsed : 0
            text += String(format: ": %d/%d rows (%.0f%%)", p.done, total, Double(p.done) * 100 / Double(total))
            if rate > 0 { text += ", \(Progress.rate(rate))/s" }
            progress.update(text: text, left: rate > 0 && p.done < total ? Double(total - p.done) / rate : nil)
        }
    }
}
