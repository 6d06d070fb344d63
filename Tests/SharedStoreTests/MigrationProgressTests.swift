import Foundation
import ReadLater
import SharedStore
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
        _ = try Container.$migrationProgress.withValue({ phase, of, name in
            seen.withLock { $0.append("\(phase)/\(of) \(name)") }
        }) { try Container(group: group.path, model: ReadLater.model) }
        let phases = seen.withLock { $0 }
        #expect(phases.count == 10, "\(phases)")
        #expect(phases.first == "1/10 renames" && phases.last == "10/10 kept counts", "\(phases)")
        // An open that migrates nothing tells nothing.
        seen.withLock { $0 = [] }
        _ = try Container.$migrationProgress.withValue({ _, _, name in seen.withLock { $0.append(name) } }) {
            try Container(group: group.path, model: ReadLater.model)
        }
        #expect(seen.withLock { $0 }.isEmpty)
    }
}
