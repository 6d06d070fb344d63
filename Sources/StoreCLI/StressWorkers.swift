import Dispatch
import Foundation
import ReadLater
import SharedStore

/// The processes `storectl stress` spawns: writers that log every acknowledged save to a file
/// they fsync, and consumers that log every transaction they merge.
enum StressWorkers {
    /// A small seeded generator (SplitMix64), so that a run can be replayed from its seed.
    struct Random {
        var state: UInt64
        init(seed: UInt64) { state = seed &+ 0x9E37_79B9_7F4A_7C15 }
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func below(_ n: Int) -> Int { n <= 0 ? 0 : Int(next() % UInt64(n)) }
    }

    /// Appends lines to a log; `sync` makes each line durable before it counts as written.
    final class Log {
        let fd: Int32
        let sync: Bool
        init(path: String, sync: Bool) throws {
            fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw StoreError(.fileAccess, "cannot open log \(path): \(String(cString: strerror(errno)))") }
            self.sync = sync
        }
        deinit { close(fd) }
        func write(_ value: JSONValue) throws {
            let line = Array((value.serialized + "\n").utf8)
            // One write(2) per line: a process killed around it leaves a whole line or none.
            let n = line.withUnsafeBytes { Foundation.write(fd, $0.baseAddress, $0.count) }
            guard n == line.count else { throw StoreError(.fileAccess, "cannot write log: \(String(cString: strerror(errno)))") }
            if sync { fsync(fd) }
        }
    }

    static func stopOnSignals(_ also: @escaping @Sendable () -> Void = {}) -> StopFlag {
        let stop = StopFlag()
        signal(SIGTERM, SIG_IGN)
        signal(SIGINT, SIG_IGN)
        for sig in [SIGTERM, SIGINT] {
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { stop.set(); also() }
            source.resume()
            sources.append(source)
        }
        return stop
    }
    nonisolated(unsafe) static var sources: [DispatchSourceSignal] = []

    static let categories = ["Swift", "Linux", "Databases", "Misc"]

    // MARK: - Writer

    static func writer(_ inv: Invocation) throws {
        let author = try inv.arguments.required("author")
        let logPath = try inv.arguments.required("log")
        let seed = UInt64(try inv.arguments.integer("seed", in: 0...Int.max) ?? 1)
        let quota = try inv.arguments.integer("saves", in: 1...Int.max)
        let stop = stopOnSignals()
        let done = (try? String(contentsOfFile: logPath, encoding: .utf8))?.split(separator: "\n").count ?? 0
        let log = try StressWorkers.Log(path: logPath, sync: true)
        var random = Random(seed: seed &+ UInt64(done) &* 7919)
        let context = try inv.context(author: author)
        var acknowledged = done
        var n = done * 10
        var pool: [ObjectID] = []
        while !stop.isSet, quota.map({ acknowledged < $0 }) ?? true {
            n += 1
            var logged: [JSONValue] = []
            var op = "insert"
            do {
                // Targets come from a pool of known ids, refreshed now and then: picking one by a
                // random OFFSET each time would scan the table and slow a long soak to a crawl.
                if pool.isEmpty || n % 100 == 0 {
                    let total = try context.count(FetchRequest("Article"))
                    pool = try context.fetch(FetchRequest("Article", limit: 200, offset: random.below(max(1, total - 200)))).map(\.id)
                    context.rollback()
                }
                let roll = pool.isEmpty ? 0 : random.below(100)
                if roll < 40 {
                    let links = (0..<(random.below(100) < 20 ? 2 + random.below(4) : 1)).map { i in
                        ReadLater.Link(url: "https://stress.example/\(author)/\(n)/\(i)", title: "\(author)-\(n)-\(i)",
                                       category: random.below(3) == 0 ? nil : categories[random.below(categories.count)])
                    }
                    op = links.count > 1 ? "batch" : "insert"
                    let temps = try ReadLater.insert(links, in: context)
                    let result = try context.save()
                    guard let token = result.token else { continue }
                    pool += temps.map(result.permanentID(for:))
                    logged = zip(temps, links).map { temp, link in
                        .object([("id", .string(result.permanentID(for: temp).description)), ("kind", .string("insert")),
                                 ("values", .object([("title", .string(link.title)), ("isRead", .bool(false))]))])
                    }
                    try log.write(.object([("token", .number(Double(token.value))), ("op", .string(op)), ("objects", .array(logged))]))
                    acknowledged += 1
                    continue
                }
                if roll >= 90 {
                    // Set-based batch operations on the links of one earlier insert of this writer
                    // (titles "<author>-<n>-<i>"): at most a handful of objects each.
                    let prefix = "\(author)-\(max(1, n - 1 - random.below(50)))-"
                    let result: BatchResult
                    var values: [(String, JSONValue)] = []
                    if roll < 95 {
                        op = "batch-update"
                        let isRead = random.below(2) == 0
                        values = [("isRead", .bool(isRead))]
                        result = try context.batchUpdate("Article", where: Key("title").beginsWith(prefix), set: ["isRead": .bool(isRead)])
                    } else {
                        op = "batch-delete"
                        result = try context.batchDelete("Article", where: Key("title").beginsWith(prefix))
                    }
                    guard let token = result.token else { continue }
                    let kind = op == "batch-update" ? "update" : "delete"
                    logged = result.objectIDs.map { .object([("id", .string($0.description)), ("kind", .string(kind)), ("values", .object(values))]) }
                    try log.write(.object([("token", .number(Double(token.value))), ("op", .string(op)), ("objects", .array(logged))]))
                    acknowledged += 1
                    continue
                }
                switch roll {
                case 40..<75:
                    op = "update"
                    let target = try context.object(with: pool[random.below(pool.count)])
                    let values: [String: Value] = ["title": .string("\(author)-u\(n)"), "isRead": .bool(random.below(2) == 0)]
                    try context.update(target.id, values)
                    logged = [.object([("id", .string(target.id.description)), ("kind", .string("update")),
                                       ("values", .object(values.sorted { $0.key < $1.key }.map { ($0.key, $0.value.jsonValue) }))])]
                default:
                    op = "delete"
                    let target = try context.object(with: pool[random.below(pool.count)])
                    try context.delete(target.id)
                    logged = [.object([("id", .string(target.id.description)), ("kind", .string("delete")), ("values", .object([]))])]
                }
                let result = try context.save()
                guard let token = result.token else { continue }  // nothing changed: not a save to check
                try log.write(.object([("token", .number(Double(token.value))), ("op", .string(op)), ("objects", .array(logged))]))
                acknowledged += 1
            } catch let e as StoreError where e.code == .objectNotFound {
                context.rollback()  // another writer deleted the target first: not a save
                pool.removeAll()
            } catch let e as StoreError {
                context.rollback()
                FileHandle.standardError.write(Data("failed \(op): \(e.message)\n".utf8))
            }
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
        let stop = stopOnSignals { observer.stop() }
        let start = try registry.consumer(name)?.token
        try log.write(.object([("start", start.map { .number(Double($0.value)) } ?? .null)]))
        let view = try ViewContext(container: container, registry: registry, consumer: name)
        // A deliberate fault, to show that the checks catch a consumer that loses a transaction.
        let dropEvery = Int64(ProcessInfo.processInfo.environment["SHAREDSTORE_STRESS_DROP_EVERY"] ?? "") ?? 0
        func record(_ t: HistoryTransaction) throws {
            if dropEvery > 0, t.token.value % dropEvery == 0 { return }
            try log.write(t.json)  // the `storectl history` shape
        }
        func marks(_ result: SyncResult) throws {
            if result.expired { try log.write(.object([("expired", .number(Double(result.token.value)))])) }
            else if let at = result.reloadedAt { try log.write(.object([("reloaded", .number(Double(at.value)))])) }
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
