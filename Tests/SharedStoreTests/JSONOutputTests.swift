import Foundation
import ReadLater
import SharedStore
import SharedStoreSQLite
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
        let seed = UInt64.random(in: 1...UInt64.max)
        print("integersWriteAsSwiftPrintsThem seed \(seed)")
        var random = SeededGenerator(seed: seed)
        var numbers: [Int64] = [0, 1, -1, 9, 10, -10, 99, 100, 999_999_999_999_999, -999_999_999_999_999]
        for _ in 0..<2000 {
            let z = random.next()
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
        let seed = UInt64.random(in: 1...UInt64.max)
        print("stringsEscapeWhereverTheEscapeFalls seed \(seed)")
        var random = SeededGenerator(seed: seed)
        func next() -> UInt64 { random.next() }
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

/// `main-app list --json` writes each article straight into its output buffer; the text is the
/// same as the article's `JSONValue` (randomized: titles that need escapes, articles with and
/// without a category, read or not, dates near and far; seed printed).
@Suite struct ListObjectsTests {
    @Test func listObjectsWriteWhatListValuesSerializeTo() throws {
        let seed = UInt64.random(in: 1...UInt64.max)
        print("listObjectsWriteWhatListValuesSerializeTo seed \(seed)")
        var random = SeededGenerator(seed: seed)
        func next() -> UInt64 { random.next() }
        let group = TemporaryGroup()
        let container = try group.open()
        let context = container.newContext(author: "T")
        // The model refuses control characters in a title: quotes, backslashes and non-ASCII text
        // are what its strings can hold that a writer must look at.
        let words = ["plain", "q\"uote", "back\\slash", "café", "😀", "e\u{301}", "日本語", "x"]
        let categories = try (0..<3).map {
            try context.insert(
                "Category", [ReadLater.categoryName(container.model): .string("c\($0) \(words[$0 + 1])")])
        }
        for i in 0..<200 {
            let title = (0..<Int(next() % 4 + 1)).map { _ in words[Int(next() % UInt64(words.count))] }.joined(
                separator: " ")
            // Dates from 1900 to 2100, and now and then one from before year 0 or after 9999.
            let seconds = next() % 50 == 0 ? -70_000_000_000.0 : Double(next() % 6_311_390_400) - 2_208_988_800
            let id = try context.insert(
                "Article",
                [
                    "title": .string(title), "url": .string("https://example.com/\(i)?q=\(words[i % words.count])"),
                    "isRead": .bool(next() % 2 == 0), "createdAt": .date(Date(timeIntervalSince1970: seconds + 0.123)),
                ])
            if next() % 3 != 0 { try context.set("category", of: id, to: categories[Int(next() % 3)]) }
        }
        try context.save()
        for (unread, search, limit) in [(false, nil, nil), (true, nil, 50), (false, "café", nil)]
            as [(Bool, String?, Int?)]
        {
            var values: [UInt8] = []
            try ReadLater.listArticles(container.newContext(), unreadOnly: unread, search: search, limit: limit) {
                $0.write(to: &values)
                values.append(0x0A)
            }
            var objects: [UInt8] = []
            try ReadLater.listArticleObjects(container.newContext(), unreadOnly: unread, search: search, limit: limit) {
                JSONObjectWriter.append(to: &objects, $0)
                objects.append(0x0A)
            }
            #expect(values.count > 1)
            #expect(String(decoding: objects, as: UTF8.self) == String(decoding: values, as: UTF8.self))
        }
    }

    /// A list streams its rows and copies their texts' bytes as read (`StreamedRow`): what it
    /// writes is what the rows' snapshots say, whatever a foreign writer left in the columns
    /// (bytes that are not UTF-8, NUL and other controls, DEL, C1 controls, line and bidi
    /// separators, numbers in text columns, text in number columns). The reference is the list as
    /// it was written before, from each row's snapshot.
    @Test func streamedListWritesWhatSnapshotsSay() throws {
        let (group, container) = try StreamedRowHostileTests.hostileStore { raw, keys, nameKey in
            let planted = [
                "CAST(X'66FF6F80' AS TEXT)", "CAST(X'610062' AS TEXT)", "char(1, 9, 10, 127)",
                "CAST(X'C285E280A8E280AE' AS TEXT)",
                "42", "1.5", "CAST(X'E2' AS TEXT)", "''", "'ok \"quoted\" \\ back'", "CAST(X'F09F9880' AS TEXT)",
            ]
            for (k, text) in planted.enumerated() {
                try raw.execute("UPDATE \"Article\" SET \"title\" = \(text), \"url\" = \(text) WHERE Z_PK = \(keys[k])")
            }
            try raw.execute("UPDATE \"Category\" SET \"\(nameKey)\" = CAST(X'63E280A864FF' AS TEXT)")
            try raw.execute(
                "UPDATE \"Article\" SET \"isRead\" = 'yes', \"createdAt\" = 'today' WHERE Z_PK = \(keys[10])")
            try raw.execute("UPDATE \"Article\" SET \"isRead\" = 7, \"createdAt\" = X'00' WHERE Z_PK = \(keys[11])")
        }
        _ = group
        let nameKey = ReadLater.categoryName(container.model)
        var streamed: [UInt8] = []
        try ReadLater.listArticleObjects(container.newContext()) {
            JSONObjectWriter.append(to: &streamed, $0)
            streamed.append(0x0A)
        }
        var values: [UInt8] = []
        try ReadLater.listArticles(container.newContext()) {
            $0.write(to: &values)
            values.append(0x0A)
        }
        var reference: [UInt8] = []
        let reader = container.newContext()
        let name = try reader.fetch(FetchRequest("Category")).first?[nameKey].stringValue
        try reader.forEachWithGlobalID(FetchRequest("Article", sortedBy: [Key("createdAt").ascending])) { a, gid in
            JSONObjectWriter.append(to: &reference) { o in
                o.string("id", a.id.description)
                if let gid { o.uuid("gid", gid) } else { o.null("gid") }
                o.field("title", a["title"])
                o.field("url", a["url"])
                o.field("isRead", a["isRead"])
                o.string("category", a.relationships["category"] == nil ? nil : name)
                o.field("createdAt", a["createdAt"])
            }
            reference.append(0x0A)
        }
        let text = String(decoding: streamed, as: UTF8.self)
        #expect(text.split(separator: "\n").count == 16)
        #expect(text == String(decoding: reference, as: UTF8.self))
        #expect(text == String(decoding: values, as: UTF8.self))
        // Every line is valid JSON, whatever the bytes were.
        for line in text.split(separator: "\n") {
            #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil, "\(line)")
        }
    }

    /// An object whose fields throw part way leaves the buffer as it was.
    @Test func anObjectThatThrowsLeavesNothing() {
        struct Stop: Error {}
        var bytes = Array("{\"before\":1}\n".utf8)
        #expect(throws: Stop.self) {
            try JSONObjectWriter.append(to: &bytes) { o in
                o.string("a", "b")
                throw Stop()
            }
        }
        #expect(String(decoding: bytes, as: UTF8.self) == "{\"before\":1}\n")
        JSONObjectWriter.append(to: &bytes) { o in
            o.null("n")
            o.date("d", Date(timeIntervalSince1970: 0))
            o.value("v", .array([.number(1)]))
            o.string("s", nil as String?)
        }
        #expect(
            String(decoding: bytes, as: UTF8.self)
                == "{\"before\":1}\n{\"n\":null,\"d\":\"1970-01-01T00:00:00.000Z\",\"v\":[1],\"s\":null}")
        // Keys that need escapes, a one-scalar key and ids, as a JSONValue writes them.
        let id = UUID()
        var more: [UInt8] = []
        JSONObjectWriter.append(to: &more) { o in
            o.string("q\"uote\nd", "v")
            o.bool("é", true)
            o.uuid("\u{85}", id)
        }
        let same = JSONValue.object([
            ("q\"uote\nd", .string("v")), ("é", .bool(true)), ("\u{85}", .string(id.uuidString.lowercased())),
        ])
        #expect(String(decoding: more, as: UTF8.self) == same.serialized)
    }
}
