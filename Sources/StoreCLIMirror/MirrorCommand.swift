import Foundation
import SharedStore
import SharedStoreMirror
import SharedStorePostgres
import StoreCLI

extension Targets {
    /// storectl with its `mirror` command (only storectl links PostgreSQL's client library: the
    /// other targets stay as small in memory as they were).
    public static let storectlWithMirror = storectl.adding(MirrorCommand.command, MirrorCommand.run)
        .adding(MirrorAdminCommand.command, MirrorAdminCommand.run)
        .adding(Conventions.completions, Conventions.runCompletions)
        .adding(Conventions.manpage, Conventions.runManpage)

    /// Every executable of the project, as its parser knows it (the test helper aside).
    public static var executables: [Tool] { [mainApp, shareExtension, widget, historyCleaner, storectlWithMirror] }
}

/// `storectl completions bash` and `storectl manpage TOOL`: the shell's completion and the
/// manual pages, generated from the definitions the executables parse their arguments with.
enum Conventions {
    static let completions = Command(
        "completions",
        "a bash completion script for every executable (source it, or put it in "
            + "/etc/bash_completion.d)", positionals: ["SHELL"],
        notTaking: ["group", "model-version", "durable", "json"])
    static let manpage = Command(
        "manpage",
        "the manual page (man 1, groff) of an executable: main-app, share-extension, widget, "
            + "history-cleaner or storectl", positionals: ["TOOL"],
        notTaking: ["group", "model-version", "durable", "json"])

    static func runCompletions(_ inv: Invocation) throws {
        let shell = inv.arguments.positionals[0]
        guard shell == "bash" else { throw UsageError("completions: unknown shell '\(shell)' (bash)") }
        let words = ["SHELL": ["bash"], "TOOL": Targets.executables.map(\.name)]
        let script = Targets.executables.enumerated().map { n, tool in
            tool.parser.bashCompletion(positionalWords: words, helpers: n == 0)
        }.joined(separator: "\n")
        Output.writeStandardOutput(Array(("# SharedStore's executables (storectl completions bash)\n" + script).utf8))
    }

    static func runManpage(_ inv: Invocation) throws {
        let name = inv.arguments.positionals[0]
        guard let tool = Targets.executables.first(where: { $0.name == name }) else {
            throw UsageError(
                "manpage: unknown executable '\(name)' (\(Targets.executables.map(\.name).joined(separator: ", ")))")
        }
        let date = ISO8601.string(Date()).prefix(10)
        Output.writeStandardOutput(Array(tool.parser.manPage(date: String(date)).utf8))
    }
}

/// `storectl mirror`: the store's mirror through PostgreSQL (issue 14).
enum MirrorCommand {
    static let command = Command(
        "mirror", "push local history to and pull other stores' transactions from PostgreSQL", options: options)

    static let options: [Option] = [
        .value(
            "postgres", "URL",
            "the server, as a libpq URL or key=value string without a password (default: libpq's environment, "
                + "PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSFILE)"),
        .flag("once", "push and pull until nothing is left, print one line, exit (the default)"),
        .flag("follow", "stay up: mirror every local save and every remote upload as it happens"),
        .value("for", "SECONDS", "with --follow: stop after this many seconds"),
        .flag("verify", "compare every object with the state the server's log determines; exit 1 when any differs"),
        .flag("retry-quarantined", "apply the quarantined server rows again before the round"),
        .value(
            "read-from", "URL",
            "pull from this server instead, a streaming standby of the one uploads go to (a libpq URL or key=value "
                + "string without a password; add target_session_attrs=any when PGTARGETSESSIONATTRS says read-write)"),
        .value(
            "space", "NAME",
            "the space to mirror into (one person's or one team's data; an administrator makes it and grants "
                + "this role the use of it with 'storectl mirror-admin'); default: the server's log outside any space"),
        .value(
            "directory", "URL",
            "with --space: the server holding the space directory (a libpq URL or key=value string without a "
                + "password); the mirror connects to the server it names for the space, and follows a move"),
        .flag(
            "rejoin",
            "with --once: when the server pruned its log past this store and cannot tell what it changed since its "
                + "last upload, take the server's state, dropping those changes; when the server's log was rewritten "
                + "under this store (a failover that lost rows), take its state, keeping the changes it lacks"),
        .value(
            "snapshot-every", "ROWS",
            "make a snapshot of the server's state when the log grew by this many rows (and as many as the last "
                + "snapshot has objects) since the last one; 0: never; default 10000"),
        .value(
            "max-row-mb", "MB",
            "read no server row larger than this many megabytes (quarantined unread instead; reading a row takes "
                + "about three times its size); default: an eighth of this machine's memory"),
    ]

    static func run(_ inv: Invocation) throws {
        let modes = ["once", "follow", "verify"].filter { inv.arguments.has($0) }
        if modes.count > 1 {
            throw UsageError(modes.map { "--" + $0 }.joined(separator: " and ") + " exclude each other")
        }
        for flag in ["retry-quarantined", "rejoin"] where inv.arguments.has(flag) && !modes.isEmpty && modes != ["once"]
        {
            throw UsageError("--\(flag) goes with --once only")
        }
        let snapshotEvery = try inv.arguments.integer("snapshot-every", in: 0...Int(Int32.max)).map { Int64($0) }
        if snapshotEvery != nil && inv.arguments.has("verify") {
            throw UsageError("--snapshot-every goes with --once or --follow")
        }
        if let space = inv.arguments.value("space") { try checkSpaceName(space, option: "space") }
        let server = try serverResolver(inv)
        _ = try rowLimit(inv)
        guard inv.arguments.has("follow") else {
            // A space moved meanwhile is looked up again (twice at most).
            for attempt in 1...3 {
                do {
                    return try once(inv, conninfo: try server(), snapshotEvery: snapshotEvery)
                } catch let error as MirrorError
                    where error.code == .spaceMoved && attempt < 3 && inv.arguments.has("directory")
                {
                    continue
                }
            }
            return
        }
        try follow(
            inv, server: server, seconds: try inv.arguments.seconds("for", in: 0...31_536_000),
            snapshotEvery: snapshotEvery)
    }

    /// `name` checked as a space name before anything connects: a usage error naming the rule.
    static func checkSpaceName(_ name: String, option: String) throws {
        do {
            _ = try MirrorServer.schema(forSpace: name)
        } catch let error as PostgresError {
            throw UsageError("--\(option): \(error.message)")
        }
    }

    /// `--max-row-mb` in bytes (nil: the mirror's default).
    static func rowLimit(_ inv: Invocation) throws -> Int64? {
        try inv.arguments.integer("max-row-mb", in: 1...1_048_576).map { Int64($0) << 20 }
    }

    /// Where the mirror connects, asked at each connection: `--postgres` (or libpq's environment),
    /// or with `--directory`, the server the space directory names for `--space`.
    static func serverResolver(_ inv: Invocation) throws -> () throws -> String {
        let conninfo = try connectionString(inv)
        guard let directory = try connectionString(inv, option: "directory") else { return { conninfo } }
        guard let space = inv.arguments.value("space") else { throw UsageError("--directory needs --space NAME") }
        for option in ["postgres", "read-from"] where inv.arguments.value(option) != nil {
            throw UsageError("--directory and --\(option) exclude each other (the directory names the server)")
        }
        return { try MirrorDirectory(connection: try PostgresConnection(directory)).server(of: space) }
    }

    /// `--once` or `--verify`: one round (or the comparison) through `conninfo`.
    static func once(_ inv: Invocation, conninfo: String, snapshotEvery: Int64?) throws {
        let mirror = try Mirror(
            container: inv.container(), registry: inv.registry(), connection: try PostgresConnection(conninfo),
            space: inv.arguments.value("space"),
            readConnection: try readConnectionString(inv).map { try PostgresConnection($0) })
        if let limit = try rowLimit(inv) { mirror.rowLimit = limit }
        if inv.arguments.has("verify") { return try verify(inv, mirror) }
        if inv.arguments.has("retry-quarantined") { _ = try mirror.retryQuarantined() }
        mirror.rejoinDiscardingUnpushed = inv.arguments.has("rejoin")
        if let snapshotEvery { mirror.snapshotEvery = snapshotEvery }
        let progress = Progress("uploading every object")
        mirror.fullUploadProgress = { progress.update($0, of: $1) }
        defer { progress.finish() }
        let round = try mirror.round()
        inv.output.record(round.json)
        try failIfQuarantined(round)
    }

    /// A round that leaves rows in quarantine fails (exit 1), naming how many; so does one whose
    /// store could not take the log's state, or still differs from it after doing so.
    static func failIfQuarantined(_ round: MirrorRound) throws {
        let count = round.quarantinedCount
        guard count == 0 else {
            throw MirrorError(
                "\(count) mirrored row(s) quarantined (listed above; "
                    + "'storectl mirror --retry-quarantined' applies them again)")
        }
        if let problem = round.reconcileError {
            throw MirrorError("this store could not take the state the server's log gives it: \(problem)")
        }
        guard round.unreconciled == 0 else {
            throw MirrorError(
                "\(round.unreconciled) object(s) still differ from the state the server's log gives them "
                    + "('storectl mirror --verify' names them)")
        }
    }

    /// `--verify`: one line per object that differs from the server's state; exit 1 when any.
    static func verify(_ inv: Invocation, _ mirror: Mirror) throws {
        let differences = try mirror.verify()
        for d in differences { inv.output.record(d.json) }
        guard differences.isEmpty else {
            // A snapshot is a member's word: the one the state came from is named, with who made it.
            let from = mirror.replayedFrom.map {
                "; that state starts from the server's \($0.description): if the log was pruned through a wrong "
                    + "snapshot, the space's administrator deletes its head"
            }
            throw StoreError(
                .verificationFailed,
                "\(differences.count) object(s) differ from the state the server's log determines "
                    + "(run 'storectl mirror' until the lag is 0 first, then compare again\(from ?? ""))")
        }
    }

    /// The connection string: libpq's environment, or `--postgres` when it sets no password
    /// (a command line is visible to every user in `ps`), as libpq itself reads the string.
    static func connectionString(_ inv: Invocation) throws -> String {
        try connectionString(inv, option: "postgres") ?? ""
    }

    /// `--read-from`'s connection string (nil: pulls read where uploads go), checked as `--postgres`'s.
    static func readConnectionString(_ inv: Invocation) throws -> String? {
        try connectionString(inv, option: "read-from")
    }

    static func connectionString(_ inv: Invocation, option: String) throws -> String? {
        guard let text = inv.arguments.value(option) else { return nil }
        let options: [String: String]
        do {
            options = try PostgresConnection.options(of: text)
        } catch let error as PostgresError {
            throw UsageError("--\(option): \(error.message)")
        }
        // `sslpassword` is a secret too (the client key's passphrase).
        if options["password"].map({ !$0.isEmpty }) == true || options["sslpassword"].map({ !$0.isEmpty }) == true {
            throw UsageError(
                "--\(option) must not carry a password (other users see it in ps): put it in PGPASSFILE (~/.pgpass)")
        }
        return text
    }
}
