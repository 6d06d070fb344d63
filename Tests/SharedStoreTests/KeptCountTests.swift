import Foundation
import ReadLater
import SharedStore
import Testing

/// Kept counts (issue 11's widget figure): counts every save keeps up to date in its own
/// transaction. The invariant: a kept count always equals counting the table.
@Suite struct KeptCountTests {
    static let model: Model = {
        do {
            return try Model([
                Entity(
                    "Folder", attributes: [Attribute("name", .string)],
                    relationships: [.toMany("notes", "Note", inverse: "folder", deleteRule: .cascade)]),
                Entity(
                    "Note",
                    attributes: [
                        Attribute("title", .string), Attribute("done", .bool, default: false),
                        Attribute("rank", .integer, optional: true),
                    ], relationships: [.toOne("folder", "Folder", inverse: "notes")],
                    keptCounts: [
                        KeptCount("all"), KeptCount("open", where: Key("done") == false),
                        KeptCount("hot", where: Key("rank") >= 5 && Key("title").contains("x", .caseInsensitive)),
                        KeptCount("unranked", where: Key("rank") == nil),
                    ]),
            ])
        } catch {
            preconditionFailure("\(error)")
        }
    }()

    /// Each kept count, read (one row) and counted (a scan).
    func kept(_ context: ObjectContext) throws -> [String: [Int]] {
        var result: [String: [Int]] = [:]
        for k in try #require(Self.model.entity(named: "Note")).keptCounts {
            let request = FetchRequest("Note", where: k.condition)
            result[k.name] = [try context.count(request), try context.fetch(request).count]
        }
        context.rollback()
        return result
    }

    @Test(.tags(.multiProcess), arguments: [1, 2, 3])
    func aKeptCountAlwaysEqualsCountingTheTable(seed: Int) throws {
        let group = TemporaryGroup()
        let container = try group.open(Self.model)
        let context = container.newContext(author: "A")
        context.mergePolicy = .objectTrump
        let other = try group.open(Self.model).newContext(author: "B")
        var random = TestRandom(state: UInt64(seed))
        for step in 0..<80 {
            try randomChange(step, &random, context, other)
            for (name, pair) in try kept(context) {
                #expect(
                    pair[0] == pair[1], "seed \(seed) step \(step): kept count \(name) \(pair[0]), counted \(pair[1])")
            }
        }
        let checks = StoreVerifier.verify(container: container, registry: try TokenRegistry(group: group.path))
        let counts = try #require(checks.first { $0.name == "kept-counts" })
        #expect(counts.ok, "\(counts.detail)")
    }

    private func note(_ random: inout TestRandom, _ step: Int) -> [String: Value] {
        let titles = ["x", "X1", "plain", "box", "none"]
        return [
            "title": .string("\(titles[random.next(titles.count)])\(step)"), "done": .bool(random.next(2) == 0),
            "rank": random.next(3) == 0 ? .null : .integer(Int64(random.next(10))),
        ]
    }

    private func randomChange(
        _ step: Int, _ random: inout TestRandom, _ context: ObjectContext, _ other: ObjectContext
    ) throws {
        let notes = try context.fetch(FetchRequest("Note")).map(\.id)
        let folders = try context.fetch(FetchRequest("Folder")).map(\.id)
        let pick = { (r: inout TestRandom) in notes.isEmpty ? nil : notes[r.next(notes.count)] }
        switch random.next(10) {
        case 0:
            try context.batchInsert("Note", (0..<(1 + random.next(20))).map { _ in note(&random, step) })
        case 1:
            // Inserted, then changed and partly deleted in the same save.
            let a = try context.insert("Note", note(&random, step))
            let b = try context.insert("Note", note(&random, step))
            try context.update(a, ["done": .bool(random.next(2) == 0), "rank": .integer(7), "title": "xx"])
            try context.delete(b)
            if let id = pick(&random) { try context.update(id, ["rank": .null]) }
        case 2:
            if let id = pick(&random) { try context.update(id, note(&random, step)) }
        case 3:
            if let id = pick(&random) { try context.delete(id) }
        case 4:
            // A folder with notes, made in one streamed batch; later deleted with a cascade.
            try context.batch { batch in
                let f = try batch.insert("Folder", ["name": .string("f\(step)")], object: "folder")
                for i in 0..<(1 + random.next(5)) {
                    _ = try batch.insert("Note", note(&random, step), relationships: ["folder": f], object: "note \(i)")
                }
            }
        case 5:
            if !folders.isEmpty { try context.delete(folders[random.next(folders.count)]) }
        case 6:
            try context.batchUpdate("Note", where: Key("rank") < .integer(Int64(random.next(6))), set: ["done": true])
        case 7:
            try context.batchDelete("Note", where: Key("title").beginsWith(random.next(2) == 0 ? "box" : "plain"))
        case 8:
            // Another container deletes what this one then updates: object trump brings it back.
            if let id = pick(&random) {
                _ = try context.object(with: id)
                try other.delete(id)
                try other.save()
                try context.update(id, ["done": .bool(random.next(2) == 0)])
            }
        default:
            if let id = pick(&random) { try other.update(id, ["done": .bool(random.next(2) == 0), "title": "x!"]) }
            try other.save()
        }
        if context.hasChanges { try context.save() }
    }

    @Test func aKeptCountReadsOnlyItsEntitysAttributes() {
        for condition in [Key("folder") == nil, Key("folder.name") == "a"] {
            expectStoreError(.invalidModel) {
                _ = try Model([
                    Entity(
                        "Folder", attributes: [Attribute("name", .string)],
                        relationships: [.toMany("notes", "Note", inverse: "folder")]),
                    Entity(
                        "Note", attributes: [Attribute("title", .string)],
                        relationships: [.toOne("folder", "Folder", inverse: "notes")],
                        keptCounts: [KeptCount("n", where: condition)]),
                ])
            }
        }
    }

    @Test func aModelWithoutTheStoresKeptCountsCannotOpenIt() throws {
        let group = TemporaryGroup()
        _ = try group.open(Self.model)
        let without = try Model(
            Self.model.entities.map { e in
                var e = e
                e.keptCounts = []
                return e
            })
        expectStoreError(.modelMismatch) { _ = try group.open(without) }
    }

    /// Targets as processes, writing at once: the widget's numbers (kept counts) equal counting.
    @Test(.tags(.multiProcess)) func targetsWritingAtOnceKeepTheWidgetsCounts() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        try runAtOnce(
            (0..<6).map {
                (
                    "share-extension",
                    ["share", "--group", group.path, "--url", "https://k.example/\($0)", "--title", "k\($0)"]
                )
            })
        let ids = try container.newContext().fetch(FetchRequest("Article")).map(\.id)
        try runAtOnce(
            ids.prefix(3).map { ("widget", ["toggle-read", "--group", group.path, $0.description]) }
                + [("main-app", ["delete", "--group", group.path, ids[5].description])])
        let show = try Child("widget", ["show", "--json", "--group", group.path])
        try show.waitForLines(1)
        #expect(try show.waitForExit() == 0)
        let summary = json(show.lines[0])
        #expect(!summary.isEmpty, "\(show.lines)")
        let context = container.newContext()
        #expect(summary["total"] as? Int == (try context.fetch(FetchRequest("Article"))).count)
        #expect(summary["total"] as? Int == 5)
        #expect(
            summary["unread"] as? Int
                == (try context.fetch(FetchRequest("Article", where: Key("isRead") == false))).count)
        #expect(summary["unread"] as? Int == 2)
    }
}
