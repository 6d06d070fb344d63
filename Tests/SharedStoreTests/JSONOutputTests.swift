import Foundation
import SharedStoreSupport
import Testing

/// Issue 22: JSON lines are written as bytes (a list of a million articles writes several strings
/// and a date per row); what they say is unchanged.
@Suite struct JSONOutputTests {
    @Test func valuesWriteAsBeforeEscapesIncluded() {
        let value = JSONValue.object([
            ("s", .string("plain")), ("q", .string("a\"b\\c\nd\re\tf\u{7}g\u{7F}h\u{85}i\u{2028}j\u{202E}k")),
            ("é", .string("café 😀")), ("n", .number(-42)), ("z", .number(0)),
            ("big", .number(999_999_999_999_999)),
            ("f", .number(1.5)), ("inf", .number(.infinity)), ("b", .bool(true)), ("nil", .null),
            ("a", .array([.number(1), .string(""), .array([])])),
        ])
        let want =
            #"{"s":"plain","q":"a\"b\\c\nd\re\tf\u0007g\u007fh\u0085i\u2028j\u202ek","é":"café 😀","n":-42,"z":0,"#
            + #""big":999999999999999,"f":1.5,"inf":null,"b":true,"nil":null,"a":[1,"",[]]}"#
        #expect(value.serialized == want)
        var bytes: [UInt8] = []
        value.write(to: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == want)
        var text = "x"
        value.write(to: &text)
        #expect(text == "x" + want)
    }

    /// Integers are written digit by digit in place: every width and sign reads as Swift prints it.
    @Test func integersWriteAsSwiftPrintsThem() {
        var seed = UInt64.random(in: 1...UInt64.max)
        print("integersWriteAsSwiftPrintsThem seed \(seed)")
        var numbers: [Int64] = [0, 1, -1, 9, 10, -10, 99, 100, 999_999_999_999_999, -999_999_999_999_999]
        for _ in 0..<2000 {
            // splitmix64: the seed printed above replays the run.
            seed &+= 0x9E37_79B9_7F4A_7C15
            var z = seed
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            let digits = Int(z % 15) + 1
            var n = Int64(z >> 8) % Int64(pow(10, Double(digits)))
            if z & 1 == 1 { n = -n }
            numbers.append(n)
        }
        for n in numbers {
            #expect(JSONValue.number(Double(n)).serialized == String(n), "\(n)")
            #expect(JSONValue.array([.number(Double(n)), .number(7)]).serialized == "[\(n),7]")
        }
    }

    /// Strings are checked eight bytes at a time: wherever an escape falls in a word, and whatever
    /// surrounds it, each is written as one scalar at a time would write it.
    @Test func stringsEscapeWhereverTheEscapeFalls() {
        var seed = UInt64.random(in: 1...UInt64.max)
        print("stringsEscapeWhereverTheEscapeFalls seed \(seed)")
        func next() -> UInt64 {
            seed &+= 0x9E37_79B9_7F4A_7C15
            var z = seed
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        let pieces: [String] = [
            "a", "Z", "~", " ", "\"", "\\", "\n", "\r", "\t", "\u{0}", "\u{1F}", "\u{20}", "\u{7F}", "\u{80}",
            "\u{85}", "\u{9F}", "\u{A0}", "é", "€", "\u{2028}", "\u{2029}", "\u{202E}", "\u{2066}", "😀", "/", "!",
        ]
        func reference(_ s: String) -> String {
            var out = "\""
            for u in s.unicodeScalars {
                switch u {
                case "\"": out += #"\""#
                case "\\": out += #"\\"#
                case "\n": out += #"\n"#
                case "\r": out += #"\r"#
                case "\t": out += #"\t"#
                case _ where TextSafety.isControl(u):
                    let hex = String(u.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                default: out.unicodeScalars.append(u)
                }
            }
            return out + "\""
        }
        for _ in 0..<5000 {
            let length = Int(next() % 40)
            // Mostly plain letters, so that one escape sits at every offset of a word.
            let s = (0..<length).map { _ in next() % 4 == 0 ? pieces[Int(next() % UInt64(pieces.count))] : "x" }
                .joined()
            #expect(JSONValue.string(s).serialized == reference(s), "\(Array(s.utf8))")
        }
    }

    @Test func datesPrintInUTCWithMilliseconds() {
        #expect(ISO8601.string(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
        #expect(ISO8601.string(Date(timeIntervalSince1970: 1_764_548_428.5029)) == "2025-12-01T00:20:28.502Z")
        #expect(ISO8601.string(Date(timeIntervalSince1970: -1)) == "1969-12-31T23:59:59.000Z")
        #expect(ISO8601.string(Date(timeIntervalSince1970: 253_402_300_799.999)) == "9999-12-31T23:59:59.999Z")
        #expect(ISO8601.string(Date(timeIntervalSince1970: .nan)) == "nan")
        // Zero padding on every field, and a year before 1000 and before year 1.
        #expect(ISO8601.string(Date(timeIntervalSince1970: 1_000_000_000.007)) == "2001-09-09T01:46:40.007Z")
        #expect(ISO8601.string(Date(timeIntervalSince1970: -30_610_224_000)) == "1000-01-01T00:00:00.000Z")
        #expect(ISO8601.string(Date(timeIntervalSince1970: -62_138_275_200)) == "0000-12-01T00:00:00.000Z")
        #expect(ISO8601.string(Date(timeIntervalSince1970: -62_169_897_600)) == "-0001-12-01T00:00:00.000Z")
        #expect(ISO8601.string(Date(timeIntervalSince1970: 253_402_300_800.25)) == "10000-01-01T00:00:00.250Z")
    }
}
