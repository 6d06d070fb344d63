import Foundation
import ReadLater
import SharedStore
import Testing

@testable import SharedStoreCore

// A hostile review of the save path's speed work (issue 22), kept as tests: text bound from its
// UTF-8 in place, validation patterns run through a table of ASCII states, values checked through
// each entity's checked attributes, and the check that refuses a save without history on a store
// mirrored since. Random runs print their seed.

// MARK: - 1. Text bound in place

@Suite struct TextBindingHostileTests {
    static let model: Model = {
        do {
            return try Model([
                Entity(
                    "T", attributes: [Attribute("s", .string, optional: true), Attribute("k", .integer, default: 0)]),
                Entity("U", attributes: [Attribute("name", .string)], uniquenessConstraints: [["name"]]),
            ])
        } catch { preconditionFailure("\(error)") }
    }()

    struct TRec: Record {
        static let entityName = "T"
        var id: ObjectID?
        var s: String?
        var k: Int
    }

    static let pieces: [String] = [
        "", "\u{0}", "a", "Z", "\u{E9}", "e\u{301}", "\u{1F600}", "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}",
        "\u{FEFF}", "\r\n", "\u{7F}", "%", "_", "*",
        "?", "\\", "'", "\"", "\u{10FFFF}", "\u{D7FF}", "\u{E000}", "\u{FFFD}", "한", "\u{1100}\u{1161}", "\u{212B}",
        "\u{C5}", "A\u{30A}", " ", "\t", "\u{2028}", "ß", "ﬃ",
    ]

    static func randomText(_ r: inout TestRandom) -> String {
        var s = (0..<r.next(9)).map { _ in r.pick(pieces) }.joined()
        switch r.next(8) {
        case 0: s = NSString(string: s) as String
        case 1: s = String(("xy" + s + "zw").dropFirst(2).dropLast(2))
        case 2: s = String(repeating: s.isEmpty ? "\u{0}" : s, count: 200 + r.next(800))
        case 3: s = String(decoding: Array(s.utf8), as: UTF8.self)
        case 4:
            let m = NSMutableString(string: s)
            m.append("\u{0}tail")
            s = m as String
        case 5: s = String(s.unicodeScalars.reversed().map(Character.init))
        default: break
        }
        return s
    }

    static func bytes(_ v: Value) -> [UInt8]? {
        if case .string(let s) = v { return Array(s.utf8) }
        return nil
    }

    static func leq(_ a: String, _ b: String) -> Bool { !b.utf8.lexicographicallyPrecedes(a.utf8) }

    static func containsBytes(_ hay: [UInt8], _ needle: [UInt8]) -> Bool {
        if needle.isEmpty { return true }
        if needle.count > hay.count { return false }
        for i in 0...(hay.count - needle.count) where Array(hay[i..<(i + needle.count)]) == needle { return true }
        return false
    }

    @Test(arguments: [1, Int.random(in: 2...Int(Int32.max))])
    func everyWayTextIsBoundKeepsItsBytes(seed: Int) throws {
        print("TextBindingHostileTests: seed \(seed)")
        var r = TestRandom(state: UInt64(seed))
        let group = TemporaryGroup()
        let container = try group.open(Self.model)
        let ctx = container.newContext(author: "W")
        let fixed = [
            "", "a\u{0}b", "a\u{0}c", "\u{0}", "\u{0}\u{0}", NSString(string: "bridged é \u{1F600}") as String,
            String("substring as text".dropFirst(3)), "e\u{301}", "\u{E9}", String(repeating: "long\u{0}", count: 3000),
            "\u{10FFFF}", "\u{10FFFF}\u{10FFFF}", "abc\u{7F}", "abc\u{7F}\u{7F}",
        ]
        var strings = fixed + (0..<80).map { _ in Self.randomText(&r) }
        // Context save.
        for (i, s) in strings.enumerated() { try ctx.insert("T", ["s": .string(s), "k": .integer(Int64(i))]) }
        try ctx.save()
        // batchInsert, batch { }, typed records.
        var k = strings.count
        let more = (0..<30).map { _ in Self.randomText(&r) }
        _ = try ctx.batchInsert("T", more.enumerated().map { i, s in ["s": .string(s), "k": .integer(Int64(k + i))] })
        strings += more
        k = strings.count
        let more2 = (0..<30).map { _ in Self.randomText(&r) }
        _ = try ctx.batch { b in
            for (i, s) in more2.enumerated() {
                _ = try b.insert("T", ["s": .string(s), "k": .integer(Int64(k + i))], object: "b\(i)")
            }
        }
        strings += more2
        k = strings.count
        let more3 = (0..<20).map { _ in Self.randomText(&r) }
        _ = try ctx.batchInsert(more3.enumerated().map { i, s in TRec(s: s, k: k + i) })
        strings += more3
        k = strings.count
        let more4 = (0..<10).map { _ in Self.randomText(&r) }
        for (i, s) in more4.enumerated() { _ = try ctx.insert(TRec(s: s, k: k + i)) }
        try ctx.save()
        strings += more4

        func check(_ what: String) throws {
            let reader = try group.open(Self.model).newContext()
            let rows = try reader.fetch(FetchRequest("T", sortedBy: [Key("k").ascending]))
            #expect(rows.count == strings.count, "\(what): \(rows.count) rows")
            for (i, row) in rows.enumerated() where i < strings.count {
                let found = String(describing: Self.bytes(row["s"])?.prefix(12))
                #expect(
                    Self.bytes(row["s"]) == Array(strings[i].utf8),
                    "seed \(seed) \(what) row \(i): \(found) for \(Array(strings[i].utf8).prefix(12))"
                )
            }
        }
        try check("inserts")

        // Updates.
        let all = try ctx.fetch(FetchRequest("T", sortedBy: [Key("k").ascending]))
        for _ in 0..<40 {
            let i = r.next(all.count)
            let s = Self.randomText(&r)
            try ctx.update(all[i].id, ["s": .string(s)])
            strings[i] = s
        }
        try ctx.save()
        try check("updates")

        // Conditions.
        let reader = try group.open(Self.model).newContext()
        for _ in 0..<60 {
            let s = r.pick(strings)
            let eq = strings.filter { Array($0.utf8) == Array(s.utf8) }.count
            #expect(
                try reader.count(FetchRequest("T", where: Key("s") == Value.string(s))) == eq,
                "seed \(seed) == \(Array(s.utf8).prefix(16))")
            let scalars = Array(s.unicodeScalars)
            let p = String(String.UnicodeScalarView(scalars.prefix(r.next(scalars.count + 1))))
            let begins = strings.filter { Array($0.utf8).starts(with: Array(p.utf8)) }.count
            #expect(
                try reader.count(FetchRequest("T", where: Key("s").beginsWith(p))) == begins,
                "seed \(seed) beginsWith \(Array(p.utf8).prefix(16))")
            let lo = r.next(scalars.count + 1)
            let hi = lo + r.next(scalars.count - lo + 1)
            let mid = String(String.UnicodeScalarView(scalars[lo..<hi]))
            if !mid.isEmpty {
                let cont = strings.filter { Self.containsBytes(Array($0.utf8), Array(mid.utf8)) }.count
                let got = try reader.count(FetchRequest("T", where: Key("s").contains(mid)))
                #expect(
                    got == cont, "seed \(seed) contains \(mid.unicodeScalars.map { $0.value }) got \(got) want \(cont)")
            }
            let set = [s, r.pick(strings), Self.randomText(&r)]
            let inCount = strings.filter { x in set.contains { Array($0.utf8) == Array(x.utf8) } }.count
            #expect(
                try reader.count(FetchRequest("T", where: Key("s").among(set.map { .string($0) }))) == inCount,
                "seed \(seed) IN")
            let a = r.pick(strings)
            let b = r.pick(strings)
            let (l, h) = Self.leq(a, b) ? (a, b) : (b, a)
            let between = strings.filter { Self.leq(l, $0) && Self.leq($0, h) }.count
            #expect(
                try reader.count(FetchRequest("T", where: Key("s").between(.string(l), .string(h)))) == between,
                "seed \(seed) between")
            let ge = strings.filter { Self.leq(l, $0) }.count
            #expect(try reader.count(FetchRequest("T", where: Key("s") >= Value.string(l))) == ge, "seed \(seed) >=")
        }
    }

    @Test func uniquenessComparesEveryByte() throws {
        let container = try TemporaryGroup().open(Self.model)
        let ctx = container.newContext(author: "U")
        let names = [
            "", "a\u{0}b", "a\u{0}c", "a", "\u{0}", "\u{0}\u{0}", "e\u{301}", "\u{E9}", "\u{212B}", "\u{C5}",
            NSString(string: "x\u{0}y") as String,
        ]
        for n in names { _ = try ctx.batchInsert("U", [["name": .string(n)]]) }
        for n in ["a\u{0}z", "\u{0}\u{0}\u{0}", "b\u{0}"] {
            try ctx.insert("U", ["name": .string(n)])
            try ctx.save()
        }
        for n in names + ["a\u{0}z"] {
            ctx.rollback()
            #expect(throws: StoreError.self, "\(Array(n.utf8)) again") {
                try ctx.insert("U", ["name": .string(n)])
                try ctx.save()
            }
            ctx.rollback()
            #expect(throws: StoreError.self, "\(Array(n.utf8)) again in a batch") {
                _ = try ctx.batchInsert("U", [["name": .string(n)]])
            }
        }
    }

    @Test func uniqueObjectAndUpdatesCompareEveryByte() throws {
        let container = try TemporaryGroup().open(Self.model)
        let ctx = container.newContext(author: "U")
        var ids: [ObjectID] = []
        _ = try ctx.batch { b in
            for n in ["a\u{0}b", "a\u{0}c", "a\u{0}b", NSString(string: "a\u{0}c") as String, "", "\u{0}"] {
                ids.append(try b.uniqueObject("U", ["name": .string(n)], object: "u"))
            }
        }
        #expect(ids.count == 6 && ids[0] == ids[2] && ids[1] == ids[3] && Set(ids).count == 4, "\(ids)")
        try ctx.update(ids[0], ["name": "a\u{0}d"])
        try ctx.save()
        try ctx.update(ids[0], ["name": "a\u{0}c"])
        #expect(throws: StoreError.self) { try ctx.save() }
    }

    @Test func historyAuthorsAndNamesKeepTheirBytes() throws {
        let container = try TemporaryGroup().open(Self.model)
        let authors = [
            "\u{C4}\u{1F600}", "A\u{30A}", "\u{212B}", NSString(string: "bridg\u{E9}") as String,
            String("xxauthor".dropFirst(2)),
            String(repeating: "long", count: 500), "a\u{0}b", "",
        ]
        for (i, a) in authors.enumerated() {
            let ctx = container.newContext(name: "name-\(a)", author: a)
            try ctx.insert("T", ["k": .integer(Int64(i))])
            do { try ctx.save() } catch {
                print("TextBindingHostileTests: author \(Array(a.utf8).prefix(8)) refused: \(error)")
                continue
            }
            let h = try container.fetchHistory(HistoryRequest()).last
            #expect(
                h?.author.map { Array($0.utf8) } == Array(a.utf8),
                "author \(Array(a.utf8).prefix(12)): \(String(describing: h?.author))")
            #expect(h?.contextName.map { Array($0.utf8) } == Array("name-\(a)".utf8), "name")
            let only = try container.fetchHistory(HistoryRequest(authors: [a]))
            #expect(
                only.count == 1 && only.first?.token == h?.token,
                "authors filter \(Array(a.utf8).prefix(12)): \(only.count)")
        }
    }
}

// MARK: - 2. Patterns: the table against ICU

@Suite struct PatternTableHostileTests {
    static let asciiAll: [String] = (0..<128).map { String(UnicodeScalar(UInt8($0))) }
    static let nonASCII: [String] = [
        "\u{E9}", "e\u{301}", "\u{85}", "\u{A0}", "\u{2028}", "\u{1F600}", "\u{663}", "\u{D55C}", "\u{FEFF}", "\u{295}",
        "\u{88F}",
        "\u{11DE0}",
    ]

    static func atom(_ r: inout TestRandom, depth: Int) -> String {
        if depth > 0 && r.chance(20) {
            return r.pick(["(?:", "("]) + pattern(&r, depth: depth - 1) + ")"
        }
        return r.pick([
            "a", "b", "c", "x", "0", "9", " ", "-", "_", "@", #"\."#, ".", #"\s"#, #"\S"#, #"\d"#, #"\D"#, "[ab]",
            "[a-f]", "[^a]", #"[^\s]"#, "[0-9a-z]", "[A-Z]", #"[\p{L}]"#, #"\p{Cc}"#, #"\P{Cc}"#, #"\p{Z}"#, "é",
            #"\t"#, #"\n"#, "[a-c0-2]", #"[\x00-\x1f]"#, #"\x7f"#, "[!-/]", #"\p{P}"#, #"\p{S}"#, #"[\p{N}]"#,
            #"[^\p{Cc}/]"#, #"\u0041"#,
        ])
    }

    static func quantifier(_ r: inout TestRandom) -> String {
        r.pick(["", "", "*", "+", "?", "{2}", "{1,3}", "{0,}", "{2,5}", "{3}"])
    }

    static func pattern(_ r: inout TestRandom, depth: Int) -> String {
        var out = ""
        for _ in 0..<(1 + r.next(5)) {
            let a = atom(&r, depth: depth)
            out += a + (a.hasPrefix("(") ? r.pick(["", "?", "{1,2}"]) : quantifier(&r))
        }
        if depth > 0 && r.chance(25) { out += "|" + pattern(&r, depth: depth - 1) }
        return out
    }

    static func text(_ r: inout TestRandom, _ regexHint: String) -> String {
        let n = r.pick([0, 1, 2, 5, 10, 30, 80, 200])
        let asciiOnly = r.chance(60)
        var s = ""
        for _ in 0..<n {
            if !asciiOnly && r.chance(10) {
                s += r.pick(nonASCII)
            } else if r.chance(70) {
                s += r.pick(["a", "b", "c", "x", "0", "9", " ", "-", "_", "@", ".", "A", "Z", "\t", "\n"])
            } else {
                s += r.pick(asciiAll)
            }
        }
        if r.chance(15) { s = NSString(string: s) as String }
        return s
    }

    @Test(arguments: [11, Int.random(in: 13...Int(Int32.max))])
    func randomPatternsAndLongTextAgreeWithICU(seed: Int) throws {
        print("PatternTableHostileTests: seed \(seed)")
        var r = TestRandom(state: UInt64(seed))
        var compiled = 0
        var failures = 0
        for step in 0..<400 {
            let p = Self.pattern(&r, depth: 2)
            guard let regex = Regex(p), regex.isCompiled else { continue }
            compiled += 1
            var strings = (0..<40).map { _ in Self.text(&r, p) }
            // Strings the pattern matches, then mutated at one position (ASCII or not).
            for s in strings where regex.matchesByICU(s) && !s.isEmpty {
                var sc = Array(s.unicodeScalars)
                sc[r.next(sc.count)] = r.pick(Self.nonASCII + Self.asciiAll).unicodeScalars.first!
                strings.append(String(String.UnicodeScalarView(sc)))
                strings.append(s + s)
            }
            for s in strings where regex.matches(s) != regex.matchesByICU(s) {
                failures += 1
                if failures < 6 {
                    let (scalars, ours, icu) = (
                        s.unicodeScalars.map { $0.value }, regex.matches(s), regex.matchesByICU(s)
                    )
                    Issue.record("seed \(seed) step \(step): /\(p)/ on \(scalars) program \(ours) ICU \(icu)")
                }
            }
        }
        print("PatternTableHostileTests: seed \(seed): \(compiled) compiled, \(failures) disagreements")
    }

    @Test func patternsPastTheTableAgreeWithICU() throws {
        var r = TestRandom(state: 99)
        let patterns = [
            "[ab]*a[ab]{7}", "[ab]*b[ab]{6}[^x]*", "(?:[a-c]*a[a-c]{3}|x+)*y?", ".*a.{6}", "[0-9]*1[0-9]{6}",
            "(?:a|é)*a[ab]{6}é?",
            "[ab]*a[ab]{5}", "[a-z]*[aeiou][a-z]{5}[0-9]?", #"(?:[ab]*a[ab]{6}|\p{L}+)"#, #"[ab]*a[ab]{6}\d?"#,
            #"[\p{L}b]*a[ab]{6}"#,
        ]
        for p in patterns {
            let regex = try #require(Regex(p))
            #expect(regex.isCompiled, "\(p)")
            var bad: [String] = []
            for _ in 0..<3000 {
                let n = r.pick([0, 1, 7, 8, 9, 20, 64, 150])
                var s = String((0..<n).map { _ in r.pick(Array("abcxyz019é\u{295}\u{663}\u{11DE0}")) })
                if r.chance(20) { s = NSString(string: s) as String }
                if regex.matches(s) != regex.matchesByICU(s) { bad.append(s) }
            }
            #expect(bad.isEmpty, "/\(p)/: \(bad.prefix(3).map { $0.unicodeScalars.map(\.value) })")
        }
    }
}

// MARK: - 3. Validation through per-entity rules

@Suite struct InsertChecksHostileTests {
    static func model(version: Int = 1, extra: Bool = false) throws -> Model {
        var a: [Attribute] = [
            Attribute("z", .string, optional: true, pattern: "[0-9]+"),
            Attribute("name", .string, minLength: 2, maxLength: 5),
            Attribute("n", .integer, optional: true, minValue: 1, maxValue: 9),
            Attribute("d", .double, optional: true),
            Attribute("t", .date, optional: true),
            Attribute("line", .string, optional: true, singleLine: true),
        ]
        if extra { a.insert(Attribute("code", .string, optional: true, pattern: "[A-Z]{3}"), at: 0) }
        return try Model(
            version: version,
            [
                Entity("Gamma", attributes: [Attribute("name", .string, optional: true, pattern: "[A-Z][a-z]*")]),
                Entity(
                    "Beta",
                    attributes: [
                        Attribute("line", .string, optional: true, pattern: "[a-z]+"),
                        Attribute("z", .string, optional: true, pattern: "[x-z]+"),
                        Attribute("name", .string, optional: true, maxLength: 3, pattern: "B.*"),
                    ]),
                Entity("Alpha", attributes: a),
            ])
    }

    struct AlphaRec: Record {
        static let entityName = "Alpha"
        var id: ObjectID?
        var z: String?
        var name: String
        var n: Int?
        var d: Double?
        var t: Date?
        var line: String?
    }

    static func outcome(_ body: () throws -> Void) -> String {
        do {
            try body()
            return "ok"
        } catch let e as StoreError {
            guard let v = e.validation else { return "\(e.code)" }
            return "\(e.code) \(v.property ?? "-") \(v.rule)"
        } catch { return "\(error)" }
    }

    static let cases: [(String, [String: Value])] = [
        ("Alpha", ["name": "ok"]), ("Alpha", ["name": "x"]), ("Alpha", ["name": "toolong"]), ("Alpha", [:]),
        ("Alpha", ["name": "\u{E9}\u{301}\u{E9}"]),
        ("Alpha", ["name": "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}"]),
        ("Alpha", ["name": "ab", "z": "12"]),
        ("Alpha", ["name": "ab", "z": "1a"]), ("Alpha", ["name": "ab", "z": "abc"]), ("Alpha", ["name": "ab", "n": 0]),
        ("Alpha", ["name": "ab", "n": 10]), ("Alpha", ["name": "ab", "d": .double(.nan)]),
        ("Alpha", ["name": "ab", "d": .double(.infinity)]),
        ("Alpha", ["name": "ab", "t": .date(Date(timeIntervalSince1970: .nan))]),
        ("Alpha", ["name": "ab", "line": "a\nb"]), ("Alpha", ["name": "ab", "line": "abc"]), ("Alpha", ["name": 3]),
        ("Alpha", ["name": "ab", "n": "x"]), ("Beta", ["line": "abc"]), ("Beta", ["line": "12"]),
        ("Beta", ["z": "xyz"]),
        ("Beta", ["z": "12"]), ("Beta", ["name": "Bxx"]), ("Beta", ["name": "Bxxx"]), ("Beta", ["name": "Axx"]),
        ("Beta", ["line": "a\nb"]), ("Gamma", ["name": "Hello"]), ("Gamma", ["name": "hello"]),
        ("Gamma", ["name": "12"]),
        (
            "Alpha",
            [
                "name": "ab",
                "z": NSString(string: "1é") as String == "" ? "" : .string(NSString(string: "1é") as String),
            ]
        ),
    ]

    @Test func everyInsertPathChecksWhatValidateChecks() throws {
        let group = TemporaryGroup()
        let container = try group.open(try Self.model())
        let ctx = container.newContext(author: "V")
        for (entity, values) in Self.cases {
            let reference = Self.outcome { try container.validate(entity, values, object: "x") }
            ctx.rollback()
            let saved = Self.outcome {
                try ctx.insert(entity, values)
                try ctx.save()
            }
            ctx.rollback()
            let batched = Self.outcome { _ = try ctx.batchInsert(entity, [values]) }
            let closure = Self.outcome { _ = try ctx.batch { b in _ = try b.insert(entity, values, object: "row") } }
            #expect(
                saved == reference && batched == reference && closure == reference,
                "\(entity) \(values): validate \(reference) | save \(saved) | batchInsert \(batched) | batch \(closure)"
            )
        }
        // Typed records.
        let rec = Self.outcome { _ = try ctx.batchInsert([AlphaRec(z: "1a", name: "ab")]) }
        #expect(
            rec == Self.outcome { try container.validate("Alpha", ["z": "1a", "name": "ab"], object: "x") },
            "typed: \(rec)")
        let rec2 = Self.outcome { _ = try ctx.batchInsert([AlphaRec(z: "12", name: "x")]) }
        #expect(rec2.contains("name") && rec2.contains("minLength"), "typed: \(rec2)")
        // The message names the object, the property and the rule.
        ctx.rollback()
        do {
            try ctx.insert("Beta", ["line": "12"])
            try ctx.save()
            Issue.record("saved")
        } catch let e as StoreError {
            #expect(
                e.message.contains("Beta") && e.message.contains("line") && e.message.contains("[a-z]+"), "\(e.message)"
            )
        }
        do {
            _ = try ctx.batchInsert("Alpha", [["name": "ok"], ["name": "ab", "z": "zz"]])
            Issue.record("saved")
        } catch let e as StoreError {
            #expect(
                e.message.contains("Alpha") && e.message.contains("z") && e.message.contains("[0-9]+"), "\(e.message)")
            print("InsertChecksHostileTests: batch message: \(e.message) object \(e.validation?.object ?? "nil")")
        }
    }

    @Test func afterAMigrationTheNewModelsRulesApply() throws {
        let group = TemporaryGroup()
        do {
            let v1 = try group.open(try Self.model())
            let c = v1.newContext(author: "A")
            try c.insert("Alpha", ["name": "ab"])
            try c.save()
        }
        let v2 = try group.open(try Self.model(version: 2, extra: true))
        let ctx = v2.newContext(author: "B")
        for (entity, values) in Self.cases + [
            ("Alpha", ["name": "ab", "code": "ABC"]), ("Alpha", ["name": "ab", "code": "abc"]),
            ("Alpha", ["name": "ab", "code": "ABC", "z": "1"]), ("Alpha", ["name": "ab", "code": "ABC", "z": "A"]),
        ] {
            let reference = Self.outcome { try v2.validate(entity, values, object: "x") }
            ctx.rollback()
            let saved = Self.outcome {
                try ctx.insert(entity, values)
                try ctx.save()
            }
            let batched = Self.outcome { _ = try ctx.batchInsert(entity, [values]) }
            #expect(
                saved == reference && batched == reference,
                "v2 \(entity) \(values): \(reference) | \(saved) | \(batched)")
        }
    }
}

// MARK: - 4. A save without history on a store mirrored since

@Suite struct UntrackedSaveOnMirroredStoreTests {
    @Test(arguments: [
        "update", "delete", "insert", "relationship-free update twice", "batchUpdate", "batchDelete", "batchInsert",
        "batch",
    ])
    func aSaveWithoutHistoryIsRefusedOnceAnotherConnectionMirrored(kind: String) throws {
        let group = TemporaryGroup()
        var options = Container.Options()
        options.historyTracking = false
        let quiet = try group.open(options: options)
        let q = quiet.newContext(author: "MainApp")
        let name = ReadLater.categoryName(quiet.model)
        let a = try q.insert("Category", [name: "A"])
        let b = try q.insert("Category", [name: "B"])
        let saved = try q.save()
        let ids = [saved.permanentID(for: a), saved.permanentID(for: b)]
        // Warm this connection's statements and schema: an update and a delete before.
        try q.update(ids[0], [name: "A2"])
        try q.save()
        // Another container (another connection) makes the store mirrored.
        do {
            let other = try group.open()
            try other.prepareMirroring()
        }
        switch kind {
        case "batchUpdate", "batchDelete", "batchInsert", "batch":
            #expect {
                switch kind {
                case "batchUpdate": _ = try q.batchUpdate("Category", where: Key(name) == "B", set: [name: "B3"])
                case "batchDelete": _ = try q.batchDelete("Category", where: Key(name) == "B")
                case "batchInsert": _ = try q.batchInsert("Category", [[name: "D"]])
                default: _ = try q.batch { b in _ = try b.insert("Category", [name: "E"], object: "e") }
                }
            } throws: { error in
                (error as? StoreError)?.code == .invalidArgument && "\(error)".contains("history tracking is off")
            }
            return
        case "update": try q.update(ids[0], [name: "A3"])
        case "delete": try q.delete(ids[1])
        case "insert": try q.insert("Category", [name: "C"])
        default:
            try q.update(ids[1], [name: "B2"])
        }
        #expect {
            try q.save()
        } throws: { error in
            (error as? StoreError)?.code == .invalidArgument && "\(error)".contains("history tracking is off")
        }
    }
}
