import Foundation
import ReadLater
import SharedStore
import SharedStoreSQLite
import Testing

/// A context finds its unsaved inserts by their temporary ids (to update or delete them, to
/// relate them) by the order it gave the ids in, with no table kept per insert: checked against
/// a plain list of what should be pending, over random mixes of entities, updates, deletes and
/// saves.
@Suite struct PendingInsertTests {
    @Test(arguments: [3, 17, 2026])
    func unsavedInsertsAreFoundByTheirTemporaryIdsWhateverTheMix(seed: Int) throws {
        let container = try TemporaryGroup().open()
        let context = container.newContext(author: "A")
        var random = TestRandom(state: UInt64(seed))
        // What should be pending, in insert order: the id and the title or label it holds.
        var pending: [(id: ObjectID, text: String)] = []
        var gone: [ObjectID] = []
        var saved: [String: Int] = ["Article": 0, "Category": 0]
        for step in 0..<400 {
            switch random.next(10) {
            case 0..<4:
                let article = random.chance(60)
                let text = "s\(seed)-\(step)"
                let id =
                    article
                    ? try context.insert(
                        "Article", ["title": .string(text), "url": .string("https://p.example/\(step)")])
                    : try context.insert("Category", ["label": .string(text)])
                pending.append((id, text))
            case 4..<6 where !pending.isEmpty:
                let i = random.next(pending.count)
                let text = "u\(seed)-\(step)"
                try context.update(
                    pending[i].id, [pending[i].id.entity == "Article" ? "title" : "label": .string(text)])
                pending[i].text = text
            case 6..<8 where !pending.isEmpty:
                let i = random.next(pending.count)
                try context.delete(pending[i].id)
                gone.append(pending.remove(at: i).id)
            case 8 where !gone.isEmpty:
                // An id this context gave and took back is unknown to it, whatever lies around it.
                let id = random.pick(gone)
                #expect(throws: StoreError.self, "seed \(seed) step \(step)") {
                    try context.update(id, [id.entity == "Article" ? "title" : "label": "x"])
                }
            case 9 where !pending.isEmpty:
                // The same temporary key under the other entity names nothing this context inserted.
                let id = random.pick(pending).id
                let other = ObjectID(
                    storeID: id.storeID, entity: id.entity == "Article" ? "Category" : "Article",
                    primaryKey: id.primaryKey)
                #expect(throws: StoreError.self, "seed \(seed) step \(step)") { try context.delete(other) }
                if random.chance(30) {
                    let result = try context.save()
                    for p in pending { saved[p.id.entity, default: 0] += 1 }
                    #expect(result.permanentIDs.count == pending.count, "seed \(seed) step \(step)")
                    // One id at a time (by bisection) as in the table; an id it did not insert is
                    // its own.
                    let table = result.permanentIDs
                    for p in pending {
                        #expect(
                            result.permanentID(for: p.id) == table[p.id] && !result.permanentID(for: p.id).isTemporary,
                            "seed \(seed) step \(step)")
                    }
                    for id in gone + [other] { #expect(result.permanentID(for: id) == id, "seed \(seed) step \(step)") }
                    let titles = try pending.map { p in
                        (try context.object(with: result.permanentIDs[p.id] ?? p.id), p)
                    }
                    for (object, p) in titles {
                        #expect(
                            (object["title"].stringValue ?? object["label"].stringValue) == p.text,
                            "seed \(seed) step \(step)")
                    }
                    pending = []
                    gone = []
                }
            default: break
            }
        }
        _ = try context.save()
        for p in pending { saved[p.id.entity, default: 0] += 1 }
        let reader = container.newContext()
        for (entity, count) in saved {
            #expect(try reader.count(FetchRequest(entity)) == count, "seed \(seed): \(entity)")
        }
    }
}

/// What a connection remembers of the schema (``SQLiteConnection/hasTableRemembered(_:)``): the
/// name asked last answers without a lookup, and is forgotten with the rest.
@Suite struct RememberedTableTests {
    @Test func aRememberedTableIsForgottenWithTheOthers() throws {
        let group = TemporaryGroup()
        try FileManager.default.createDirectory(atPath: group.path, withIntermediateDirectories: true)
        let c = try SQLiteConnection(path: group.path + "/t.sqlite", busyTimeoutMilliseconds: 1000)
        #expect(!c.hasTableRemembered("ss_mirror"))
        try c.execute("CREATE TABLE ss_mirror(key TEXT)")
        // Remembered until the owner clears what it knows (as a store does after a schema change).
        #expect(!c.hasTableRemembered("ss_mirror"))
        #expect(!c.hasTableRemembered("ss_mirror"))
        #expect(!c.hasTableRemembered("other"))
        c.knownTables.removeAll()
        #expect(c.hasTableRemembered("ss_mirror"))
        #expect(!c.hasTableRemembered("other"))
        try c.execute("DROP TABLE ss_mirror")
        c.knownTables = [:]
        #expect(!c.hasTableRemembered("ss_mirror"))
    }
}
