import Foundation
import SharedStore
import SharedStoreSQLite
import Testing

@testable import SharedStoreCore

/// The query builder alone: the SQL each kind of condition becomes, and what a fetch selects
/// checked against a reference written in Swift over random objects and conditions.
@Suite struct QueryBuilderTests {
    let model = Fixtures.allTypes

    func build(_ entity: String, _ condition: Condition) throws -> (sql: String, bindings: [SQLValue]) {
        var builder = QueryBuilder(model: model, entity: try model.entity(entity), storeID: UUID())
        let sql = try builder.sql(condition)
        return (sql, builder.bindings)
    }

    @Test func equalityIsNullSafeAndNilBecomesIsNull() throws {
        #expect(try build("Thing", Key("s") == Value.null).sql == #"(t0."s" IS NULL)"#)
        #expect(try build("Thing", Key("s") != Value.null).sql == #"(t0."s" IS NOT NULL)"#)
        let equal = try build("Thing", Key("i") == 3)
        #expect(equal.sql == #"(t0."i" IS ?)"#)
        #expect(equal.bindings == [.integer(3)])
        #expect(try build("Thing", Key("i") != 3).sql == #"(t0."i" IS NOT ?)"#)
    }

    /// A comparison stays plain (an index serves it) where a NULL drops the row as a 0 would, and
    /// is made 0 under a NOT, where a NULL would leave the row undecided.
    @Test func orderingIsPlainWhereNullCannotMatterAndDecidedUnderNot() throws {
        let less = try build("Thing", Key("i") < 3)
        #expect(less.sql == #"(t0."i" < ?)"#)
        #expect(less.bindings == [.integer(3)])
        #expect(try build("Thing", !(Key("i") < 3)).sql == #"(NOT coalesce(t0."i" < ?, 0))"#)
        #expect(try build("Thing", !(!(Key("i") < 3))).sql == #"(t0."i" < ?)"#)
        #expect(throws: StoreError.self) { try build("Thing", Key("i") < Value.null) }
        #expect(try build("Thing", Key("i").among([])).sql == "0")
        #expect(try build("Thing", Key("i").among([.integer(1), .integer(2)])).sql == #"(t0."i" IN (?,?))"#)
        #expect(
            try build("Thing", !Key("i").among([.integer(1)])).sql == #"(NOT coalesce(t0."i" IN (?), 0))"#)
        #expect(
            try build("Thing", Key("i").between(.integer(1), .integer(2))).sql == #"(t0."i" BETWEEN ? AND ?)"#)
        // ALL tests its condition under a NOT inside the subquery, whatever is outside it.
        let all = try build("Folder", Key("notes").all(Key("text") < "m")).sql
        #expect(all.contains(#"NOT coalesce(t0s1."text" < ?, 0)"#), "\(all)")
        let any = try build("Folder", !Key("notes").any(Key("text") < "m")).sql
        #expect(any.contains(#"AND (t0s1."text" < ?)"#), "\(any)")
    }

    /// BEGINSWITH with no option is a range of the column; `==` with none is an equality.
    @Test func aPrefixIsARangeAndTheEndOfTheRangeIsTheNextText() throws {
        let begins = try build("Thing", Key("s").beginsWith("ab"))
        #expect(begins.sql == #"(t0."s" >= ? AND t0."s" < ?)"#)
        #expect(begins.bindings == [.text("ab"), .text("ac")])
        #expect(try build("Thing", Key("s").beginsWith("")).sql == #"(t0."s" IS NOT NULL)"#)
        #expect(try build("Thing", Key("s").equals("x")).sql == #"(t0."s" IS ?)"#)
        #expect(try build("Thing", Key("s").beginsWith("ab", .caseInsensitive)).sql.contains("ss_strop"))
        #expect(QueryBuilder.textAfterPrefix("a\u{D7FF}") == "a\u{E000}")
        #expect(QueryBuilder.textAfterPrefix("a\u{10FFFF}") == "b")
        #expect(QueryBuilder.textAfterPrefix("\u{10FFFF}\u{10FFFF}") == nil)
        #expect(try build("Thing", Key("s").beginsWith("\u{10FFFF}")).sql == #"(t0."s" >= ?)"#)
        #expect(QueryBuilder.textAfterPrefix("e\u{301}") == "e\u{302}")
        // ASCII below DEL moves on by its byte; DEL and beyond by their scalar.
        #expect(QueryBuilder.textAfterPrefix("article 9") == "article :")
        #expect(QueryBuilder.textAfterPrefix("a~") == "a\u{7F}")
        #expect(QueryBuilder.textAfterPrefix("a\u{7F}") == "a\u{80}")
        #expect(QueryBuilder.textAfterPrefix("é\u{0}") == "é\u{1}")
    }

    @Test func valuesAreBoundNeverSpliced() throws {
        let hostile = "x'); DROP TABLE \"Thing\"; --"
        let built = try build("Thing", Key("s") == hostile || Key("s").contains(hostile, .caseInsensitive))
        #expect(!built.sql.contains("DROP"))
        #expect(built.bindings.first == .text(hostile))
        #expect(built.sql.contains("ss_strop(t0.\"s\", ?, ?)"))
    }

    @Test func logicJoinsAndEmptyListsAreConstants() throws {
        #expect(try build("Thing", Condition(.and([]))).sql == "1")
        #expect(try build("Thing", Condition(.or([]))).sql == "0")
        #expect(
            try build("Thing", !(Key("i") == 1 && Key("b") == true)).sql
                == #"(NOT ((t0."i" IS ?) AND (t0."b" IS ?)))"#)
    }

    @Test func aToOneKeyPathJoinsOnceAndToManyBecomesASubquery() throws {
        let joined = try build("Note", Key("folder.name") == "A" && Key("folder.name") != "B")
        #expect(joined.sql == #"((j1."name" IS ?) AND (j1."name" IS NOT ?))"#)
        var builder = QueryBuilder(model: model, entity: try model.entity("Note"), storeID: UUID())
        _ = try builder.sql(Key("folder.name") == "A")
        #expect(builder.joins == [#"LEFT JOIN "Folder" AS j1 ON j1.Z_PK = t0."folder""#])
        let any = try build("Folder", Key("notes").any(Key("text") == "x")).sql
        #expect(any.hasPrefix("EXISTS (SELECT 1 FROM \"Note\" AS t0s1"))
        let count = try build("Folder", Key("notes").count > 2)
        #expect(count.sql.hasPrefix("((SELECT count(*) FROM \"Note\" AS t0s1 WHERE"))
        #expect(count.bindings == [.integer(2)])
    }

    @Test func unknownPathsAndWrongTypesAreErrorsThatNameThem() throws {
        expectStoreError(.unknownProperty, containing: "nope") { _ = try build("Thing", Key("nope") == 1) }
        expectStoreError(.unknownProperty, containing: "more than two parts") {
            _ = try build("Note", Key("folder.name.x") == 1)
        }
        expectStoreError(.invalidArgument, containing: "string or URL attribute") {
            _ = try build("Thing", Key("i").contains("1"))
        }
    }

    /// One `Thing`'s values, as the reference sees them.
    typealias Row = (s: String?, i: Int64?)

    /// What a fetch selects equals what a reference written here selects, over random objects and
    /// random conditions (NULLs, ties, case, accents, nesting): the two copies of the rules — SQL
    /// and Swift — never differ silently.
    @Test(arguments: [1, 2, 3])
    func aFetchSelectsWhatAReferenceSelects(seed: Int) throws {
        let group = TemporaryGroup()
        let container = try group.open(model, signal: false)
        let context = container.newContext(name: "test", author: "Test")
        var random = TestRandom(state: UInt64(seed))
        for _ in 0..<80 {
            let s: Value = random.chance(80) ? .string(random.word()) : .null
            let i: Value = random.optionalInteger(-2...2).map { .integer(Int64($0)) } ?? .null
            _ = try context.insert("Thing", ["s": s, "i": i])
        }
        _ = try context.save()
        let all = try context.fetch(FetchRequest("Thing"))
        func row(_ o: Snapshot) -> Row {
            (
                s: { if case .string(let v) = o["s"] { return v } else { return nil } }(),
                i: { if case .integer(let v) = o["i"] { return v } else { return nil } }()
            )
        }
        for step in 0..<150 {
            let (condition, reference) = Self.randomCondition(&random, depth: 2)
            let fetched = Set(try context.fetch(FetchRequest("Thing", where: condition)).map(\.id))
            let expected = Set(all.filter { reference(row($0)) }.map(\.id))
            #expect(fetched == expected, "seed \(seed) step \(step): \(condition.canonicalText)")
        }
    }

    /// A random condition on `Thing.s` and `Thing.i`, and what it means, written in Swift.
    static func randomCondition(_ random: inout TestRandom, depth: Int) -> (Condition, (Row) -> Bool) {
        if depth > 0 && random.chance(40) {
            let (a, fa) = randomCondition(&random, depth: depth - 1)
            let (b, fb) = randomCondition(&random, depth: depth - 1)
            switch random.next(3) {
            case 0: return (a && b, { fa($0) && fb($0) })
            case 1: return (a || b, { fa($0) || fb($0) })
            default: return (!a, { !fa($0) })
            }
        }
        return random.chance(50) ? integerLeaf(&random) : textLeaf(&random)
    }

    static func integerLeaf(_ random: inout TestRandom) -> (Condition, (Row) -> Bool) {
        let k = Int64(random.next(5) - 2)
        let l = Int64(random.next(5) - 2)
        let key = Key("i")
        switch random.next(9) {
        case 0: return (key == k, { $0.i == k })
        case 1: return (key != k, { $0.i != k })
        case 2: return (key == Value.null, { $0.i == nil })
        case 3: return (key != Value.null, { $0.i != nil })
        case 4: return (key < k, { $0.i.map { $0 < k } ?? false })
        case 5: return (key >= k, { $0.i.map { $0 >= k } ?? false })
        case 6: return (key.among([.integer(k), .integer(l)]), { $0.i == k || $0.i == l })
        case 7: return (key.between(.integer(k), .integer(l)), { $0.i.map { k <= $0 && $0 <= l } ?? false })
        default: return (key > k, { $0.i.map { $0 > k } ?? false })
        }
    }

    static func textLeaf(_ random: inout TestRandom) -> (Condition, (Row) -> Bool) {
        let w = random.word()
        let key = Key("s")
        let options = random.pick([[], [.caseInsensitive], [.diacriticInsensitive], Condition.TextOptions.all])
        func bytesLess(_ a: String, _ b: String) -> Bool { Array(a.utf8).lexicographicallyPrecedes(Array(b.utf8)) }
        switch random.next(8) {
        // `==` compares the text as stored (scalars), as SQLite does, not as Swift's `==` does.
        case 0: return (key == w, { $0.s.map { ReadTests.textMatches(.equal, $0, w, []) } ?? false })
        case 1: return (key != w, { $0.s.map { !ReadTests.textMatches(.equal, $0, w, []) } ?? true })
        case 2: return (key == Value.null, { $0.s == nil })
        case 3: return (key < w, { $0.s.map { bytesLess($0, w) } ?? false })
        case 4:
            return (
                key.contains(w, options), { $0.s.map { ReadTests.textMatches(.contains, $0, w, options) } ?? false }
            )
        case 5:
            return (
                key.beginsWith(w, options), { $0.s.map { ReadTests.textMatches(.beginsWith, $0, w, options) } ?? false }
            )
        case 6:
            return (
                key.endsWith(w, options), { $0.s.map { ReadTests.textMatches(.endsWith, $0, w, options) } ?? false }
            )
        default:
            return (key.equals(w, options), { $0.s.map { ReadTests.textMatches(.equal, $0, w, options) } ?? false })
        }
    }
}

extension QueryBuilderTests {
    /// Requests of one shape share their SQL: for random conditions of every kind, any two the
    /// shape calls the same compile to the same SQL, and the bindings made without the SQL are the
    /// ones made with it. Seeds 1–3 always, and one random seed printed.
    @Test(arguments: [1, 2, 3, Int.random(in: 4...Int(Int32.max))])
    func requestsOfOneShapeCompileToOneSQL(seed: Int) throws {
        print("QueryBuilderTests shapes: seed \(seed)")
        let container = try TemporaryGroup().open(ReadTests.indexedModel, signal: false)
        var random = TestRandom(state: UInt64(seed))
        var byShape: [FetchShape: String] = [:]
        var shared = 0
        for step in 0..<3000 {
            let (condition, _) = ReadTests.randomRowCondition(&random, depth: 2)
            let limit = random.chance(30) ? random.next(3) : nil
            let request = FetchRequest(
                "Row", where: condition, sortedBy: random.chance(50) ? [Key("n").ascending] : [], limit: limit,
                offset: random.chance(20) ? random.next(3) : 0)
            let (sql, bindings, bound) = try container.read { s in
                let e = try container.model.entity("Row")
                let (sql, bindings) = try s.query(
                    e, columns: ["Z_PK"], where: request.condition, sort: request.sort, window: request)
                return (sql, bindings, try s.fetchBindings(request))
            }
            #expect(bound == bindings, "seed \(seed) step \(step): \(condition.canonicalText)")
            let shape = FetchShape(request: request)
            if let known = byShape[shape] {
                shared += 1
                #expect(known == sql, "seed \(seed) step \(step): \(condition.canonicalText)")
            } else {
                byShape[shape] = sql
            }
        }
        #expect(shared > 1000, "seed \(seed): most random requests share a shape with an earlier one")
    }
}
