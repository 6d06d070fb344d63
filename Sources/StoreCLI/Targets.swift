import Foundation
import ReadLater
import SharedStore

/// The executables of shared/docs/CLI.md. Each `main.swift` is `exit(Targets.X.run(CommandLine.arguments))`.
public enum Targets {
    static let addOptions: [Option] = [
        .value("title", "T", "the article's title (1 to 500 characters)", required: true),
        .value("url", "U", "an absolute http(s) URL", required: true),
        .value("category", "C", "a category name, created when new"),
    ]

    // MARK: - main-app

    public static let mainApp = Tool(
        name: "main-app", summary: "the main app: adds, lists, edits and follows articles (author MainApp)",
        consumer: "MainApp",
        commands: [
            Command("add", "add an article", options: addOptions),
            Command(
                "list", "list articles, oldest first, as they are read",
                options: [
                    .flag("unread", "only unread articles"),
                    .value("search", "TEXT", "only articles whose title holds TEXT, ignoring case and diacritics"),
                    .value("limit", "N", "at most N articles"),
                    .value("offset", "N", "skip the first N articles"),
                ]),
            Command("mark-read", "mark an article read", positionals: ["ID"]),
            Command("mark-unread", "mark an article unread", positionals: ["ID"]),
            Command("delete", "delete an article", positionals: ["ID"]),
            Command("sync", "merge what other targets saved since this target's token"),
            Command(
                "watch", "merge other targets' saves as they happen; print each one that changes the list",
                options: watchOptions),
        ]
    ) { inv in
        let me = "MainApp"
        switch inv.command {
        case "add":
            try add(inv, author: me)
        case "list":
            try list(inv, consumer: me)
        case "mark-read", "mark-unread":
            let id = try inv.objectID(inv.arguments.positionals[0], entity: "Article")
            let context = try inv.context(author: me)
            try context.update(id, ["isRead": .bool(inv.command == "mark-read")])
            try inv.saved(id, try context.save())
        case "delete":
            let id = try inv.objectID(inv.arguments.positionals[0], entity: "Article")
            let context = try inv.context(author: me)
            try context.delete(id)
            try inv.saved(id, try context.save())
        case "sync":
            let progress = Progress("syncing")
            var n = 0
            let result = try inv.syncedConsumer(me) { t in
                inv.output.record(t.json)
                n += 1
                progress.update(n)
            }
            progress.finish()
            inv.output.record(
                .object([
                    ("synced", .number(Double(result.transactions))), ("token", .string(result.token.description)),
                    ("expired", .bool(result.expired)), ("reloaded", .bool(result.reloaded)),
                ]))
        case "watch":
            var first = true
            let model = try inv.container().model
            try inv.watch(
                consumer: me,
                // A line only when what the list shows changed (its live query's relevance,
                // decided from the transaction): an article, or a category's name.
                each: { if ReadLater.changesList($0, model: model) { inv.output.record($0.json) } },
                afterSync: { result, _ in
                    // A reload after the start (expired, evicted, reset, restored) is said, never silent.
                    if result.reloaded && (result.expired || !first) {
                        inv.output.record(
                            .object([
                                ("expired", .bool(result.expired)), ("reloaded", .bool(true)),
                                ("token", .string(result.token.description)),
                            ]))
                    }
                    first = false
                })
        default:
            throw UsageError("unknown command '\(inv.command)'")
        }
    }

    /// `main-app list`: syncs the target's view, then prints the articles as a table (or JSON lines).
    static func list(_ inv: Invocation, consumer: String) throws {
        _ = try inv.syncedConsumer(consumer)
        let (context, unread, search) = (
            try inv.readContext(), inv.arguments.has("unread"), inv.arguments.value("search")
        )
        let limit = try inv.arguments.integer("limit", in: 0...Int.max)
        let offset = try inv.arguments.integer("offset", in: 0...Int.max) ?? 0
        if inv.output.json {
            // Each line written straight into the output's buffer (a million articles: no value
            // built per row).
            try ReadLater.listArticleObjects(
                context, unreadOnly: unread, search: search, limit: limit, offset: offset, inv.output.streamedObject)
            inv.output.flush()
            return
        }
        let table = inv.output.tableStream(columns: [
            ("id", "ID"), ("isRead", "READ"), ("title", "TITLE"), ("category", "CATEGORY"), ("url", "URL"),
            ("createdAt", "CREATED"),
        ])
        try ReadLater.listArticles(
            context, unreadOnly: unread, search: search, limit: limit, offset: offset, table.add)
        table.finish()
    }

    static func add(_ inv: Invocation, author: String) throws {
        let link = ReadLater.Link(
            url: try inv.arguments.required("url"), title: try inv.arguments.required("title"),
            category: inv.arguments.value("category"))
        try ReadLater.validate(link, in: inv.container(), place: "new article")
        let context = try inv.context(author: author)
        let ids = try ReadLater.insert([link], in: context)
        let result = try context.save()
        try inv.saved(result.permanentID(for: ids[0]), result)
    }

    // MARK: - share-extension

    public static let shareExtension = Tool(
        name: "share-extension",
        summary: "the share extension: saves links shared from other apps (author ShareExtension; never a consumer)",
        consumer: "ShareExtension", hasNoView: true,
        commands: [
            Command("share", "share one link", options: addOptions),
            Command(
                "share-batch",
                "share every line of FILE (url<TAB>title[<TAB>category]) in one transaction; '-' reads stdin",
                positionals: ["FILE"]),
        ]
    ) { inv in
        let me = "ShareExtension"
        switch inv.command {
        case "share":
            try add(inv, author: me)
        case "share-batch":
            let path = inv.arguments.positionals[0]
            let input: FileHandle
            if path == "-" {
                input = FileHandle.standardInput
            } else {
                var st = stat()
                if stat(path, &st) == 0, st.st_mode & S_IFMT == S_IFDIR {
                    throw StoreError(.fileAccess, "batch file \(path) is a directory")
                }
                guard let handle = FileHandle(forReadingAtPath: path) else {
                    throw StoreError(.fileAccess, "cannot read batch file \(path)")
                }
                input = handle
            }
            let progress = Progress("sharing")
            // The lines of a file, counted first only when a progress line shows what is left.
            let total = progress.isShown && path != "-" ? Self.lineCount(path) : nil
            let result = try ReadLater.shareBatch(
                input, name: path == "-" ? "standard input" : "batch file \(path)",
                context: try inv.context(author: me)
            ) { progress.update($0, of: total) }
            progress.finish()
            let token = try result.token ?? inv.container().currentToken()
            inv.output.record(
                .object([("inserted", .number(Double(result.articles))), ("token", .string(token.description))]))
        default:
            throw UsageError("unknown command '\(inv.command)'")
        }
    }

    // MARK: - widget

    public static let widget = Tool(
        name: "widget", summary: "the widget: unread count and the newest articles (author Widget)", consumer: "Widget",
        commands: [
            Command("show", "unread and total counts, the 3 newest articles"),
            Command("toggle-read", "flip an article between read and unread", positionals: ["ID"]),
            Command("watch", "print a fresh summary after every merge", options: watchOptions),
        ]
    ) { inv in
        let me = "Widget"
        switch inv.command {
        case "show":
            _ = try inv.syncedConsumer(me)
            inv.output.record(try ReadLater.widgetLine(try inv.readContext()))
        case "toggle-read":
            let id = try inv.objectID(inv.arguments.positionals[0], entity: "Article")
            let context = try inv.context(author: me)
            let isRead = !(try context.object(with: id)["isRead"].boolValue ?? false)
            try context.update(id, ["isRead": .bool(isRead)])
            try inv.saved(id, try context.save(), extra: [("isRead", .bool(isRead))])
        case "watch":
            // A line only when the summary changed: after every merge the summary is read again
            // (two counts and three rows) and compared with the last one printed.
            var last: JSONValue?
            let context = try inv.readContext()
            try inv.watch(
                consumer: me, each: { _ in },
                afterSync: { _, _ in
                    let line = try ReadLater.widgetLine(context)
                    if line != last { inv.output.record(line) }
                    last = line
                })
        default:
            throw UsageError("unknown command '\(inv.command)'")
        }
    }

    // MARK: - history-cleaner

    public static let historyCleaner = Tool(
        name: "history-cleaner", summary: "deletes the history every registered consumer has merged",
        commands: [
            Command(
                "", "delete history through the oldest live consumer's token",
                options: [
                    .flag("dry-run", "report what would be deleted, delete nothing"),
                    .value(
                        "evict-after", "SECONDS",
                        "first evict consumers not seen for this long (they reload in full next time)"),
                ])
        ]
    ) { inv in
        let progress = Progress("cleaning history")
        progress.update(0)
        let report = try HistoryCleaner.clean(
            container: inv.container(), registry: inv.registry(), dryRun: inv.arguments.has("dry-run"),
            evictAfter: try inv.arguments.seconds("evict-after", in: 0...3_153_600_000))
        progress.finish()
        var fields: [(String, JSONValue)] = [
            ("deleted", .number(Double(report.deleted))),
            ("through", report.through.map { .string($0.description) } ?? .null),
            ("oldest_consumer", report.oldestConsumer.map(JSONValue.string) ?? .null),
            ("remaining", .number(Double(report.remaining))),
            ("evicted", .array(report.evicted.map(JSONValue.string))),
        ]
        // Live queries of processes that are gone: said when there were any.
        if !report.gone.isEmpty { fields.append(("gone", .array(report.gone.map(JSONValue.string)))) }
        inv.output.record(.object(fields))
    }
}

extension Targets {
    /// The lines of the regular file at `path` (nil when it cannot be read): a count of its
    /// newline bytes, read in chunks of 1 MiB.
    static func lineCount(_ path: String) -> Int? {
        // A file the user names on the command line, never one of the group's: a link given on
        // purpose is followed (only a regular file is read).
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return nil }
        var lines = 0
        var last: UInt8 = 10
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }
            lines += chunk[..<n].reduce(0) { $1 == 10 ? $0 + 1 : $0 }
            last = chunk[n - 1]
        }
        return lines + (last == 10 ? 0 : 1)
    }
}
