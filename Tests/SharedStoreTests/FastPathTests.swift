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
}
