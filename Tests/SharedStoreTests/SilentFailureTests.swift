import Foundation
import ReadLater
import SharedStore
import SharedStoreMirror
import SharedStorePostgres
import SharedStoreSupport
import Testing

@testable import SharedStoreCore

/// The smaller silent failures of issue 19: text that reorders or breaks lines, a registry
/// that lost its consumers, a migration race, a lock others can write, and what a following
/// mirror says when it cannot run.
@Suite struct SilentFailureTests {
    /// U+2028, U+2029 and the bidi controls are refused in single-line fields, like the other
    /// controls, and JSON escapes them.
    @Test(.tags(.multiProcess), arguments: ["\u{2028}", "\u{2029}", "\u{202A}", "\u{202E}", "\u{2066}", "\u{2069}"])
    func separatorsAndBidiControlsAreRefusedInSingleLineFields(character: String) throws {
        let group = TemporaryGroup()
        let share = try Child(
            "share-extension",
            ["share", "--group", group.path, "--url", "https://x.example", "--title", "a\(character)b"])
        #expect(try share.waitForExit() == 1)
        #expect(TextSafety.visible("a\(character)b").unicodeScalars.count > 3)
        #expect(!JSONValue.string("a\(character)b").serialized.contains(character))
        #expect(JSONValue.string("a\(character)b").serialized.contains("\\u"))
    }

    /// A 0-byte `tokens.lmdb` beside a store that had consumers is a lost registry: the
    /// targets say so, verify fails, and `storectl repair-registry` starts one they accept.
    @Test(.tags(.multiProcess)) func anEmptiedRegistryIsReportedAsDamaged() throws {
        let group = TemporaryGroup()
        let arguments = ["--group", group.path]
        #expect(
            try Child("share-extension", ["share", "--url", "https://x.example", "--title", "x"] + arguments)
                .waitForExit() == 0)
        #expect(try Child("main-app", ["list"] + arguments).waitForExit() == 0)
        #expect(try Child("widget", ["show"] + arguments).waitForExit() == 0)
        let registry = group.path + "/tokens.lmdb"
        try Data().write(to: URL(fileURLWithPath: registry))
        try? FileManager.default.removeItem(atPath: registry + "-lock")
        let list = try Child("main-app", ["list"] + arguments)
        #expect(try list.waitForExit() == 1)
        let verify = try Child("storectl", ["verify", "--json"] + arguments)
        #expect(try verify.waitForExit() == 1)
        #expect(verify.lines.contains { $0.contains("\"check\":\"registry\",\"ok\":false") })
        let repair = try Child("storectl", ["repair-registry", "--json"] + arguments)
        #expect(try repair.waitForExit() == 0)
        #expect(repair.lines.first?.contains("\"moved\":null") == false)
        #expect(try Child("main-app", ["list"] + arguments).waitForExit() == 0)
    }

    /// Two `storectl migrate` at once: one migrates and prints its steps, the other says another
    /// process did; neither fails.
    @Test(.tags(.multiProcess)) func twoMigrationsAtOnceOneRunsTheOtherSaysSo() throws {
        let group = TemporaryGroup()
        do {
            let old = try group.open(try ReadLater.model(version: 1))
            try Fixtures.saveArticles(old.newContext(author: "A"), count: 3)
        }
        let both = try (0..<2).map { _ in try Child("storectl", ["migrate", "--group", group.path, "--json"]) }
        for c in both { #expect(try c.waitForExit() == 0) }
        let finals = both.compactMap { $0.lines.last.map(json) }
        #expect(finals.filter { $0["migrated"] as? Bool == true }.count == 1)
        for c in both where c.lines.last?.contains("\"migrated\":false") == true {
            #expect(!c.lines.contains { $0.contains("\"step\"") }, "the loser printed a plan it did not run")
        }
    }
}
