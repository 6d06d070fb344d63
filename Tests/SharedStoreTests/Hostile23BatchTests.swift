import Foundation
import ReadLater
import SharedStore
import Testing

/// Hostile review 23: typed batchInsert on the pipeline path (>= 512 records).
@Suite(.timeLimit(.minutes(5))) struct Hostile23BatchTests {
    typealias Article = ReadLater.Records.Article
    typealias Category = ReadLater.Records.Category

    static func articles(_ n: Int, category: ObjectID? = nil) -> [Article] {
        (0..<n).map { k in
            let title: String = "Título \(k)"
            let url: String = "https://h.example/\(k)"
            let date = Date(timeIntervalSince1970: Double(k))
            let note: String? = k % 3 == 0 ? nil : "n"
            return Article(title: title, url: url, createdAt: date, isRead: k % 2 == 0, note: note, category: category)
        }
    }

    /// A record whose encode(to:) throws on one row.
    struct Thrower: Record {
        static let entityName = "Article"
        var id: ObjectID?
        var title: String
        var url: String
        var createdAt: Date
        struct Boom: Error {}
        func encode(to encoder: any Encoder) throws {
            if title == "boom" { throw Boom() }
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(title, forKey: .title)
            try c.encode(url, forKey: .url)
            try c.encode(createdAt, forKey: .createdAt)
        }
    }

    /// A record with a property the entity lacks.
    struct Extra: Record {
        static let entityName = "Article"
        var id: ObjectID?
        var title: String
        var url: String
        var createdAt: Date
        var bogus: Int?
    }

    /// A record with a UInt64 stored into an integer attribute (via the Fixtures model "Thing.i").
    struct Big: Record {
        static let entityName = "Thing"
        var id: ObjectID?
        var i: UInt64?
    }

    func message(_ body: () throws -> Void) -> String {
        do {
            try body()
            return "<nothing thrown>"
        } catch let e as StoreError {
            return e.message + " [code .\(e.code), validation.object: \(e.validation?.object ?? "nil")]"
        } catch {
            return "<non-StoreError> \(error)"
        }
    }

    // The same bad record, in a small (10) and a large (600) batch, must be named by its row.
    @Test func encodeThrowingNamesItsRowInLargeBatch() throws {
        let container = try TemporaryGroup().open()
        let context = container.newContext(author: "H")
        func batch(_ n: Int, bad: Int) -> [Thrower] {
            (0..<n).map { k in
                Thrower(title: k == bad ? "boom" : "t\(k)", url: "https://h.example/\(k)", createdAt: Date())
            }
        }
        let small = message { try context.batchInsert(batch(10, bad: 4)) }
        let large = message { try context.batchInsert(batch(600, bad: 599)) }
        #expect(small.contains("batch row 5"), "small: \(small)")
        #expect(large.contains("batch row 600"), "large: \(large)")
        #expect(try context.count(Article.self) == 0)
    }

    /// A record type with a property its entity lacks is refused at its first record (the type,
    /// not one value, is wrong), naming that row, in small and large batches alike.
    @Test func unknownPropertyNamesItsRowInLargeBatch() throws {
        let container = try TemporaryGroup().open()
        let context = container.newContext(author: "H")
        func batch(_ n: Int, bad: Int) -> [Extra] {
            (0..<n).map { k in
                Extra(title: "t\(k)", url: "https://h.example/\(k)", createdAt: Date(), bogus: k == bad ? 1 : nil)
            }
        }
        let small = message { try context.batchInsert(batch(10, bad: 9)) }
        let large = message { try context.batchInsert(batch(700, bad: 699)) }
        for text in [small, large] {
            #expect(
                text.contains("batch row 1)") && text.contains("bogus") && text.contains(".unknownProperty"), "\(text)")
        }
        #expect(try context.count(Article.self) == 0)
    }

    @Test func outOfRangeNamesItsRowInLargeBatch() throws {
        let container = try TemporaryGroup().open(Fixtures.allTypes)
        let context = container.newContext(author: "H")
        func batch(_ n: Int, bad: Int) -> [Big] {
            (0..<n).map { k in Big(i: k == bad ? UInt64.max : UInt64(k)) }
        }
        let small = message { try context.batchInsert(batch(10, bad: 2)) }
        let large = message { try context.batchInsert(batch(513, bad: 512)) }
        #expect(small.contains("batch row 3"), "small: \(small)")
        #expect(large.contains("batch row 513"), "large: \(large)")
        #expect(try context.count(FetchRequest("Thing")) == 0)
    }

    @Test func missingRelationshipAndDuplicateInLargeBatch() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let context = container.newContext(author: "H")
        let cat = try context.insert(Category(name: "c"))
        try context.save()
        let catID = try context.fetch(Category.self).first!.id!
        _ = cat
        try context.delete(catID)
        try context.save()
        var arts = Self.articles(1024)
        arts[1023].category = catID
        let m = message { try context.batchInsert(arts) }
        #expect(m.contains("batch row 1024"), "\(m)")
        var cats = (0..<700).map { Category(name: "n\($0)") }
        cats[699].name = "n0"
        let d = message { try context.batchInsert(cats) }
        #expect(d.contains("batch row 700"), "\(d)")
        #expect(try context.count(Article.self) == 0)
        #expect(try context.count(Category.self) == 0)
    }

    // Derived values, kept counts and counts of categories after 511/512/513/1024 records equal
    // those of one-by-one inserts.
    @Test(arguments: [511, 512, 513, 64 * 17, 64 * 16 + 1])
    func derivedAndKeptCounts(n: Int) throws {
        let group = TemporaryGroup()
        let container = try group.open(ReadLater.Records.model)
        let context = container.newContext(author: "H")
        try context.insert(Category(name: "big"))
        try context.insert(Category(name: "small"))
        try context.save()
        let big = try context.fetchOne(Category.self, where: \Category.name == "big")!.id!
        let small = try context.fetchOne(Category.self, where: \Category.name == "small")!.id!
        let result = try context.batchInsert(Self.articles(n, category: big))
        for a in Self.articles(n, category: small) { try context.insert(a) }
        try context.save()
        let context2 = container.newContext()
        let all = try context2.fetch(Article.self)
        #expect(all.count == 2 * n)
        let bigs = all.filter { $0.category == big }.sorted { $0.createdAt < $1.createdAt }
        let smalls = all.filter { $0.category == small }.sorted { $0.createdAt < $1.createdAt }
        #expect(bigs.map(\.id) == result.objectIDs)
        for (a, b) in zip(bigs, smalls) {
            var b2 = b
            b2.id = a.id
            b2.category = a.category
            #expect(a == b2)
        }
        #expect(bigs.allSatisfy { $0.searchTitle?.hasPrefix("titulo") == true })
        let cats = try context2.fetch(Category.self)
        #expect(cats.allSatisfy { $0.articleCount == n }, "\(cats.map { ($0.name, $0.articleCount) })")
        #expect(try context2.count(Article.self) == 2 * n)
        #expect(try context2.count(Article.self, where: \Article.isRead == false) == all.filter { !$0.isRead }.count)
        // History: one transaction for the batch with n inserts.
        var txs: [HistoryTransaction] = []
        try container.history(HistoryRequest()) { txs += $0 }
        let batchTx = txs.first { tx in tx.changes.filter { $0.kind == .insert }.count == n }
        #expect(
            batchTx != nil,
            "\(txs.map { tx in Self.kinds(tx) })"
        )
    }

    // Two large batches from two threads on two contexts at once.
    @Test func concurrentLargeBatches() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let results = Protected<[BatchResult]>([])
        let errors = Protected<[String]>([])
        let finished = DispatchSemaphore(value: 0)
        let threads = (0..<2).map { t in
            Thread {
                defer { finished.signal() }
                let context = container.newContext(author: "T\(t)")
                do {
                    let arts = Self.articles(5000).map { a -> Article in
                        var b = a
                        b.url += "/\(t)"
                        return b
                    }
                    let r = try context.batchInsert(arts)
                    results.withLock { $0.append(r) }
                } catch {
                    errors.withLock { $0.append("\(error)") }
                }
            }
        }
        threads.forEach { $0.start() }
        // Each thread says when it is done; the test waits for both, up to a deadline.
        let deadline = DispatchTime.now() + .seconds(120)
        for _ in threads { _ = finished.wait(timeout: deadline) }
        #expect(errors.withLock { $0 }.isEmpty, "\(errors.withLock { $0 })")
        let rs = results.withLock { $0 }
        #expect(rs.count == 2)
        let context = container.newContext()
        #expect(try context.count(Article.self) == 10000)
        for r in rs {
            let fetched = try r.objectIDs.map { try context.record(Article.self, with: $0) }
            let suffix = fetched.first!.url.split(separator: "/").last!
            #expect(fetched.allSatisfy { $0.url.hasSuffix("/\(suffix)") })
            #expect(fetched.map(\.createdAt) == (0..<5000).map { Date(timeIntervalSince1970: Double($0)) })
        }
    }

    // Inside container.write {} (async).
    @Test func largeBatchInsideAsyncWrite() async throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let arts = Self.articles(2000)
        let r = try await container.write(author: "A") { context in try context.batchInsert(arts) }
        #expect(r.count == 2000)
        let n = try await container.read { try $0.count(Article.self) }
        #expect(n == 2000)
    }

    // A large batch with pending changes in the context ("needs no pending changes; does not
    // touch them"): the batch is written, the pending insert stays pending and unsaved.
    @Test func largeBatchLeavesPendingChangesAlone() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let context = container.newContext(author: "H")
        try context.insert(Category(name: "pending"))
        let r = try context.batchInsert(Self.articles(100_000))
        #expect(r.count == 100_000)
        #expect(try container.newContext().count(Category.self) == 0)
        try context.save()
        #expect(try container.newContext().count(Category.self) == 1)
    }

    /// A slow encoder with an error in the first record must fail at once, not after all.
    struct Slow: Record {
        static let entityName = "Article"
        var id: ObjectID?
        var title: String
        var url: String
        var createdAt: Date
        func encode(to encoder: any Encoder) throws {
            Thread.sleep(forTimeInterval: 0.0005)
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(title, forKey: .title)
            try c.encode(url, forKey: .url)
            try c.encode(createdAt, forKey: .createdAt)
        }
    }

    @Test func slowEncoderErrorInFirstRecordFailsFast() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let context = container.newContext(author: "H")
        var rows = (0..<50_000).map { Slow(title: "t\($0)", url: "https://h.example/\($0)", createdAt: Date()) }
        rows[0].title = ""  // minLength 1
        let start = Date()
        let m = message { try context.batchInsert(rows) }
        let elapsed = Date().timeIntervalSince(start)
        #expect(m.contains("batch row 1"))
        #expect(elapsed < 5, "a bad first record took \(elapsed) s")
    }

    @TaskLocal static var tenant: String = "none"

    /// encode(to:) that reads a task-local value (a tenant prefix, a clock override).
    struct Tenanted: Record {
        static let entityName = "Article"
        var id: ObjectID?
        var title: String
        var url: String
        var createdAt: Date
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode("\(Hostile23BatchTests.tenant):\(title)", forKey: .title)
            try c.encode(url, forKey: .url)
            try c.encode(createdAt, forKey: .createdAt)
        }
    }

    /// What `batchInsert(_:)` documents: a small batch is encoded by the writer (task-local
    /// values are seen), a large one on a second thread (they are not).
    @Test func taskLocalSeenByEncodeInLargeBatch() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let context = container.newContext(author: "H")
        try Self.$tenant.withValue("acme") {
            try context.batchInsert(
                (0..<10).map { Tenanted(title: "s\($0)", url: "https://h.example/s\($0)", createdAt: Date()) })
            try context.batchInsert(
                (0..<600).map { Tenanted(title: "l\($0)", url: "https://h.example/l\($0)", createdAt: Date()) })
        }
        let titles = try context.fetch(Article.self).map(\.title)
        #expect(titles.filter { $0.hasPrefix("acme:s") }.count == 10, "the writer's encoding sees task-locals")
        #expect(titles.filter { $0.hasPrefix("none:l") }.count == 600, "the second thread's does not (documented)")
    }

    struct BigPlain: Record {
        static let entityName = "Thing"
        var id: ObjectID?
        var i: UInt64
    }

    @Test func outOfRangePlainUInt64NamesItsRow() throws {
        let container = try TemporaryGroup().open(Fixtures.allTypes)
        let context = container.newContext(author: "H")
        #expect(message { try context.batchInsert([BigPlain(i: 5)]) } == "<nothing thrown>")
        #expect(message { try context.batchInsert([Big(i: 5)]) } == "<nothing thrown>")
        let optional = message { try context.batchInsert((0..<10).map { Big(i: $0 == 4 ? .max : UInt64($0)) }) }
        #expect(optional.contains("batch row 5") && optional.contains("larger than"), "\(optional)")
        let small = message { try context.batchInsert((0..<10).map { BigPlain(i: $0 == 2 ? .max : UInt64($0)) }) }
        let large = message { try context.batchInsert((0..<513).map { BigPlain(i: $0 == 512 ? .max : UInt64($0)) }) }
        #expect(small.contains("batch row 3"), "small: \(small)")
        #expect(large.contains("batch row 513"), "large: \(large)")
    }

    // Memory: 1,000,000 small records; the peak RSS growth must stay bounded (records array itself
    // is the caller's).
    @Test(.enabled(if: ProcessInfo.processInfo.environment["H23_MILLION"] != nil))
    func millionRecords() throws {
        let container = try TemporaryGroup().open(Fixtures.allTypes)
        let context = container.newContext(author: "H")
        let rows = (0..<1_000_000).map { Big(i: UInt64($0)) }
        func maxRSS() -> Int {
            var u = rusage()
            getrusage(RUSAGE_SELF.rawValue, &u)
            return u.ru_maxrss
        }
        let before = maxRSS()
        let r = try context.batchInsert(rows)
        #expect(r.count == 1_000_000)
        #expect(maxRSS() - before < 512 * 1024, "peak RSS grew by \(maxRSS() - before) KiB")
    }

    /// Under object trump, a batch repeating a stored unique name: small and large batches must
    /// agree (both refuse it today, naming row 1; save() under object trump would merge it).
    @Test func duplicatesUnderObjectTrumpSmallVsLarge() throws {
        func run(_ n: Int) throws -> (String, Int) {
            let container = try TemporaryGroup().open(ReadLater.Records.model)
            let context = container.newContext(author: "H")
            context.mergePolicy = .objectTrump
            try context.insert(Category(name: "n0"))
            try context.save()
            let m = message { try context.batchInsert((0..<n).map { Category(name: "n\($0)") }) }
            return (m, try context.count(Category.self))
        }
        let small = try run(500)
        let large = try run(520)
        #expect(small.0 == large.0 && small.1 == large.1)
    }

    /// A relationship to an object of the wrong entity, or to a temporary id, at the last row.
    @Test func badRelationshipTargets() throws {
        let container = try TemporaryGroup().open(ReadLater.Records.model)
        let context = container.newContext(author: "H")
        try context.insert(Article(title: "a", url: "https://x.example/a"))
        try context.save()
        let articleID = try context.fetchOne(Article.self)!.id!
        for n in [10, 600] {
            var rows = Self.articles(n)
            rows[n - 1].category = articleID
            let wrong = message { try context.batchInsert(rows) }
            let other = container.newContext(author: "T")
            let temp = try other.insert(Category(name: "temp"))
            rows[n - 1].category = temp
            let tmp = message { try context.batchInsert(rows) }
            #expect(wrong.contains("batch row \(n)") && tmp.contains("batch row \(n)"))
        }
        #expect(try context.count(Article.self) == 1)
    }
}

extension Hostile23BatchTests {
    /// How many changes of each kind and entity a transaction holds.
    static func kinds(_ tx: HistoryTransaction) -> [String: Int] {
        tx.changes.map { "\($0.kind) \($0.objectID.entity)" }.reduce(into: [String: Int]()) { $0[$1, default: 0] += 1 }
    }
}
