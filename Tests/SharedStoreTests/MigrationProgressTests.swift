import Foundation
import ReadLater
import SharedStore
import SharedStoreSQLite
import SharedStoreSupport
import Testing

/// Issue 24, point 3: a migration tells its phases as they start, so that `storectl migrate` (and
/// any app) can show where a long one is.
@Suite struct MigrationProgressTests {
    @Test func aMigrationReportsEachPhaseInOrder() throws {
        let group = TemporaryGroup()
        let old = try group.open(try ReadLater.model(version: 1))
        let context = old.newContext(author: "A")
        _ = try context.insert("Article", ["title": "t", "url": "https://m.example/1", "createdAt": .date(Date())])
        try context.save()
        let seen = Protected<[String]>([])
        _ = try Container.withMigrationProgress({ p in
            if p.total == nil { seen.withLock { $0.append("\(p.phase)/\(p.phases) \(p.name)") } }
        }) { try Container(group: group.path, model: ReadLater.model) }
        let phases = seen.withLock { $0 }
        #expect(phases.count == 10, "\(phases)")
        #expect(phases.first == "1/10 renames" && phases.last == "10/10 kept counts", "\(phases)")
        // An open that migrates nothing tells nothing.
        seen.withLock { $0 = [] }
        _ = try Container.withMigrationProgress({ p in seen.withLock { $0.append(p.name) } }) {
            try Container(group: group.path, model: ReadLater.model)
        }
        #expect(seen.withLock { $0 }.isEmpty)
    }

    /// A phase that goes over a table's rows tells how many are done, in ranges, up to all of
    /// them; what it computes is what one statement over the table computed (every derived value
    /// holds, `storectl verify` passes), with ids far apart too.
    @Test func aPhaseOverATableTellsItsRowsAsItGoes() throws {
        let group = TemporaryGroup()
        let old = try group.open(try ReadLater.model(version: 2))
        let rows = (0..<150_000).map { n -> [String: Value] in
            ["title": .string("Title \(n)"), "url": .string("https://m.example/\(n)"), "createdAt": .date(Date())]
        }
        let context = old.newContext(author: "A")
        _ = try context.batchInsert("Article", rows)
        // Ids far apart: one near the largest an id may be.
        let far = try context.insert(
            "Article", ["title": "Far", "url": "https://m.example/far", "createdAt": .date(Date())])
        try context.save()
        let low = try context.insert(
            "Article", ["title": "Low", "url": "https://m.example/low", "createdAt": .date(Date())])
        try context.save()
        try SQLiteConnection(path: group.storePath, busyTimeoutMilliseconds: 1000).execute(
            "UPDATE Article SET Z_PK = 9223372036854775000 WHERE Z_PK = \(far.primaryKey)")
        try SQLiteConnection(path: group.storePath, busyTimeoutMilliseconds: 1000).execute(
            "UPDATE Article SET Z_PK = -9223372036854775000 WHERE Z_PK = \(low.primaryKey)")
        let seen = Protected<[MigrationProgress]>([])
        let migrated = try Container.withMigrationProgress({ p in seen.withLock { $0.append(p) } }) {
            try Container(group: group.path, model: ReadLater.model)
        }
        let derived = seen.withLock { $0 }.filter { $0.name == "derived values" && $0.total != nil }
        #expect(derived.count >= 3, "\(derived)")
        #expect(derived.allSatisfy { $0.total == 150_002 && $0.done <= 150_002 })
        #expect(zip(derived, derived.dropFirst()).allSatisfy { $0.done <= $1.done })
        #expect(derived.last?.done == 150_002)
        #expect(derived.first?.done == 0)
        let checks = StoreVerifier.verify(container: migrated, registry: nil, registryProblem: "none here")
        #expect(checks.filter { !$0.ok }.map(\.name) == ["registry"], "\(checks.filter { !$0.ok })")
        let reader = migrated.newContext()
        let found = try reader.fetch(FetchRequest("Article", where: Key("searchTitle") == "far"))
        #expect(found.count == 1)
    }
}
