import Foundation
import ReadLater
import SharedStore

// MARK: - Writes on real models (issue 22): a share-batch over many categories, a full model

/// `share-extension share-batch` of 1,000,000 lines over 100 categories, on the newest ReadLater
/// model, through the process: rows per second and peak resident memory. The quick run keeps the
/// full count: at 100,000 lines the process's start and open weigh a tenth of its time, and its
/// ratio read 0.77 against the full run's 0.86.
func shareBatchCategoriesCase(_ s: Settings) throws -> Report {
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let bin = executableDirectory()
    let rows = s.pick(1_000_000, 1_000_000, 2000)
    let file = dir + "/batch.tsv"
    var text = ""
    text.reserveCapacity(rows * 60)
    for i in 0..<rows { text += "https://bench.example/\(i)\tarticle number \(i)\tcategory \(i % 100)\n" }
    try text.write(toFile: file, atomically: false, encoding: .utf8)
    var runs: [ProcessFigures] = []
    var baselines: [Double] = []
    var cpuRatios: [Double] = []
    for round in 0..<max(1, min(s.rounds, 3)) {
        runs.append(
            try measureProcess(
                bin + "/share-extension", ["share-batch", file, "--json"],
                env: ["SHAREDSTORE_GROUP": dir + "/group\(round)"]))
        // The same lines through the C API, into a store SharedStore made (its tables and
        // indexes), in this process.
        let group = dir + "/baseline\(round)"
        _ = try Container(group: group, model: ReadLater.model)
        let (t0, cpu0) = (now(), Monotonic.processCPUSeconds())
        let inserted = try Baseline.shareBatch(file: file, store: group + "/Store.sqlite")
        guard inserted == rows else { throw BenchError("baseline share-batch inserted \(inserted) of \(rows)") }
        baselines.append(Double(rows) / (now() - t0))
        // In CPU time: the process's own (from its start to its end) against this process's.
        if let run = runs.last, run.cpuSeconds > 0 {
            cpuRatios.append((Monotonic.processCPUSeconds() - cpu0) / run.cpuSeconds)
        }
    }
    let seconds = median(runs.map(\.seconds))
    let ours = Double(rows) / seconds
    let baseline = median(baselines)
    return .object([
        ("case", .string("share-batch-1m-categories")), ("rows", .number(Double(rows))),
        ("categories", .number(100)), ("rows_per_s", .number(ours.rounded())),
        ("baseline_rows_per_s", .number(baseline.rounded())), ("ratio", .number(round3(ours / baseline))),
        ("peak_rss_mib", .number(round3(runs.map(\.peakMiB).max() ?? 0))), ("runs", .number(Double(runs.count))),
        ("model_version", .number(Double(ReadLater.newestVersion))),
        ("cpu_ratio", cpuRatios.isEmpty ? .null : .number(round3(median(cpuRatios)))),
    ])
}

/// The full model of `batch-insert-full-model`: links with a URL pattern, a unique URL, a title
/// with length and single-line rules, a derived canonical title (indexed), a creation date an
/// `awakeFromInsert` hook sets, and folders counting their links.
let fullModel: Model = {
    do {
        return try Model([
            Entity(
                "Folder",
                attributes: [Attribute("name", .string), Attribute.derived("linkCount", .integer, .count("links"))],
                relationships: [.toMany("links", "Link", inverse: "folder")]),
            Entity(
                "Link",
                attributes: [
                    Attribute("url", .string, pattern: #"https?://[^\s/?#\p{Cc}]+[^\s\p{Cc}]*"#),
                    Attribute("title", .string, minLength: 1, maxLength: 500, singleLine: true),
                    Attribute("createdAt", .date, optional: true),
                    Attribute.derived("searchTitle", .string, .canonical("title")),
                ],
                relationships: [.toOne("folder", "Folder", inverse: "links")], uniquenessConstraints: [["url"]],
                indexes: [Index("searchTitle"), Index("createdAt")]),
        ])
    } catch {
        preconditionFailure("full bench model: \(error)")
    }
}()

/// `batch` links of the full model per transaction, over 100 folders, against the same inserts,
/// index maintenance and counts through the C API (the plain rules checked in Swift beside it).
func batchInsertFullModelCase(_ s: Settings) throws -> Report {
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let container = try openStore(group: dir + "/group", model: fullModel)
    try container.register(
        "Link",
        EntityHooks(awakeFromInsert: { draft in
            if draft["createdAt"].isNull { try draft.set("createdAt", .date(Date())) }
        }))
    let context = container.newContext(name: "bench", author: "Bench")
    let folderTemps = try (0..<100).map { try context.insert("Folder", ["name": .string("folder \($0)")]) }
    let saved = try context.save()
    let folders = folderTemps.map { saved.permanentID(for: $0) }
    let baseline = try Baseline.FullModel(path: dir + "/baseline.sqlite", folders: 100)
    var i = 0
    func link(_ n: Int) -> (url: String, title: String) { ("https://bench.example/\(n)", "Link Number \(n)") }
    return try compare(
        "batch-insert-full-model", unit: "rows/s", rounds: s.rounds,
        ours: {
            let rows = (0..<s.batch).map { k -> [String: Value] in
                let l = link(i + k)
                return ["url": .string(l.url), "title": .string(l.title)]
            }
            let relationships = (0..<s.batch).map { k -> [String: ObjectID?] in ["folder": folders[(i + k) % 100]] }
            i += s.batch
            return try throughput(s.batch) {
                _ = try context.batchInsert("Link", rows, relationships: relationships)
            }
        },
        baseline: {
            let rows = (0..<s.batch).map { k in link(i + k) }
            let start = i
            i += s.batch
            return try throughput(s.batch) { try baseline.insert(rows, folderOf: { (start + $0) % 100 + 1 }) }
        })
}
