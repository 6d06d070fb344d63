import Foundation
import ReadLater
import SharedStore
import Testing

/// Issue 24, point 1: `storectl top --json` as a script reads it (scenario 17 drives the screen
/// in tmux).
@Suite(.tags(.multiProcess)) struct TopTests {
    /// Another process migrates the store while top watches it: top opens it again at the new
    /// version, and the saves made since its last sample are counted, the migration's own
    /// transaction among them (top started counting again from the reopen, and lost them).
    @Test func theSavesOfTheIntervalInWhichTheStoreWasMigratedAreCounted() throws {
        let group = TemporaryGroup()
        let old = try group.open(try ReadLater.model(version: 2))
        let context = old.newContext(author: "Before")
        _ = try context.insert(
            "Article", ["title": .string("a"), "url": .string("https://t.example/a"), "createdAt": .date(Date())])
        try context.save()
        let top = try Child("storectl", ["top", "--json", "--interval", "0.2", "--group", group.path])
        defer { top.kill9() }
        try top.waitForLine(timeout: 30, "a first sample") { json($0)["model_version"] as? Int == 2 }
        // Saved at the old version, then migrated: one interval holds both.
        _ = try context.insert(
            "Article", ["title": .string("b"), "url": .string("https://t.example/b"), "createdAt": .date(Date())])
        try context.save()
        _ = try group.open()
        let line = try top.waitForLine(timeout: 30, "a sample at the new version") {
            json($0)["model_version"] as? Int == ReadLater.newestVersion
        }
        let saves = json(line)["saves_per_s"] as? [String: Double] ?? [:]
        #expect(saves["Before"] != nil && saves[MigrationHistory.author] != nil, "\(line)")
    }
}
