import Dispatch
import Foundation
import ReadLater
import SharedStore
import SharedStoreSupport

/// The processes `storectl stress` spawns: writers that log every acknowledged save to a file
/// they fsync, and consumers that log every transaction they merge.
enum StressWorkers {
    /// The stress run's seeded generator, so that a run can be replayed from its seed.
    typealias Random = SeededRandom

    /// Appends lines to a log; `sync` makes each line durable before it counts as written.
    final class Log {
        let fd: Int32
        let sync: Bool
        init(path: String, sync: Bool) throws {
            fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard fd >= 0 else {
                throw StoreError(.fileAccess, "cannot open log \(path): \(String(cString: strerror(errno)))")
            }
            self.sync = sync
        }
        deinit { close(fd) }
        func write(_ value: JSONValue) throws {
            let line = Array((value.serialized + "\n").utf8)
            // One write(2) per line: a process killed around it leaves a whole line or none.
            let n = line.withUnsafeBytes { Foundation.write(fd, $0.baseAddress, $0.count) }
            guard n == line.count else {
                throw StoreError(.fileAccess, "cannot write log: \(String(cString: strerror(errno)))")
            }
            if sync { fsync(fd) }
        }
    }

    static func stopOnSignals(_ also: @escaping @Sendable () -> Void = {}) throws -> StopFlag {
        let stop = StopFlag()
        // Kept for the worker's life: the process exits when its loop ends.
        _ = try stop.setOnTerminationSignals(also)
        return stop
    }

    static let categories = ["Swift", "Linux", "Databases", "Misc"]

    // MARK: - Writer

    static func writer(_ inv: Invocation) throws {
        let author = try inv.arguments.required("author")
        let logPath = try inv.arguments.required("log")
        let seed = UInt64(try inv.arguments.integer("seed", in: 0...Int.max) ?? 1)
        let quota = try inv.arguments.integer("saves", in: 1...Int.max)
        let stop = try stopOnSignals()
        let done = (try? String(contentsOfFile: logPath, encoding: .utf8))?.split(separator: "\n").count ?? 0
        let log = try StressWorkers.Log(path: logPath, sync: true)
        var writer = StressWriter(
            author: author, context: try inv.context(author: author),
            random: Random(seed: seed &+ UInt64(done) &* 7919), n: done * 10)
        var acknowledged = done
        while !stop.isSet, quota.map({ acknowledged < $0 }) ?? true {
            // Only a save that made a transaction is acknowledged, and only after it is logged.
            guard let entry = writer.step() else { continue }
            try log.write(entry)
            acknowledged += 1
        }
    }

    // MARK: - Consumer

    static func consumer(_ inv: Invocation) throws {
        let name = try inv.arguments.required("consumer")
        let log = try StressWorkers.Log(path: try inv.arguments.required("log"), sync: false)
        let viewPath = try inv.arguments.required("view")
        let container = try inv.container()
        let registry = try inv.registry()
        let observer = try ChangeObserver(container: container, pollInterval: 0.5)
        let stop = try stopOnSignals { observer.stop() }
        let start = try registry.consumer(name)?.token
        try log.write(.object([("start", start.map { .number(Double($0.value)) } ?? .null)]))
        let view = try ViewContext(container: container, registry: registry, consumer: name)
        // A deliberate fault, to show that the checks catch a consumer that loses a transaction.
        let dropEvery = Int64(ProcessInfo.processInfo.environment["SHAREDSTORE_STRESS_DROP_EVERY"] ?? "") ?? 0
        func record(_ t: HistoryTransaction) throws {
            if dropEvery > 0, t.token.value % dropEvery == 0 { return }
            // The `storectl history` shape, with when it was committed and merged (for the report).
            guard case .object(var fields) = t.json else { return try log.write(t.json) }
            fields.append(("committed_at", .number(t.timestamp.timeIntervalSince1970)))
            fields.append(("merged_at", .number(Date().timeIntervalSince1970)))
            try log.write(.object(fields))
        }
        func marks(_ result: SyncResult) throws {
            if result.expired {
                try log.write(.object([("expired", .number(Double(result.token.value)))]))
            } else if let at = result.reloadedAt {
                try log.write(.object([("reloaded", .number(Double(at.value)))]))
            }
        }
        try view.watch(observer: observer, shouldStop: { stop.isSet }, afterSync: marks, record)
        // The final sync after the writers stopped: the view must equal a fresh fetch.
        let result = try view.sync(record)
        try marks(result)
        let lines = view.objects.values.sorted { $0.id < $1.id }.map { "\($0.id)@\($0.version)" }
        try (lines.joined(separator: "\n") + "\n").write(toFile: viewPath, atomically: true, encoding: .utf8)
        try log.write(.object([("final", .number(Double(result.token.value)))]))
    }
}

/// One writer process of `storectl stress`: a random mix of single and batch inserts, updates,
/// deletes and set-based batch operations, each logged with what it saved.
struct StressWriter {
    let author: String
    let context: ObjectContext
    var random: StressWorkers.Random
    var n: Int
    /// Known article ids to update and delete.
    var pool: [ObjectID] = []

    init(author: String, context: ObjectContext, random: StressWorkers.Random, n: Int) {
        self.author = author
        self.context = context
        self.random = random
        self.n = n
    }

    /// Makes one save; returns its log entry, or nil when it saved nothing (or failed).
    mutating func step() -> JSONValue? {
        n += 1
        do {
            // Targets come from a pool of known ids, refreshed now and then: picking one by a
            // random OFFSET each time would scan the table and slow a long soak to a crawl.
            if pool.isEmpty || n % 100 == 0 { try refreshPool() }
            let roll = pool.isEmpty ? 0 : random.below(100)
            switch roll {
            case 0..<40: return try insertLinks()
            case 90...: return try batchOperation(roll)
            default: return try updateOrDelete(roll)
            }
        } catch let e as StoreError where e.code == .objectNotFound {
            context.rollback()  // another writer deleted the target first: not a save
            pool.removeAll()
        } catch {
            context.rollback()
            FileHandle.standardError.write(Data("failed save \(n): \(error)\n".utf8))
        }
        return nil
    }

    private mutating func refreshPool() throws {
        let total = try context.count(FetchRequest("Article"))
        pool = try context.fetch(FetchRequest("Article", limit: 200, offset: random.below(max(1, total - 200)))).map(
            \.id)
        context.rollback()
    }

    private func entry(_ token: HistoryToken, _ op: String, _ objects: [JSONValue]) -> JSONValue {
        .object([("token", .number(Double(token.value))), ("op", .string(op)), ("objects", .array(objects))])
    }

    /// One link, or a few in one save.
    private mutating func insertLinks() throws -> JSONValue? {
        let count = random.below(100) < 20 ? 2 + random.below(4) : 1
        let links = (0..<count).map { i in
            ReadLater.Link(
                url: "https://stress.example/\(author)/\(n)/\(i)", title: "\(author)-\(n)-\(i)",
                category: random.below(3) == 0
                    ? nil : StressWorkers.categories[random.below(StressWorkers.categories.count)])
        }
        let temps = try ReadLater.insert(links, in: context)
        let result = try context.save()
        guard let token = result.token else { return nil }
        pool += temps.map(result.permanentID(for:))
        let logged: [JSONValue] = zip(temps, links).map { temp, link in
            .object([
                ("id", .string(result.permanentID(for: temp).description)), ("kind", .string("insert")),
                ("values", .object([("title", .string(link.title)), ("isRead", .bool(false))])),
            ])
        }
        return entry(token, links.count > 1 ? "batch" : "insert", logged)
    }

    /// A set-based batch update or delete of the links of one earlier insert of this writer
    /// (titles "<author>-<n>-<i>"): at most a handful of objects each.
    private mutating func batchOperation(_ roll: Int) throws -> JSONValue? {
        let prefix = "\(author)-\(max(1, n - 1 - random.below(50)))-"
        let result: BatchResult
        var values: [(String, JSONValue)] = []
        let isUpdate = roll < 95
        if isUpdate {
            let isRead = random.below(2) == 0
            values = [("isRead", .bool(isRead))]
            result = try context.batchUpdate(
                "Article", where: Key("title").beginsWith(prefix), set: ["isRead": .bool(isRead)])
        } else {
            result = try context.batchDelete("Article", where: Key("title").beginsWith(prefix))
        }
        guard let token = result.token else { return nil }
        let kind = isUpdate ? "update" : "delete"
        let logged: [JSONValue] = result.objectIDs.map {
            .object([("id", .string($0.description)), ("kind", .string(kind)), ("values", .object(values))])
        }
        return entry(token, isUpdate ? "batch-update" : "batch-delete", logged)
    }

    /// An update of a known article (most of the time) or its delete.
    private mutating func updateOrDelete(_ roll: Int) throws -> JSONValue? {
        let target = try context.object(with: pool[random.below(pool.count)])
        let op: String
        let logged: JSONValue
        if roll < 75 {
            op = "update"
            let values: [String: Value] = ["title": .string("\(author)-u\(n)"), "isRead": .bool(random.below(2) == 0)]
            try context.update(target.id, values)
            logged = .object([
                ("id", .string(target.id.description)), ("kind", .string("update")),
                ("values", .object(values.sorted { $0.key < $1.key }.map { ($0.key, $0.value.jsonValue) })),
            ])
        } else {
            op = "delete"
            try context.delete(target.id)
            logged = .object([
                ("id", .string(target.id.description)), ("kind", .string("delete")), ("values", .object([])),
            ])
        }
        // Nothing changed: not a save to check.
        guard let token = try context.save().token else { return nil }
        return entry(token, op, [logged])
    }
}
