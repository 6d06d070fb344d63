import Foundation
import ReadLater
import SharedStore
import Testing

@testable import SharedStoreCore

/// A transaction's inserts kept as runs (``InsertRuns``, the first held in place): whatever the
/// order of entities, keys and global ids, the runs give back every insert as it was appended,
/// and the history bytes are those of the same inserts recorded one by one.
@Suite struct InsertRunsTests {
    @Test(arguments: [7, 41, 2028])
    func runsGiveBackEveryInsertInOrder(seed: Int) throws {
        var random = TestRandom(state: UInt64(seed))
        let container = try TemporaryGroup().open()
        let entities = container.model.entities.count
        for round in 0..<80 {
            var runs = InsertRuns()
            var plain: [(entity: Int, pk: Int64, gid: UUID)] = []
            var pk = Int64(random.next(1000))
            var gid = GlobalID.make()
            for _ in 0..<random.next(12) {
                // Mostly the next key and the next global id of the same entity (one run), now
                // and then a jump in one of the three.
                let entity = random.chance(20) ? random.next(entities) : (plain.last?.entity ?? 0)
                pk = random.chance(15) ? pk &+ Int64(2 + random.next(5)) : pk &+ 1
                gid = random.chance(15) ? GlobalID.make() : (GlobalID.successor(of: gid) ?? GlobalID.make())
                runs.append(entity, pk, gid)
                plain.append((entity, pk, gid))
            }
            let message = Comment(rawValue: "seed \(seed) round \(round)")
            #expect(runs.count == plain.count && runs.isEmpty == plain.isEmpty, message)
            let changes = runs.changes
            #expect(changes.count == plain.count, message)
            for (c, p) in zip(changes, plain) {
                #expect(
                    c.kind == .insert && c.entity == p.entity && c.primaryKey == p.pk && c.globalID == p.gid, message)
            }
            #expect(runs.runs.reduce(0) { $0 + $1.count } == plain.count, message)
            let numbering = container.numbering
            #expect(HistoryCodec.encode(runs, numbering) == HistoryCodec.encode(changes, numbering), message)
        }
    }

    /// A context keeps the storage of its insert row between saves, but none of the values: a
    /// large value saved is not held by the context until its next save.
    @Test func aContextKeepsNoValueOfItsLastInsertBetweenSaves() throws {
        let container = try TemporaryGroup().open()
        let context = container.newContext(author: "A")
        try context.insert(
            "Article", ["title": .string(String(repeating: "x", count: 400)), "url": "https://k.example"])
        try context.save()
        #expect(context.spareRow.values.allSatisfy { $0 == nil })
        #expect(!context.spareRow.values.isEmpty, "the storage is kept")
        // A save that fails (a title over its 500 characters, after a valid insert) keeps none
        // either.
        try context.insert("Article", ["title": "fine", "url": "https://l.example"])
        let long = try context.insert("Article", ["title": .string(String(repeating: "y", count: 600))])
        #expect(throws: StoreError.self) { try context.save() }
        #expect(!context.spareRow.values.isEmpty && context.spareRow.values.allSatisfy { $0 == nil })
        try context.delete(long)
        #expect(context.spareRow.targets.allSatisfy { $0 == nil })
        try context.insert("Category", ["label": "Swift"])
        try context.save()
        #expect(context.spareRow.values.allSatisfy { $0 == nil })
        // The valid insert of the failed save is still pending, and saved with the next.
        #expect(try container.newContext().count(FetchRequest("Article")) == 2)
    }
}
