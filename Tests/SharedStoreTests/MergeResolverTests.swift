import Foundation
import SharedStore
import Testing

@testable import SharedStoreCore

/// The merge resolver alone: for each of Core Data's five policies, what an update of an object
/// another save changed or deleted meanwhile becomes (the merge policy tests run them through
/// real saves and processes).
@Suite struct MergeResolverTests {
    let model = Fixtures.allTypes
    let storeID = UUID()

    var thing: Entity { get throws { try model.entity("Thing") } }

    /// What the context read (version 1) and what the store holds now (version 2: another save
    /// changed `s`).
    func snapshots() -> (read: Snapshot, current: Snapshot) {
        let id = ObjectID(storeID: storeID, entity: "Thing", primaryKey: 1)
        let read = Snapshot(id: id, version: 1, values: ["s": .string("a"), "i": .integer(1)], relationships: [:])
        let current = Snapshot(
            id: id, version: 2, values: ["s": .string("theirs"), "i": .integer(1)], relationships: [:])
        return (read, current)
    }

    /// The context's save: `s` and `i` changed.
    let mine = PropertyChanges(values: ["s": .string("mine"), "i": .integer(7)], relationships: [:])

    func update(_ policy: MergePolicy) throws -> MergeResolver.Update {
        let (read, current) = snapshots()
        return MergeResolver(policy: policy).update(try thing, read: read, current: current, mine)
    }

    @Test func anUnchangedObjectIsWrittenAsSavedUnderEveryPolicy() throws {
        let (read, _) = snapshots()
        for policy in [MergePolicy.error, .rollback, .storeTrump, .objectTrump, .overwrite] {
            guard
                case .write(let changes) = MergeResolver(policy: policy).update(
                    try thing, read: read, current: read, mine)
            else {
                Issue.record("\(policy): not written")
                continue
            }
            #expect(changes.values == mine.values, "\(policy)")
        }
    }

    @Test func storeTrumpKeepsTheirPropertyAndWritesTheRest() throws {
        guard case .write(let changes) = try update(.storeTrump) else { return #expect(Bool(false)) }
        #expect(changes.values == ["i": .integer(7)])
    }

    @Test func objectTrumpWritesEverythingItChanged() throws {
        guard case .write(let changes) = try update(.objectTrump) else { return #expect(Bool(false)) }
        #expect(changes.values == mine.values)
    }

    @Test func overwriteWritesTheWholeObjectAsTheContextSawIt() throws {
        guard case .write(let changes) = try update(.overwrite) else { return #expect(Bool(false)) }
        #expect(changes.values["s"] == .string("mine"))
        #expect(changes.values["i"] == .integer(7))
        // Every other attribute is written as read (nil there: the context read no value).
        #expect(Set(changes.values.keys) == Set(try thing.attributes.map(\.name)))
    }

    @Test func rollbackSkipsAndErrorReportsEachPropertyThreeWays() throws {
        guard case .skip = try update(.rollback) else { return #expect(Bool(false)) }
        guard case .conflict(let conflict) = try update(.error) else { return #expect(Bool(false)) }
        #expect(conflict.versionRead == 1)
        #expect(conflict.versionStored == 2)
        let s = conflict.properties.first { $0.name == "s" }
        #expect(s?.read == .string("a"))
        #expect(s?.stored == .string("theirs"))
        #expect(s?.saving == .string("mine"))
    }

    @Test func anUpdateOfADeletedObjectStaysDeletedFailsOrComesBack() {
        let (read, _) = snapshots()
        for (policy, expected) in [
            (MergePolicy.error, "conflict"), (.rollback, "skip"), (.storeTrump, "skip"), (.objectTrump, "restore"),
            (.overwrite, "restore"),
        ] {
            let outcome: String
            switch MergeResolver(policy: policy).deleted(read: read) {
            case .skip: outcome = "skip"
            case .restore: outcome = "restore"
            case .conflict(let c):
                outcome = "conflict"
                #expect(c.deletedInStore)
            }
            #expect(outcome == expected, "\(policy)")
        }
    }

    @Test func aDuplicateInsertKeepsTheStoredObjectOrUpdatesIt() throws {
        let values: [String: Value] = ["s": .string("new")]
        for policy in [MergePolicy.error, .storeTrump, .rollback] {
            guard case .keepStored = MergeResolver(policy: policy).duplicate(try thing, values) else {
                Issue.record("\(policy): not kept")
                continue
            }
        }
        guard case .update(let trump) = MergeResolver(policy: .objectTrump).duplicate(try thing, values) else {
            return #expect(Bool(false))
        }
        #expect(trump == values)
        guard case .update(let all) = MergeResolver(policy: .overwrite).duplicate(try thing, values) else {
            return #expect(Bool(false))
        }
        #expect(all["s"] == .string("new"))
        #expect(all["b"] == .bool(true), "overwrite: the defaults for the rest")
    }
}
