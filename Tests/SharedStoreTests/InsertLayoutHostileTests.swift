import Foundation
import SharedStore
import Testing

@testable import SharedStoreCore

/// What a hostile hook or record does to the positional inserts (a review of issue 22's rows by
/// position): values the library handed out and kept past their turn, a row a rule refuses that
/// the caller carries on from. None may crash a process or leave what was refused.
@Suite struct InsertLayoutHostileTests {
    static func model() throws -> Model {
        try Model([
            Entity(
                "Folder", attributes: [Attribute("name", .string)],
                relationships: [.toMany("items", "Link", inverse: "folder")]),
            Entity(
                "Link",
                attributes: [
                    Attribute("url", .string), Attribute("title", .string), Attribute("score", .integer, default: 7),
                    Attribute.derived("canonical", .string, .canonical("title")),
                ],
                relationships: [.toOne("folder", "Folder", inverse: "items")], keptCounts: [KeptCount("all")]),
            Entity("Small", attributes: [Attribute("x", .integer), Attribute("y", .string, optional: true)]),
        ])
    }

    final class DraftStash: @unchecked Sendable { var draft: ObjectDraft? }

    /// A hook keeps a draft of one entity and another's hook puts it in place of its own: the
    /// insert is refused, naming the hook, and the batch saves nothing.
    @Test func aHookThatSwapsInAnotherObjectsDraftIsRefused() throws {
        let dir = TemporaryGroup()
        let container = try dir.open(try Self.model())
        let stash = DraftStash()
        try container.register("Small", EntityHooks(awakeFromInsert: { stash.draft = $0 }))
        try container.register("Link", EntityHooks(willSave: { d in if let kept = stash.draft { d = kept } }))
        let context = container.newContext(name: "w", author: "W")
        for byLayout in [false, true] {
            expectStoreError(.invalidArgument, containing: "willSave of Link put another object's draft") {
                try context.batch { b in
                    _ = try b.insert("Small", ["x": .integer(1)])
                    if byLayout {
                        let layout = try b.layout("Link", attributes: ["url", "title"])
                        _ = try b.insert(layout, values: [.string("https://a.example"), .string("t")])
                    } else {
                        _ = try b.insert("Link", ["url": .string("https://a.example"), "title": .string("t")])
                    }
                }
            }
        }
        #expect(try context.count(FetchRequest("Small")) == 0)
        #expect(try context.count(FetchRequest("Link")) == 0)
    }

    final class ContainerStash: @unchecked Sendable { var keyed: KeyedEncodingContainer<Kept.CodingKeys>? }
    static let kept = ContainerStash()

    /// A record that keeps its encoding container.
    struct Kept: Record {
        static let entityName = "Small"
        var id: ObjectID?
        var x: Int
        enum CodingKeys: String, CodingKey { case x }
        init(x: Int) { self.x = x }
        init(from decoder: any Decoder) throws { throw StoreError(.invalidArgument, "not decoded") }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(x, forKey: .x)
            if InsertLayoutHostileTests.kept.keyed == nil { InsertLayoutHostileTests.kept.keyed = c }
        }
    }

    /// A record that writes through the container another record kept.
    struct Meddler: Record {
        static let entityName = "Small"
        var id: ObjectID?
        var x: Int
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(x, forKey: .x)
            if var kept = InsertLayoutHostileTests.kept.keyed { try kept.encode(99, forKey: .x) }
        }
    }

    /// A container used after its record's row was taken (by another record of the batch, or
    /// after the batch) writes nowhere: each record stores what it encoded itself.
    @Test func aContainerKeptPastItsRecordWritesNowhere() throws {
        let dir = TemporaryGroup()
        let container = try dir.open(try Self.model())
        let context = container.newContext(name: "w", author: "W")
        try context.batch { b in
            _ = try b.insert(Kept(x: 1))
            _ = try b.insert(Meddler(x: 2))
            _ = try b.insert(Kept(x: 3))
        }
        var keptContainer = try #require(Self.kept.keyed)
        try keptContainer.encode(5, forKey: .x)
        let xs = try context.fetch(FetchRequest("Small", sortedBy: [SortKey("x")])).map { $0["x"] }
        #expect(xs == [.integer(1), .integer(2), .integer(3)])
    }

    /// A row a rule refuses is not stored, though the caller catches the error and carries on
    /// with the batch: its count, history and values are the good rows' alone.
    @Test func aRowARuleRefusesStaysOutThoughTheBatchGoesOn() throws {
        let dir = TemporaryGroup()
        let container = try dir.open(try Self.model())
        let saved = ProtectedBox()
        try container.register(
            "Link",
            EntityHooks(
                rules: [ValidationRule("a score below 100", { ($0["score"].integerValue ?? 0) < 100 })],
                didSave: { saved.add($0["title"].stringValue ?? "") }))
        let context = container.newContext(name: "w", author: "W")
        var refused = 0
        let result = try context.batch { b in
            let layout = try b.layout("Link", attributes: ["url", "title", "score"])
            for n in 0..<6 {
                do {
                    let score: Int64 = n.isMultiple(of: 2) ? 5 : 500
                    _ = try b.insert(
                        layout, values: [.string("https://r.example/\(n)"), .string("T\(n)"), .integer(score)])
                } catch let error as StoreError where error.code == .validation {
                    refused += 1
                }
            }
        }
        #expect(refused == 3)
        #expect(result.count == 3)
        let titles = try context.fetch(FetchRequest("Link", sortedBy: [SortKey("title")])).map { $0["title"] }
        #expect(titles == [.string("T0"), .string("T2"), .string("T4")])
        #expect(try context.count(FetchRequest("Link")) == 3)
        #expect(saved.all == ["T0", "T2", "T4"])
        var inserted = 0
        try container.history(HistoryRequest()) { ts in inserted += ts.flatMap(\.changes).count { $0.kind == .insert } }
        #expect(inserted == 3)
        let checks = StoreVerifier.verify(container: container, registry: try TokenRegistry(group: dir.path))
        let counts = try #require(checks.first { $0.name == "kept-counts" })
        #expect(counts.ok, "\(counts.detail)")
    }

    /// A target of another store is named as such.
    @Test func aTargetOfAnotherStoreIsNamedSo() throws {
        let (one, two) = (TemporaryGroup(), TemporaryGroup())
        let (a, b) = (try one.open(try Self.model()), try two.open(try Self.model()))
        let other = b.newContext(name: "w", author: "W")
        let folder = try other.insert("Folder", ["name": .string("f")])
        let foreign = try other.save().permanentID(for: folder)
        expectStoreError(.objectNotFound, containing: "an object of another store") {
            try a.newContext(name: "w", author: "W").batch { batch in
                let layout = try batch.layout("Link", attributes: ["url", "title"], relationships: ["folder"])
                _ = try batch.insert(
                    layout, values: [.string("https://x.example"), .string("x")], relationships: [foreign])
            }
        }
    }
}

/// Titles a `didSave` hook saw, from whatever thread.
final class ProtectedBox: @unchecked Sendable {
    private let lock = NSLock()
    private var titles: [String] = []
    func add(_ title: String) { lock.withLock { titles.append(title) } }
    var all: [String] { lock.withLock { titles } }
}
