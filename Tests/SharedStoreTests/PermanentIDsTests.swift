import Foundation
import Testing

@testable import SharedStoreCore

/// A save's permanent ids (``PermanentIDs``) are found by bisection over the temporary keys when
/// they came in the order a context gives them, and one by one otherwise: either way each lookup
/// answers as a plain table of the same pairs would.
@Suite struct PermanentIDsTests {
    @Test(arguments: [5, 23, 2027])
    func everyLookupAnswersAsATableWould(seed: Int) {
        var random = TestRandom(state: UInt64(seed))
        let store = UUID()
        for round in 0..<60 {
            var ids = PermanentIDs(capacity: random.next(4))
            var table: [ObjectID: ObjectID] = [:]
            // Keys handed out as a context does (decreasing), or, in a third of the rounds, with
            // some out of that order (the slow path must still be right).
            let shuffled = random.chance(33)
            var key: Int64 = -1
            for n in 0..<random.next(40) {
                key -= Int64(1 + random.next(3))
                let k = shuffled && random.chance(25) ? Int64(-1 - random.next(200)) : key
                let entity = random.chance(50) ? "Article" : "Category"
                let temporary = ObjectID(storeID: store, entity: entity, primaryKey: k)
                // A pair whose temporary id is there already keeps its first answer in the table.
                if table[temporary] != nil { continue }
                let permanent = ObjectID(storeID: store, entity: entity, primaryKey: Int64(n + 1))
                ids.append(temporary, permanent)
                table[temporary] = permanent
            }
            #expect(ids.count == table.count && ids.dictionary == table, "seed \(seed) round \(round)")
            #expect(Set(ids.permanent) == Set(table.values), "seed \(seed) round \(round)")
            // Every id given, its key under the other entity, another store's, keys never given.
            for (temporary, permanent) in table {
                #expect(ids[temporary] == permanent, "seed \(seed) round \(round)")
                let other = ObjectID(
                    storeID: store, entity: temporary.entity == "Article" ? "Category" : "Article",
                    primaryKey: temporary.primaryKey)
                #expect(ids[other] == table[other], "seed \(seed) round \(round)")
                let foreign = ObjectID(storeID: UUID(), entity: temporary.entity, primaryKey: temporary.primaryKey)
                #expect(ids[foreign] == nil, "seed \(seed) round \(round)")
            }
            for k in [Int64.min, -1_000, -1, 0, 1, Int64.max] {
                let id = ObjectID(storeID: store, entity: "Article", primaryKey: k)
                #expect(ids[id] == table[id], "seed \(seed) round \(round) key \(k)")
            }
        }
    }

    @Test func resultsOfTheSamePairsAreEqualAndHashAlike() {
        let store = UUID()
        func make() -> PermanentIDs {
            var ids = PermanentIDs()
            for k in 1...3 {
                ids.append(
                    ObjectID(storeID: store, entity: "Article", primaryKey: Int64(-k)),
                    ObjectID(storeID: store, entity: "Article", primaryKey: Int64(10 + k)))
            }
            return ids
        }
        #expect(make() == make())
        #expect(make().hashValue == make().hashValue)
        var other = make()
        other.append(
            ObjectID(storeID: store, entity: "Article", primaryKey: -4),
            ObjectID(storeID: store, entity: "Article", primaryKey: 14))
        #expect(other != make())
        #expect(PermanentIDs() == PermanentIDs() && PermanentIDs().isEmpty)
    }

    /// A save result's table answers as its one-id lookup, whether made with the result (past
    /// a few inserts, so that a loop over it is not quadratic) or on request.
    @Test(arguments: [0, 1, 8, 9, 50])
    func aResultsTableAnswersAsItsLookup(inserts: Int) {
        let store = UUID()
        var ids = PermanentIDs(capacity: inserts)
        for k in 0..<inserts {
            ids.append(
                ObjectID(storeID: store, entity: "Article", primaryKey: Int64(-1 - k)),
                ObjectID(storeID: store, entity: "Article", primaryKey: Int64(100 + k)))
        }
        let result = SaveResult(token: nil, ids: ids, insertedCount: inserts, updatedCount: 0, deletedCount: 0)
        let table = result.permanentIDs
        #expect(table.count == inserts)
        for (temporary, permanent) in table { #expect(result.permanentID(for: temporary) == permanent) }
        #expect(result == SaveResult(token: nil, ids: ids, insertedCount: inserts, updatedCount: 0, deletedCount: 0))
    }
}
