import Foundation
import ReadLater
import SharedStore

// MARK: - Reads on the product's model (issue 22): a date range, a prefix, records

/// A store of the newest ReadLater model with `rows` articles: one a second from the epoch
/// (`createdAt`), titled "article number N" (so `searchTitle` holds the same), a third read.
func fillArticles(_ container: Container, rows: Int) throws {
    let context = container.newContext(name: "fill", author: "Filler")
    var start = 0
    while start < rows {
        let end = min(rows, start + 20_000)
        try context.batch { batch in
            for i in start..<end {
                _ = try batch.insert(
                    "Article",
                    [
                        "title": .string("article number \(i)"), "url": .string("https://bench.example/\(i)"),
                        "createdAt": .date(Date(timeIntervalSince1970: Double(i))), "isRead": .bool(i % 3 == 0),
                    ], object: "row \(i)")
            }
        }
        start = end
    }
}

/// The read cases on one store of `readRows` articles: `query-range`, `query-prefix` and
/// `record-fetch`.
func articleQueryCases(_ s: Settings, only want: (String) -> Bool) throws -> [Report] {
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let container = try openStore(group: dir + "/group", model: ReadLater.model)
    try fillArticles(container, rows: s.readRows)
    let path = dir + "/group/" + Container.storeFileName
    var reports: [Report] = []
    if want("query-range") { reports.append(try queryRangeCase(s, container, path)) }
    if want("query-prefix") { reports.append(try queryPrefixCase(s, container, path)) }
    if want("record-fetch") { reports.append(try recordFetchCase(s, container)) }
    if want("query-range-typed") { reports.append(try queryRangeTypedCase(s, container)) }
    return reports
}

/// "100 articles by date range": `createdAt >= t AND createdAt < t + 100`, sorted by date, at
/// a different `t` each time, against the same SQL through the C API on the same store.
func queryRangeCase(_ s: Settings, _ container: Container, _ path: String) throws -> Report {
    let context = container.newContext()
    context.maximumReadsKept = s.readsKept
    let queries = s.pick(5000, 1000, 50)
    let span = Double(max(1, s.readRows - 100))
    func start(_ q: Int) -> Double { Double((q &* 7919) % Int(span)) }
    let baseline = try Baseline.Query.articlesByDate(path: path)
    var q = 0
    let request = { (t: Double) in
        FetchRequest(
            "Article",
            where: Key("createdAt") >= Value.date(Date(timeIntervalSince1970: t))
                && Key("createdAt") < Value.date(Date(timeIntervalSince1970: t + 100)),
            sortedBy: [Key("createdAt").ascending])
    }
    var report = try compare(
        "query-range", unit: "queries/s", rounds: s.rounds,
        ours: {
            try throughput(queries) {
                for _ in 0..<queries {
                    q += 1
                    guard try context.fetch(request(start(q))).count == 100 else { throw BenchError("short range") }
                }
            }
        },
        baseline: {
            try throughput(queries) {
                for _ in 0..<queries {
                    q += 1
                    let t = start(q)
                    guard try baseline.run([.double(t), .double(t + 100)]) == 100 else {
                        throw BenchError("short baseline range")
                    }
                }
            }
        })
    report = adding(
        report, [("rows", .number(Double(s.readRows))), ("plan", .string(try plan(container, request(0))))])
    return report
}

/// "Titles beginning with …": `searchTitle BEGINSWITH "article number N…"`, sorted by it, against
/// the same range through the C API. The prefix has two digits fewer than the store's largest
/// number: 111 articles a query at 1M (four digits) and at 100k (three) alike, so that the quick
/// run asks the full run's query.
func queryPrefixCase(_ s: Settings, _ container: Container, _ path: String) throws -> Report {
    let context = container.newContext()
    context.maximumReadsKept = s.readsKept
    let queries = s.pick(5000, 1000, 50)
    let digits = max(1, String(max(1, s.readRows - 1)).count - 2)
    let low = (1..<digits).reduce(1) { n, _ in n * 10 }
    func prefix(_ q: Int) -> String { "article number \(low + (q &* 7919) % (9 * low))" }
    let baseline = try Baseline.Query.articlesByPrefix(path: path)
    let request = { (p: String) in
        FetchRequest("Article", where: Key("searchTitle").beginsWith(p), sortedBy: [Key("searchTitle").ascending])
    }
    var q = 0
    var (ours, theirs) = (0, 0)
    var report = try compare(
        "query-prefix", unit: "queries/s", rounds: s.rounds,
        ours: {
            try throughput(queries) {
                // Both sides ask the same prefixes in each round.
                for k in 0..<queries { ours += try context.fetch(request(prefix(q + k))).count }
            }
        },
        baseline: {
            try throughput(queries) {
                defer { q += queries }
                for k in 0..<queries {
                    let p = prefix(q + k)
                    // The prefix ends in a digit: the text after every text it begins is the
                    // same prefix with the digit moved on (":" after "9").
                    let end = String(p.dropLast()) + String(UnicodeScalar((p.utf8.last ?? 0x2F) + 1))
                    theirs += try baseline.run([.text(p), .text(end)])
                }
            }
        })
    guard ours == theirs else { throw BenchError("query-prefix: \(ours) rows against the baseline's \(theirs)") }
    report = adding(
        report,
        [
            ("rows", .number(Double(s.readRows))), ("matched_per_query", .number(Double(ours / (queries * s.rounds)))),
            ("plan", .string(try plan(container, request("article number 1234")))),
        ])
    return report
}

/// 100k articles fetched as `ReadLater.Article` records, against reading the same rows through
/// `forEach` (every value touched): what decoding into a record costs, in rows per second.
func recordFetchCase(_ s: Settings, _ container: Container) throws -> Report {
    let context = container.newContext()
    context.maximumReadsKept = s.readsKept
    let rows = min(s.readRows, s.pick(100_000, 100_000, 2000))
    let request = FetchRequest("Article", sortedBy: [Key("createdAt").ascending], limit: rows)
    var report = try compare(
        "record-fetch", unit: "rows/s", rounds: s.rounds,
        ours: {
            try throughput(rows) {
                let records = try context.fetch(
                    ReadLater.Article.self, sortedBy: [Key("createdAt").ascending], limit: rows)
                guard records.count == rows else { throw BenchError("short record fetch") }
            }
        },
        baseline: {
            try throughput(rows) {
                var n = 0
                var bytes = 0
                // Every value a record holds: the id, each attribute (the nil ones too) and the
                // category.
                try context.forEach(request) { snapshot in
                    n += 1
                    bytes += snapshot.id.primaryKey > 0 ? 1 : 0
                    bytes += snapshot["title"].stringValue?.utf8.count ?? 0
                    bytes += snapshot["url"].stringValue?.utf8.count ?? 0
                    bytes += snapshot["createdAt"].dateValue == nil ? 0 : 1
                    bytes += snapshot["isRead"].boolValue == true ? 1 : 0
                    bytes += snapshot["note"].stringValue?.utf8.count ?? 0
                    bytes += snapshot["searchTitle"].stringValue?.utf8.count ?? 0
                    bytes += snapshot["tags"].stringValue?.utf8.count ?? 0
                    bytes += snapshot.relationships["category"] == nil ? 0 : 1
                }
                guard n == rows, bytes > 0 else { throw BenchError("short forEach") }
            }
        })
    report = adding(
        report,
        [("rows", .number(Double(rows))), ("baseline_is", .string("forEach over the same rows, every value read"))])
    return report
}

/// `report` with `pairs` added.
func adding(_ report: Report, _ pairs: [(String, JSONValue)]) -> Report {
    guard case .object(let existing) = report else { return report }
    return .object(existing + pairs)
}

/// The request's plan, one line.
func plan(_ container: Container, _ request: FetchRequest) throws -> String {
    try container.queryPlan(request).joined(separator: "; ")
}
