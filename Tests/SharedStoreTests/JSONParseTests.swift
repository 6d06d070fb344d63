import Foundation
import Testing

@testable import SharedStoreSupport

/// The JSON parser the mirror reads server rows with: what it reads, what it refuses (with the
/// byte where the text stops being JSON), and, over random values, that what JSONValue writes
/// reads back as itself and is JSON to Foundation's parser too.
@Suite struct JSONParseTests {
    func parsed(_ text: String) throws -> JSONValue { try JSONValue(parsing: text) }

    func refusal(_ text: String) -> JSONParseError? {
        do {
            _ = try JSONValue(parsing: text)
            return nil
        } catch {
            return error
        }
    }

    @Test func valuesReadAsWritten() throws {
        #expect(
            try parsed(" {\"b\" : [1, -2.5e3, true, false, null], \"a\":\"x\"} \n")
                == .object([
                    ("b", .array([.number(1), .number(-2500), .bool(true), .bool(false), .null])),
                    ("a", .string("x")),
                ]))
        let escaped = "\"a\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\""
        #expect(try parsed(escaped) == .string("a\"\\/\u{8}\u{C}\n\r\té😀"))
        #expect(try parsed("[]") == .array([]))
        #expect(try parsed("{}") == .object([]))
        #expect(try parsed("0") == .number(0))
        #expect(try parsed("-0.25") == .number(-0.25))
        #expect(try parsed("1E2") == .number(100))
        #expect(try parsed("\"é😀\"") == .string("é😀"))
        // Out of Double's range: infinity, which a model version check then refuses.
        #expect(try parsed("1e400") == .number(.infinity))
    }

    @Test func whatIsNotJSONIsRefusedWithWhereItStops() {
        let cases: [(String, Int)] = [
            ("", 0), ("   ", 3), ("[1,]", 3), ("{\"a\":1,}", 7), ("01", 1), ("-", 1), ("1.", 2), ("1e", 2),
            ("+1", 0), (".5", 0), ("[1 2]", 3), ("{\"a\" 1}", 5), ("{a:1}", 1), ("\"abc", 4), ("\"a\u{1}\"", 2),
            ("\"\\x\"", 2), ("\"\\u12\"", 3), ("\"\\ud800\"", 7), ("\"\\udc00\"", 7), ("\"\\ud800\\u0041\"", 13),
            ("tru", 0), ("nul", 0), ("[1] [2]", 4), ("{\"a\":1,\"a\":2}", 7), ("NaN", 0), ("[", 1),
        ]
        for (text, offset) in cases {
            let error = refusal(text)
            #expect(error != nil, "read \(text.debugDescription)")
            #expect(error?.offset == offset, "\(text.debugDescription): \(String(describing: error))")
        }
        #expect(refusal("{\"a\":1,\"a\":2}")?.reason == "key 'a' given twice (as written or in an equivalent form)")
        // Past the first keys, repeats are found by hashing: the same answer.
        let many = (0..<40).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        #expect(refusal("{\(many),\"k3\":0}")?.reason.hasPrefix("key 'k3' given twice") == true)
        // 50,000 keys read (the check of repeats was quadratic once: a row of many keys froze a pull).
        let wide = "{" + (0..<50_000).map { "\"key\($0)\":\($0)" }.joined(separator: ",") + "}"
        guard case .object(let pairs)? = try? JSONValue(parsing: wide) else {
            Issue.record("a wide object was refused")
            return
        }
        #expect(pairs.count == 50_000)
        // A long key is cut short, and a control character in it never printed raw.
        let long = "\\u0007" + String(repeating: "k", count: 100)
        let reason = refusal("{\"\(long)\":1,\"\(long)\":2}")?.reason ?? ""
        #expect(reason.contains("…' given twice") && reason.count < 120 && !reason.contains("\u{7}"), "\(reason)")
        // A control character is named in hex, never printed raw.
        #expect(refusal("\u{7}")?.reason == "no value starts with byte 0x7")
    }

    @Test func nestingIsBoundedNotFollowedDownTheStack() throws {
        let deepest = JSONValue.maximumDepth
        let ok = String(repeating: "[", count: deepest) + String(repeating: "]", count: deepest)
        #expect(throws: Never.self) { try parsed(ok) }
        let deeper = String(repeating: "[", count: deepest + 1) + String(repeating: "]", count: deepest + 1)
        #expect(refusal(deeper)?.offset == deepest)
        // A million brackets: refused at the limit, never a stack overflow.
        #expect(refusal(String(repeating: "[{\"a\":", count: 1_000_000))?.reason.hasPrefix("nested deeper") == true)
    }

    /// A random value: strings with controls, quotes, backslashes, separators, bidi controls,
    /// characters outside the BMP; numbers integral and not; nesting a few levels deep.
    func randomValue(_ random: inout SeededRandom, depth: Int = 0) -> JSONValue {
        let kind = random.below(depth > 3 ? 4 : 6)
        switch kind {
        case 0: return .null
        case 1: return .bool(random.below(2) == 0)
        case 2:
            let n = Double(Int64(bitPattern: random.next()) >> Int64(random.below(64)))
            return .number(random.below(3) == 0 ? n / 1024 : n)
        case 3: return .string(randomString(&random))
        case 4: return .array((0..<random.below(5)).map { _ in randomValue(&random, depth: depth + 1) })
        default:
            var keys = Set<String>()
            var pairs: [(String, JSONValue)] = []
            for _ in 0..<random.below(5) {
                let key = randomString(&random)
                if keys.insert(key).inserted { pairs.append((key, randomValue(&random, depth: depth + 1))) }
            }
            return .object(pairs)
        }
    }

    func randomString(_ random: inout SeededRandom) -> String {
        let alphabet: [Unicode.Scalar] = [
            "a", "Z", "0", " ", "\"", "\\", "/", "\u{0}", "\u{1F}", "\n", "\t", "\u{7F}", "\u{85}", "é", "\u{2028}",
            "\u{2029}", "\u{202E}", "\u{2066}", "\u{FFFF}", "😀", "\u{10FFFF}",
        ]
        var s = ""
        for _ in 0..<random.below(12) { s.unicodeScalars.append(alphabet[random.below(alphabet.count)]) }
        return s
    }

    @Test func randomValuesReadBackAsWrittenAndAreJSONToFoundation() throws {
        let seed = UInt64.random(in: 0...UInt64(UInt32.max))
        print("JSONParseTests: seed \(seed)")
        var random = SeededRandom(seed: seed)
        for _ in 0..<3000 {
            let value = randomValue(&random)
            let text = value.serialized
            let back = try JSONValue(parsing: text)
            #expect(back.serialized == text, "seed \(seed): \(text) read back as \(back.serialized)")
            #expect(
                (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])) != nil,
                "seed \(seed): Foundation refuses \(text)")
        }
    }
}
