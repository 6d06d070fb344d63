import Foundation
import SharedStore
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
