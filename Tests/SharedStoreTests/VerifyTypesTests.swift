import Foundation
import SharedStore
import SharedStoreSupport
import Testing

@testable import SharedStoreCore
@testable import SharedStoreSQLite
@testable import SharedStoreSync

/// `storectl verify` says when a column holds a value of another SQLite type than its attribute's
/// (another tool's `UPDATE`): a read takes `'abc'` for 0, `'yes'` for false, a date's text for
/// 1970, and nothing else said so (found by the review of issue 22).
@Suite struct VerifyTypesTests {
    @Test func aValueOfAnotherTypeIsNamedByVerify() throws {
        let group = TemporaryGroup()
        let container = try group.open(Fixtures.allTypes, signal: false)
        let context = container.newContext(author: "A")
        let temporary = try context.insert(
            "Thing",
            [
                "s": "text", "i": 3, "d": 1.5, "b": true, "t": .date(Date(timeIntervalSince1970: 10)),
                "bin": .data(Data([1, 2])), "u": .uuid(UUID()),
            ])
        let id = try context.save().permanentID(for: temporary)
        func typesCheck() -> VerifyCheck? {
            StoreVerifier.verify(container: container, registry: nil).first { $0.name == "value-types" }
        }
        #expect(typesCheck()?.ok == true, "\(String(describing: typesCheck()))")
        let planted = [
            ("i", "'abc'", "Thing.i not an integer", "text 'abc'"), ("b", "'yes'", "Thing.b not an integer", "text"),
            ("i", "1.5", "Thing.i not an integer", "real 1.5"), ("t", "'2024-01-01'", "Thing.t not a number", "text"),
            ("d", "x'00'", "Thing.d not a number", "blob"), ("bin", "'text'", "Thing.bin not bytes", "text"),
            ("s", "x'41'", "Thing.s not text", "blob X'41'"),
            // Not UTF-8: a read repairs it, and gives (and a mirror sends) another text.
            ("s", "CAST(x'41ff42' AS TEXT)", "Thing.s not UTF-8 text", "text 'A\u{FFFD}B'"),
        ]
        for (column, value, what, shown) in planted {
            let raw = try SQLiteConnection(path: group.storePath, busyTimeoutMilliseconds: 1000)
            let before = try raw.cached("SELECT quote(\"\(column)\") FROM \"Thing\"").firstRow { $0.text(0) } ?? "NULL"
            try raw.execute("UPDATE \"Thing\" SET \"\(column)\" = \(value)")
            let check = try #require(typesCheck())
            #expect(!check.ok, "\(column) = \(value): \(check)")
            #expect(check.detail.contains("1 \(what)"), "\(check.detail)")
            #expect(check.detail.contains("Thing/\(id.primaryKey) holds \(shown)"), "\(check.detail)")
            try raw.execute("UPDATE \"Thing\" SET \"\(column)\" = \(before)")
            #expect(typesCheck()?.ok == true, "\(column) restored: \(String(describing: typesCheck()))")
        }
    }
}

/// A text column of a UUID, decimal, URL or JSON attribute holds the form a save writes; verify
/// names another (a UUID in capitals, which a fetch by its value misses; `'1,5'`, which a decimal
/// read takes for 1), and a save refuses a decimal that would read back as another number.
@Suite struct VerifyTextFormsTests {
    static let model: Model = {
        do {
            return try Model([
                Entity(
                    "Thing",
                    attributes: [
                        Attribute("u", .uuid, optional: true), Attribute("price", .decimal, optional: true),
                        Attribute("link", .url, optional: true), Attribute("extra", .json, optional: true),
                    ])
            ])
        } catch {
            preconditionFailure("the text forms model: \(error)")
        }
    }()

    @Test func textOfAnotherFormIsNamedByVerify() throws {
        let group = TemporaryGroup()
        let container = try group.open(Self.model, signal: false)
        let context = container.newContext(author: "A")
        let uuid = UUID()
        let temporary = try context.insert(
            "Thing", ["u": .uuid(uuid), "price": "12.50", "link": "https://example.com/a", "extra": "{\"a\":[1,2]}"])
        let id = try context.save().permanentID(for: temporary)
        func formsCheck() -> VerifyCheck? {
            StoreVerifier.verify(container: container, registry: nil).first { $0.name == "value-types" }
        }
        #expect(formsCheck()?.ok == true, "\(String(describing: formsCheck()))")
        let planted = [
            ("u", "'\(uuid.uuidString)'", "Thing.u not a UUID in lowercase"), ("u", "'xyz'", "Thing.u not a UUID"),
            ("price", "'1,5'", "Thing.price not a decimal number"), ("price", "'1.5x'", "Thing.price not a decimal"),
            ("price", "'-'", "Thing.price not a decimal"), ("link", "'not a url'", "Thing.link not an absolute URL"),
            ("extra", "'{\"a\":'", "Thing.extra not JSON"),
            // What a save writes as `a%20b`: a fetch by the URL misses the planted text.
            ("link", "'https://example.com/a b'", "Thing.link not an absolute URL as a save writes it"),
            // Not UTF-8: a read repairs it, and gives another text than the one stored.
            ("extra", "CAST(x'22ff22' AS TEXT)", "Thing.extra not JSON"),
        ]
        for (column, value, what) in planted {
            let raw = try SQLiteConnection(path: group.storePath, busyTimeoutMilliseconds: 1000)
            let before = try raw.cached("SELECT quote(\"\(column)\") FROM \"Thing\"").firstRow { $0.text(0) } ?? "NULL"
            try raw.execute("UPDATE \"Thing\" SET \"\(column)\" = \(value)")
            let check = try #require(formsCheck())
            #expect(!check.ok, "\(column) = \(value): \(check)")
            #expect(check.detail.contains("1 \(what)"), "\(check.detail)")
            let shown = value.hasPrefix("CAST") ? "'\"\u{FFFD}\"'" : value
            #expect(check.detail.contains("Thing/\(id.primaryKey) holds text \(shown)"), "\(check.detail)")
            try raw.execute("UPDATE \"Thing\" SET \"\(column)\" = \(before)")
            #expect(formsCheck()?.ok == true, "\(column) restored: \(String(describing: formsCheck()))")
        }
    }

    @Test func aSaveRefusesADecimalThatWouldReadBackAsAnotherNumber() throws {
        let group = TemporaryGroup()
        let container = try group.open(Self.model, signal: false)
        let context = container.newContext(author: "A")
        let refused = [
            "1.5x", "1,5", "-", ".", "0x10", "1e", "1e+", " 1.5", "1.5 ", "nan", "1e400", "1..5", "1.5.2", "--1", "",
            "4" + String(repeating: "2", count: 38), "1" + String(repeating: "2", count: 39),
            "340282366920938463463374607431768211456",
        ]
        for text in refused {
            _ = try context.insert("Thing", ["price": .string(text)])
            #expect(throws: StoreError.self, "'\(text)'") { try context.save() }
            context.rollback()
        }
        let kept = [
            "12.50", "-.5", "5.", "+1", "1E-5", "1e+20", "0.00000000000000000000000000000000000000001",
            "1" + String(repeating: "2", count: 37), "1" + String(repeating: "0", count: 100), "-0",
            // 39 significant digits, up to the largest significand (2^128 - 1).
            "340282366920938463463374607431768211455", "-3.40282366920938463463374607431768211455e10",
            "299999999999999999999999999999999999999",
        ]
        for text in kept {
            let temporary = try context.insert("Thing", ["price": .string(text)])
            let id = try context.save().permanentID(for: temporary)
            #expect(try context.object(with: id)["price"] == .string(text), "'\(text)' is kept as written")
            #expect(DecimalText.parse(text) == Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")))
        }
        #expect(DecimalText.parse(Decimal.greatestFiniteMagnitude.description) == Decimal.greatestFiniteMagnitude)
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let wide =
                Decimal(UInt64.random(in: 0...UInt64.max, using: &generator))
                * Decimal(UInt64.random(in: 0...UInt64.max, using: &generator))
            #expect(DecimalText.parse(wide.description) == wide, "\(wide) reads back from its description")
            let d = Decimal(
                sign: Bool.random(using: &generator) ? .minus : .plus,
                exponent: Int.random(in: -30...30, using: &generator),
                significand: Decimal(UInt64.random(in: 0...UInt64.max, using: &generator)))
            #expect(DecimalText.parse(d.description) == d, "\(d) reads back from its description")
        }
    }
}
