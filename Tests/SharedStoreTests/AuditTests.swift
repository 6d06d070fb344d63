import Foundation
import ReadLater
import SharedStore
import Testing

/// Issue 24, point 2: `storectl audit` names what it finds in a group directory, as a process
/// would see it (the scenario `16-audit.sh` plants the rest of the risks).
@Suite(.tags(.multiProcess)) struct AuditTests {
    typealias Article = ReadLater.Records.Article

    /// `storectl audit --json` of `group` with `arguments`: its exit status and findings.
    func audit(_ group: TemporaryGroup, _ arguments: [String] = []) throws -> (Int32, [[String: Any]]) {
        let child = try Child("storectl", ["audit", "--group", group.path, "--json"] + arguments)
        let status = try child.waitForExit()
        let findings = child.lines.compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        return (status, findings)
    }

    @Test func quarantinedMirrorRowsAreARisk() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let context = container.newContext(author: "A")
        try context.insert(Article(title: "a", url: "https://q.example/1"))
        try context.save()
        var (status, findings) = try audit(group)
        #expect(status == 0 && findings.isEmpty, "a healthy group: \(findings)")
        try container.prepareMirroring()
        try container.quarantineMirrorRow(
            MirrorQuarantine(
                sequence: 7, origin: UUID(), token: 3, reason: "Category label is required",
                at: Date().timeIntervalSince1970
            ))
        (status, findings) = try audit(group)
        #expect(status == 1)
        let found = findings.first { $0["risk"] as? String == "mirror-quarantine" }
        #expect((found?["evidence"] as? String)?.contains("1 mirror rows quarantined") == true, "\(findings)")
        #expect((found?["fix"] as? String)?.contains("--retry-quarantined") == true)
    }

    /// A consumer registered under the mirror's name that is far behind is a lagging mirror.
    @Test func aMirrorFarBehindIsARisk() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let registry = try TokenRegistry(group: group.path)
        try registry.register("Mirror")
        try registry.advance("Mirror", to: try container.currentToken())
        let context = container.newContext(author: "A")
        for n in 0..<5 {
            try context.insert(Article(title: "m\(n)", url: "https://m.example/\(n)"))
            try context.save()
        }
        let (status, findings) = try audit(group, ["--mirror-lag", "3"])
        #expect(status == 1)
        let found = findings.first { $0["risk"] as? String == "mirror-behind" }
        #expect((found?["evidence"] as? String)?.contains("5 transactions") == true, "\(findings)")
    }
}
