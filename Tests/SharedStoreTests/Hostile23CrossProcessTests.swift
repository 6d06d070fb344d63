import Foundation
import ReadLater
import SharedStore
import Testing

/// Hostile review 23: a typed live query's diffs against another process's random writes.
@Suite(.tags(.multiProcess), .timeLimit(.minutes(3))) struct Hostile23CrossProcessTests {
    typealias Article = ReadLater.Records.Article

    @Test(arguments: [UInt64(23), 42])
    func diffsFromAnotherProcess(seed: UInt64) throws {
        var random = TestRandom(state: seed)
        let group = TemporaryGroup()
        let container = try group.open()
        let w = container.newContext(author: "Seed")
        for k in 0..<8 { try w.insert(ReadLater.Article(title: "s\(k)", url: "https://x.example/s\(k)")) }
        try w.save()
        let sort: [SortKey] = [.descending(\Article.title)]
        let request = FetchRequest(Article.self, sortedBy: sort, limit: 5, offset: 1)
        let query = try LiveQuery<Article>(
            container: container, registry: try TokenRegistry(group: group.path), request: request)
        var shown = try query.next()!.objects
        for step in 0..<20 {
            let ids = try container.newContext().fetch(Article.self).map { $0.id!.description }
            var args: [String]
            switch random.next(3) {
            case 0: args = ["write", "--group", group.path, "--author", "p\(step)", "--count", "1"]
            case 1:
                args = [
                    "set-title", "--group", group.path, "--id", random.pick(ids), "--title", "t\(random.word())\(step)",
                ]
            default:
                args =
                    ids.count > 2
                    ? ["delete", "--group", group.path, "--id", random.pick(ids)]
                    : ["write", "--group", group.path, "--author", "q\(step)", "--count", "1"]
            }
            let child = try Child("sharedstore-helper", args)
            #expect(try child.waitForExit() == 0)
            if let r = try query.next() {
                shown = r.diff.apply(to: shown, new: r.objects)
                #expect(shown == r.objects, "seed \(seed) step \(step)")
            }
            let fresh = try container.newContext().fetch(Article.self, sortedBy: sort, limit: 5, offset: 1)
            #expect(
                shown == fresh, "seed \(seed) step \(step) \(args[0]): \(shown.map(\.title)) vs \(fresh.map(\.title))")
            if shown != fresh { break }
        }
    }
}
