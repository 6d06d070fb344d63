import Foundation
import ReadLater
import SharedStore
import Testing

/// Issue 13's derived attributes: stored columns every save keeps right in its own transaction.
/// The invariant: each holds what computing it again from what it derives from gives.
@Suite struct DerivedTests {
    static let model: Model = {
        do {
            return try Model([
                Entity(
                    "Folder",
                    attributes: [
                        Attribute("name", .string), Attribute.derived("noteCount", .integer, .count("notes")),
                        Attribute.derived("totalSize", .integer, .sum("notes", of: "size")),
                    ],
                    relationships: [.toMany("notes", "Note", inverse: "folder", deleteRule: .nullify)]),
                Entity(
                    "Note",
                    attributes: [
                        Attribute("title", .string), Attribute("size", .integer, default: 1),
                        Attribute.derived("folderName", .string, .related("folder", "name")),
                        Attribute.derived("searchTitle", .string, .canonical("title")),
                        Attribute.derived("updatedAt", .date, .now),
                    ],
                    relationships: [.toOne("folder", "Folder", inverse: "notes")],
                    indexes: [Index("searchTitle")]),
            ])
        } catch {
            preconditionFailure("\(error)")
        }
    }()

    /// Every derived attribute against a recomputation from the objects, in Swift.
    func check(_ container: Container, _ label: String) throws {
        let c = container.newContext()
        let folders = try c.fetch(FetchRequest("Folder"))
        let notes = try c.fetch(FetchRequest("Note"))
        for f in folders {
            let mine = notes.filter { $0.relationships["folder"] == f.id }
            #expect(f["noteCount"] == .integer(Int64(mine.count)), "\(label): \(f.id) noteCount")
            #expect(
                f["totalSize"] == .integer(mine.reduce(0) { $0 + ($1["size"].integerValue ?? 0) }),
                "\(label): \(f.id) totalSize")
        }
        for n in notes {
            let folder = folders.first { $0.id == n.relationships["folder"] }
            #expect(n["folderName"] == (folder?["name"] ?? .null), "\(label): \(n.id) folderName")
            let canonical = n["title"].stringValue.map {
                $0.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil).lowercased()
            }
            #expect(n["searchTitle"] == canonical.map(Value.string) ?? .null, "\(label): \(n.id) searchTitle")
            #expect(n["updatedAt"].dateValue != nil, "\(label): \(n.id) updatedAt")
        }
        #expect(try container.derivedMismatchCount() == 0, "\(label): the SQL recomputation agrees")
    }

    @Test(.tags(.multiProcess), arguments: [1, 2, 3])
    func derivedAttributesAlwaysHoldWhatTheyDeriveFrom(seed: Int) throws {
        let group = TemporaryGroup()
        let container = try group.open(Self.model)
        let context = container.newContext(author: "A")
        context.mergePolicy = .objectTrump
        let other = try group.open(Self.model).newContext(author: "B")
        other.mergePolicy = .objectTrump
        var random = TestRandom(state: UInt64(seed))
        for step in 0..<70 {
            try randomChange(step, &random, context, other)
            try check(container, "seed \(seed) step \(step)")
        }
    }

    private func randomChange(
        _ step: Int, _ random: inout TestRandom, _ c: ObjectContext, _ other: ObjectContext
    ) throws {
        let titles = ["Café", "CAFE", "Naïve", "zebra", "Émile"]
        let folders = try c.fetch(FetchRequest("Folder")).map(\.id)
        let notes = try c.fetch(FetchRequest("Note")).map(\.id)
        c.rollback()
        let folder = { (r: inout TestRandom) in folders.isEmpty ? nil : folders[r.next(folders.count)] }
        let note = { (r: inout TestRandom) in notes.isEmpty ? nil : notes[r.next(notes.count)] }
        switch random.next(11) {
        case 0:
            // A folder and notes in one save, the notes pointing at the folder inserted with them.
            let f = try c.insert("Folder", ["name": .string("F\(step)")])
            for _ in 0..<(1 + random.next(3)) {
                try c.insert(
                    "Note", ["title": .string(titles[random.next(5)]), "size": .integer(Int64(random.next(9)))],
                    relationships: ["folder": f])
            }
        case 1:
            try c.batchInsert(
                "Note", (0..<3).map { _ in ["title": .string(titles[random.next(5)]), "size": .integer(2)] },
                relationships: (0..<3).map { _ in ["folder": folder(&random)] })
        case 2:
            if let n = note(&random) {
                try c.update(n, ["size": .integer(Int64(random.next(20))), "title": .string(titles[random.next(5)])])
            }
        case 3:
            if let n = note(&random) { try c.update(n, [:], relationships: ["folder": folder(&random)]) }
        case 4:
            if let f = folder(&random) { try c.update(f, ["name": .string("R\(step)")]) }
        case 5:
            if let f = folder(&random) { try c.delete(f) }
        case 6:
            if let n = note(&random) { try c.delete(n) }
        case 7:
            try c.batchUpdate("Note", where: Key("size") < 5, set: ["size": .integer(Int64(random.next(7)))])
        case 8:
            try c.batchDelete("Note", where: Key("searchTitle") == "cafe" && Key("size") > 3)
        case 9:
            try c.batch { batch in
                let f = try batch.insert("Folder", ["name": .string("B\(step)")], object: "folder")
                _ = try batch.insert(
                    "Note", ["title": "Ünï", "size": 4], relationships: ["folder": f], object: "note")
            }
        default:
            // Another connection's saves, merged into this one's reads.
            if let n = note(&random) {
                try other.update(n, ["size": .integer(9)], relationships: ["folder": folder(&random)])
            }
            if let f = folder(&random) { try other.update(f, ["name": .string("O\(step)")]) }
            if other.hasChanges { try other.save() }
        }
        if c.hasChanges { try c.save() }
    }

    /// A context that read a folder before another process changed a note it sums, then saves
    /// the folder and the note under every merge policy: the counts and sums hold what the
    /// stored notes give. Under `.overwrite` the context's whole object used to be written back,
    /// its stale sum included, and the sum came out wrong by the other process's change. A
    /// duplicate of a unique folder under `.overwrite` used to reset its count to the default.
    @Test(arguments: [MergePolicy.overwrite, .objectTrump, .storeTrump, .rollback])
    func derivedValuesHoldWhenAPolicyResolvesAConflict(policy: MergePolicy) throws {
        let model = try Model([
            Entity(
                "Folder",
                attributes: [
                    Attribute("name", .string), Attribute("prio", .integer, optional: true),
                    Attribute.derived("noteCount", .integer, .count("notes")),
                    Attribute.derived("totalSize", .integer, .sum("notes", of: "size")),
                ],
                relationships: [.toMany("notes", "Note", inverse: "folder", deleteRule: .nullify)],
                uniquenessConstraints: [["name"]]),
            Entity(
                "Note",
                attributes: [
                    Attribute("title", .string), Attribute("size", .integer, default: 1),
                    Attribute.derived("searchTitle", .string, .canonical("title")),
                ],
                relationships: [.toOne("folder", "Folder", inverse: "notes")]),
        ])
        let group = TemporaryGroup()
        let container = try group.open(model)
        let setup = container.newContext(author: "S")
        let f = try setup.insert("Folder", ["name": "F"])
        let n = try setup.insert("Note", ["title": "n", "size": 5], relationships: ["folder": f])
        let saved = try setup.save()
        let (folder, note) = (saved.permanentID(for: f), saved.permanentID(for: n))
        let a = container.newContext(author: "A")
        a.mergePolicy = policy
        _ = try a.object(with: note)
        _ = try a.object(with: folder)
        let b = try group.open(model).newContext(author: "B")
        try b.update(note, ["size": 40])
        try b.save()
        try a.update(note, ["title": "Über"])
        try a.update(folder, ["prio": 2])
        try a.save()
        let reader = container.newContext()
        let size = try reader.object(with: note)["size"]
        #expect(try reader.object(with: folder)["totalSize"] == size, "\(policy): the sum of the one note")
        #expect(try reader.object(with: folder)["noteCount"] == 1, "\(policy)")
        #expect(try container.derivedMismatchCount() == 0, "\(policy): the SQL recomputation agrees")
        // A second folder of the same unique name: the two become one, its notes still counted.
        let c = container.newContext(author: "C")
        c.mergePolicy = policy
        try c.insert("Folder", ["name": "F"])
        try c.save()
        #expect(try reader.object(with: folder)["noteCount"] == 1, "\(policy): a duplicate keeps the count")
        #expect(try reader.object(with: folder)["totalSize"] == size, "\(policy): a duplicate keeps the sum")
        #expect(try container.derivedMismatchCount() == 0, "\(policy): after the duplicate")
    }

    @Test func aSaveCannotSetADerivedAttributeButCanSortAndFilterOnIt() throws {
        let container = try TemporaryGroup().open(Self.model)
        let c = container.newContext(author: "A")
        expectStoreError(.validation) { try c.insert("Note", ["title": "x", "searchTitle": "y"]) }
        expectStoreError(.validation) { try c.batchInsert("Folder", [["name": "f", "noteCount": 3]]) }
        try c.insert("Note", ["title": "Émile"])
        try c.insert("Note", ["title": "apple"])
        let id = try c.insert("Note", ["title": "Zoë"])
        let saved = try c.save()
        expectStoreError(.validation) { try c.update(saved.permanentID(for: id), ["updatedAt": .date(Date())]) }
        let sorted = try c.fetch(FetchRequest("Note", sortedBy: [Key("searchTitle").ascending])).map { $0["title"] }
        #expect(sorted == ["apple", "Émile", "Zoë"])
        let plan = try container.queryPlan(FetchRequest("Note", where: Key("searchTitle") == "emile")).joined()
        #expect(plan.contains("ss_index_Note_searchTitle"), "\(plan)")
    }

    @Test func aMigrationAddsADerivedAttributeComputedForEveryObject() throws {
        let group = TemporaryGroup()
        var plain = Self.model.entities
        plain[0].attributes.removeAll { $0.isDerived }
        plain[1].attributes.removeAll { $0.isDerived }
        plain[1].indexes = []
        let v1 = try group.open(try Model(plain))
        let c = v1.newContext(author: "A")
        let f = try c.insert("Folder", ["name": "Inbox"])
        for t in ["Ça", "va"] { try c.insert("Note", ["title": .string(t), "size": 3], relationships: ["folder": f]) }
        try c.save()
        let v2 = try group.open(try Model(version: 2, Self.model.entities))
        let folder = try #require(try v2.newContext().fetch(FetchRequest("Folder")).first)
        #expect(folder["noteCount"] == 2 && folder["totalSize"] == 6)
        let titles = try v2.newContext().fetch(FetchRequest("Note", sortedBy: [Key("searchTitle").ascending]))
        #expect(titles.map { $0["searchTitle"] } == ["ca", "va"] && titles.allSatisfy { $0["folderName"] == "Inbox" })
    }
}

extension DerivedTests {
    /// The ReadLater targets as processes writing at once: the derived searchTitle and
    /// articleCount hold what computing them again gives.
    @Test(.tags(.multiProcess)) func targetsWritingAtOnceKeepDerivedAttributesRight() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        try runAtOnce(
            (0..<6).map { i in
                (
                    "share-extension",
                    [
                        "share", "--group", group.path, "--url", "https://d.example/\(i)", "--title", "Ünïcode \(i)",
                        "--category", i % 2 == 0 ? "Even" : "Odd",
                    ]
                )
            })
        let ids = try container.newContext().fetch(FetchRequest("Article", sortedBy: [Key("title").ascending])).map(
            \.id)
        try runAtOnce([
            ("main-app", ["delete", "--group", group.path, ids[0].description]),
            (
                "sharedstore-helper",
                ["set-title", "--group", group.path, "--id", ids[1].description, "--title", "Éclair"]
            ),
        ])
        #expect(try container.derivedMismatchCount() == 0)
        let counts = try container.newContext().aggregate("Category", [.max("articleCount")], groupedBy: ["label"])
        #expect(counts.map(\.values) == [[2], [3]], "Even lost one article, Odd kept three")
        let renamed = try container.newContext().object(with: ids[1])
        #expect(renamed["searchTitle"] == "eclair")
    }
}

extension DerivedTests {
    @Test func aKeptCountCannotReadACountOfOtherObjects() {
        expectStoreError(.invalidModel) {
            var entities = Self.model.entities
            entities[0].keptCounts = [KeptCount("busy", where: Key("noteCount") > 0)]
            _ = try Model(entities)
        }
    }
}
