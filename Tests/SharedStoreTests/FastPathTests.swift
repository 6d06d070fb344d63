import Foundation
import ReadLater
import SharedStore
import SharedStoreSupport
import Testing

@testable import ReadLater
@testable import SharedStoreCore

/// The shortcuts a batch of a million rows takes (issue 22) answer as the long way does: a length
/// rule settled by the byte count, control characters found by bytes, a share-batch line split at
/// tab bytes with ASCII taken as it is.
@Suite struct FastPathTests {
    /// Pieces that make the answers differ if a shortcut is wrong: one character of several bytes
    /// or several scalars, "\r\n" (one character of two control scalars), C1 and bidi controls,
    /// tabs.
    static let pieces = [
        "a", "Z", " ", "é", "e\u{301}", "👩‍👩‍👧", "\r\n", "\n", "\t", "\u{7F}", "\u{85}", "\u{202E}",
        "\u{2066}", "日",
    ]

    static func randomText(_ random: inout TestRandom) -> String {
        (0..<random.next(8)).map { _ in random.pick(pieces) }.joined()
    }

    @Test func aLengthRuleAnswersAsCountingCharactersDoes() throws {
        let seed = UInt64.random(in: 1...UInt64(UInt32.max))
        var random = TestRandom(state: seed)
        let validator = Validator()
        for _ in 0..<3_000 {
            let text = Self.randomText(&random)
            let min = random.chance(50) ? random.next(4) : nil
            let max = random.chance(50) ? random.next(6) : nil
            let single = random.chance(50)
            let a = Attribute("t", .string, minLength: min, maxLength: max, singleLine: single)
            let n = text.count
            let controls = text.unicodeScalars.contains { TextSafety.isControl($0) && $0 != "\t" }
            let expected = (min.map { n >= $0 } ?? true) && (max.map { n <= $0 } ?? true) && !(single && controls)
            let accepted = (try? validator.validate(.string(text), a, object: "x")) != nil
            #expect(
                accepted == expected,
                "seed \(seed): \(text.debugDescription) (\(n) characters) min \(min ?? -1) max \(max ?? -1)")
        }
    }

    @Test func controlCharactersAreFoundByBytesAsByScalars() {
        let seed = UInt64.random(in: 1...UInt64(UInt32.max))
        var random = TestRandom(state: seed)
        for _ in 0..<3_000 {
            let text = Self.randomText(&random)
            for tab in [false, true] {
                let expected = text.unicodeScalars.contains { TextSafety.isControl($0) && !(tab && $0 == "\t") }
                #expect(
                    TextSafety.containsControl(text, allowingTab: tab) == expected,
                    "seed \(seed): \(text.debugDescription)")
            }
        }
    }

    @Test func aShareBatchLineSplitsAtTabBytes() throws {
        let dir = TemporaryGroup()
        let container = try dir.open()
        func parse(_ bytes: [UInt8]) throws -> ReadLater.Link? {
            try ReadLater.parseLine(bytes: bytes[...], number: 7, container: container, validate: false)
        }
        #expect(
            try parse(Array("https://a.example\tCafé 日本\tSwift".utf8))
                == ReadLater.Link(url: "https://a.example", title: "Café 日本", category: "Swift"))
        #expect(try parse(Array("https://a.example\tT\t".utf8)) == ReadLater.Link(url: "https://a.example", title: "T"))
        #expect(try parse(Array(" \t ".utf8)) == nil)
        for (line, why) in [
            ("a\tb\tc\td\te", "found 5 field(s)"), ("a\tb\tc\td", "found 4 field(s)"), ("justone", "found 1 field(s)"),
        ] {
            #expect {
                try parse(Array(line.utf8))
            } throws: { error in
                "\(error)".contains("line 7") && "\(error)".contains(why)
            }
        }
        // A line of too many fields that is no UTF-8 after the fourth is named for that first.
        #expect {
            try parse(Array("https://d.example\tD\tx\ty\t".utf8) + [0xFF])
        } throws: { error in
            "\(error)".contains("line 7 is not UTF-8 text")
        }
        // Bytes that are not UTF-8 (a lone continuation byte, a truncated sequence) in any field.
        for bad: [UInt8] in [[0x80], [0xE6, 0x97], [0xFF]] {
            for field in 0..<3 {
                var fields: [[UInt8]] = [Array("https://a.example".utf8), Array("T".utf8), Array("C".utf8)]
                fields[field] += bad
                let line = Array(fields.joined(separator: [9]))
                #expect {
                    try parse(line)
                } throws: { error in
                    "\(error)".contains("line 7 is not UTF-8 text")
                }
            }
        }
    }

    /// A batch's row whose related object is the one the row before named, through another
    /// relationship of another entity, is checked for the entity all the same (found by a review:
    /// the shortcut for the same object skipped that check, and a Category's key was stored as an
    /// Article's).
    @Test func aBatchChecksTheEntityOfARelatedObjectTheRowBeforeNamed() throws {
        let container = try TemporaryGroup().open()
        let context = container.newContext(author: "Batch")
        #expect {
            try context.batch { b in
                let category = try b.uniqueObject("Category", ["label": "three"], object: "c")
                _ = try b.insert(
                    "Article", ["title": "T", "url": "https://a.example", "createdAt": .date(Date())],
                    relationships: ["category": category], object: "a1")
                _ = try b.insert(
                    "Highlight", ["text": "x", "createdAt": .date(Date())], relationships: ["article": category],
                    object: "h1")
            }
        } throws: { error in
            (error as? StoreError)?.code == .objectNotFound && "\(error)".contains("h1.article")
        }
        #expect(try context.count(FetchRequest("Highlight")) == 0 && context.count(FetchRequest("Article")) == 0)
    }

    /// A batch remembers the related objects it found by their key and entity: an object of
    /// another entity with the key of one found before is looked for all the same.
    @Test func aRelatedObjectWithTheKeyOfAnotherEntitysIsStillLookedFor() throws {
        let container = try TemporaryGroup().open()
        let context = container.newContext(author: "Batch")
        #expect {
            try context.batch { b in
                var category: ObjectID?
                for name in ["a", "b", "c", "d", "e"] {
                    category = try b.uniqueObject("Category", ["label": .string(name)], object: name)
                }
                let c = try #require(category)
                _ = try b.insert(
                    "Article", ["title": "T", "url": "https://a.example", "createdAt": .date(Date())],
                    relationships: ["category": c], object: "a1")
                // No article has the last category's key: the batch made one article.
                let missing = ObjectID(storeID: c.storeID, entity: "Article", primaryKey: c.primaryKey)
                _ = try b.insert(
                    "Highlight", ["text": "x", "createdAt": .date(Date())], relationships: ["article": missing],
                    object: "h1")
            }
        } throws: { error in
            (error as? StoreError)?.code == .objectNotFound && "\(error)".contains("h1.article")
        }
        #expect(try context.count(FetchRequest("Highlight")) == 0 && context.count(FetchRequest("Article")) == 0)
    }

    /// Category names that differ only in Unicode normalization are two categories, as the store
    /// compares bytes, whether they are in one share-batch file or two (found by a review: the
    /// batch's cache of names took them for one within a file).
    @Test func shareBatchCategoriesAreTheStoresWhateverTheFiles() throws {
        func categories(_ files: [String]) throws -> [String: Int64] {
            let container = try TemporaryGroup().open()
            try ReadLater.registerHooks(container)
            for (i, text) in files.enumerated() {
                let path = NSTemporaryDirectory() + "/sharedstore-nf-\(UUID().uuidString)"
                defer { try? FileManager.default.removeItem(atPath: path) }
                try Data(text.utf8).write(to: URL(fileURLWithPath: path))
                let input = try #require(FileHandle(forReadingAtPath: path))
                defer { try? input.close() }
                _ = try ReadLater.shareBatch(
                    input, name: "file \(i)", context: container.newContext(author: "ShareExtension"))
            }
            var out: [String: Int64] = [:]
            for c in try container.newContext().fetch(FetchRequest("Category")) {
                out[
                    (c["label"].stringValue ?? "").unicodeScalars.map { String($0.value, radix: 16) }.joined(
                        separator: " ")] =
                    c["articleCount"].integerValue
            }
            return out
        }
        let composed = "https://c.example\tC\tCaf\u{E9}\n"
        let decomposed = "https://d.example\tD\tCafe\u{301}\n"
        let one = try categories([composed + decomposed])
        #expect(one.count == 2 && one.values.allSatisfy { $0 == 1 }, "\(one)")
        #expect(try categories([composed, decomposed]) == one)
    }

    /// A share-batch finds each line's category by its name's bytes through a small table in
    /// front of a dictionary: random lines over names that share the table's slots (found by
    /// searching), names equal but for their Unicode normalization, and prefixes of one another
    /// each get their own category, made once, as a plain dictionary by bytes says.
    @Test func categoriesFoundByBytesAreTheOnesADictionaryFinds() throws {
        let seed = UInt64.random(in: 1...UInt64(UInt32.max))
        var random = TestRandom(state: seed)
        // Names that share a slot: the first of each slot with a second name among 20,000.
        var bySlot: [Int: [String]] = [:]
        for i in 0..<20_000 {
            let name = "n\(i)"
            bySlot[CategoryNames.slot(of: Array(name.utf8)[...]), default: []].append(name)
        }
        let sharing = bySlot.values.filter { $0.count >= 2 }.prefix(20).flatMap { $0.prefix(3) }
        #expect(sharing.count >= 40, "seed \(seed): too few names share a slot to test them")
        let names = sharing + ["Caf\u{E9}", "Cafe\u{301}", "Caf", "Café ", "日本", "", "a", "ab", "abc"]
        var table = CategoryNames()
        var made: [[UInt8]: Int] = [:]
        var reference: [[UInt8]: ObjectID] = [:]
        let storeID = UUID()
        for line in 0..<30_000 {
            let bytes = Array(random.pick(names).utf8)
            let id = table.id(of: bytes[...]) { name in
                made[Array(name.utf8), default: 0] += 1
                return ObjectID(storeID: storeID, entity: "Category", primaryKey: Int64(made.count))
            }
            if let known = reference[bytes] {
                #expect(id == known, "seed \(seed): line \(line), \(bytes)")
            } else {
                reference[bytes] = id
            }
        }
        #expect(made.values.allSatisfy { $0 == 1 }, "seed \(seed): a name made twice")
        #expect(made.count == reference.count && Set(reference.values).count == reference.count, "seed \(seed)")
    }
}
