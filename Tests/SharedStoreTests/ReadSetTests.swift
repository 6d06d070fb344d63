import Foundation
import Testing

@testable import SharedStoreCore

/// The read set's key table, and what it keeps of two reads of one object.
extension ReadSetTests {
    /// Keys of every shape (dense runs, far apart, negative, the extremes) looked up and inserted
    /// in random order: the table answers as a dictionary does. Seeds 1–3 always, and one random
    /// seed printed.
    @Test(arguments: [1, 2, 3, Int.random(in: 4...Int(Int32.max))])
    func theKeyTableAnswersAsADictionaryDoes(seed: Int) {
        print("ReadSetTests: seed \(seed)")
        var random = TestRandom(state: UInt64(seed))
        var table = KeyTable()
        var reference: [Int64: Int] = [:]
        func key() -> Int64 {
            switch random.next(4) {
            case 0: return Int64(random.next(5000)) - 50
            case 1: return Int64.min + Int64(random.next(40))
            case 2: return Int64.max - Int64(random.next(40))
            default: return Int64(random.next(Int(Int32.max))) << 20
            }
        }
        for step in 0..<50_000 {
            let k = key()
            let found = table.find(k, orInsert: { reference.count })
            if let known = reference[k] {
                #expect(found == known, "seed \(seed) step \(step): key \(k)")
            } else {
                #expect(found == nil, "seed \(seed) step \(step): key \(k) found before it was inserted")
                reference[k] = reference.count
            }
            let probe = key()
            #expect(table[probe] == reference[probe], "seed \(seed) step \(step): lookup of \(probe)")
        }
        #expect(table.count == reference.count)
    }

    /// A changed version replaces what was read; the same version read again keeps the first
    /// read; an id of another store with the same key is not the object read.
    @Test func aReadKeepsTheFirstSnapshotOfAVersionAndTheNewestVersion() {
        let (a, b) = (UUID(), UUID())
        func snapshot(_ store: UUID, _ key: Int64, _ version: Int64, _ note: String) -> Snapshot {
            Snapshot(
                id: ObjectID(storeID: store, entity: "Item", primaryKey: key), version: version,
                values: ["note": .string(note)], relationships: [:])
        }
        var reads = ReadSet()
        reads.record((1...40).map { snapshot(a, $0, 1, "first") })
        reads.record([snapshot(a, 7, 1, "again"), snapshot(a, 8, 2, "changed")])
        #expect(reads[ObjectID(storeID: a, entity: "Item", primaryKey: 7)]?["note"] == .string("first"))
        #expect(reads[ObjectID(storeID: a, entity: "Item", primaryKey: 8)]?["note"] == .string("changed"))
        #expect(reads[ObjectID(storeID: a, entity: "Item", primaryKey: 41)] == nil)
        #expect(reads[ObjectID(storeID: b, entity: "Item", primaryKey: 7)] == nil)
        #expect(reads[ObjectID(storeID: a, entity: "Other", primaryKey: 7)] == nil)
        reads.reset()
        #expect(reads[ObjectID(storeID: a, entity: "Item", primaryKey: 7)] == nil)
    }
}
