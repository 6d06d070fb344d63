import Foundation
import ReadLater
import SharedStore
import SharedStoreSQLite
import Testing

@testable import SharedStoreCore

/// Opening group directories: permissions, schema checks, foreign and corrupt files (invariant 8).
@Suite struct StoreFileTests {
    func mode(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    func digest(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: path)) }

    /// SQLite's "unable to open" for a store whose group directory was removed while a process
    /// used it (a follower still running as its directory goes) names the directory as gone,
    /// not as read-only.
    @Test func aGroupDirectoryRemovedInUseIsNamedAsGoneNotReadOnly() throws {
        let group = TemporaryGroup()
        _ = try group.open()
        try FileManager.default.removeItem(atPath: group.path)
        // SQLITE_CANTOPEN (14), as a new connection to the removed store gets it.
        let error = StoreError(SQLiteError(code: 14, message: "unable to open database file"), path: group.storePath)
        #expect(error.code == .fileAccess)
        #expect(error.message.contains("\(group.path) no longer exists"), "\(error.message)")
        #expect(!error.message.contains("read-only"), "\(error.message)")
    }

    @Test func groupDirectoryAndFilesArePrivate() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let context = container.newContext(author: "A")
        try context.insert(Fixtures.article("x"))
        try context.save()
        #expect(try mode(group.path) == 0o700)
        for file in try FileManager.default.contentsOfDirectory(atPath: group.path) {
            #expect(try mode((group.path as NSString).appendingPathComponent(file)) == 0o600, "\(file)")
        }
    }

    @Test func aStoreMadeWithAnotherModelIsRejectedAndLeftUntouched() throws {
        let group = TemporaryGroup()
        do {
            let container = try group.open()
            let context = container.newContext(author: "A")
            try context.insert(Fixtures.article("keep me"))
            try context.save()
        }
        let before = try digest(group.storePath)
        do {
            _ = try group.open(try Model(version: ReadLater.model.version, Fixtures.allTypes.entities))
            Issue.record("opened a store made with another model")
        } catch let error as StoreError {
            #expect(error.code == .modelMismatch)
            #expect(error.message.contains("different model"))
        }
        var changed = ReadLater.model.entities
        changed[0].attributes[3] = Attribute("isRead", .integer)
        do {
            _ = try group.open(try Model(version: ReadLater.model.version, changed))
            Issue.record("opened a store made with another model")
        } catch let error as StoreError {
            #expect(error.code == .modelMismatch)
            #expect(error.message.contains("attribute Article.isRead"))
        }
        #expect(try digest(group.storePath) == before)
        let again = try group.open()
        #expect(try again.newContext().fetch(ReadLater.Article.self).map(\.title) == ["keep me"])
    }

    @Test func aFileThatIsNotADatabaseIsRejectedAndLeftUntouched() throws {
        let group = TemporaryGroup()
        try FileManager.default.createDirectory(atPath: group.path, withIntermediateDirectories: true)
        let junk = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        try junk.write(to: URL(fileURLWithPath: group.storePath))
        expectStoreError(.notAStore) { _ = try group.open() }
        #expect(try digest(group.storePath) == junk)
    }

    @Test func anotherApplicationsDatabaseIsRejectedAndLeftUntouched() throws {
        let group = TemporaryGroup()
        try FileManager.default.createDirectory(atPath: group.path, withIntermediateDirectories: true)
        do {
            let c = try SQLiteConnection(path: group.storePath, busyTimeoutMilliseconds: 100)
            try c.execute("CREATE TABLE notes(x TEXT); INSERT INTO notes VALUES ('mine');")
        }
        let before = try digest(group.storePath)
        do {
            _ = try group.open()
            Issue.record("opened a foreign database")
        } catch let error as StoreError {
            #expect(error.code == .notAStore)
            #expect(error.message.contains("another application"))
        }
        #expect(try digest(group.storePath) == before)
    }

    @Test func aGroupPathThatIsAFileGivesAClearError() throws {
        let group = TemporaryGroup()
        try FileManager.default.createDirectory(atPath: group.root, withIntermediateDirectories: true)
        try Data("x".utf8).write(to: URL(fileURLWithPath: group.path))
        expectStoreError(.fileAccess) { _ = try group.open() }
    }

    @Test func aTruncatedHistoryRecordIsReportedNotTrapped() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let context = container.newContext(author: "A")
        try context.insert(Fixtures.article("x"))
        try context.save()
        try container.writer.withConnection { c in try c.execute("UPDATE ss_history SET changes = x'0105'") }
        expectStoreError(.historyCorrupt) { _ = try container.fetchHistory(HistoryRequest()) }
        #expect(try context.count(FetchRequest("Article")) == 1)
    }

    /// Text is bound from its UTF-8 in place: every kind of String a value can hold (empty,
    /// small, large, with a NUL inside, not ASCII, bridged from NSString) reads back as text of
    /// the same bytes, never as NULL or cut at a NUL.
    @Test func textIsBoundWithEveryByteAndNeverAsNull() throws {
        let group = TemporaryGroup()
        try FileManager.default.createDirectory(atPath: group.path, withIntermediateDirectories: true)
        let c = try SQLiteConnection(path: group.storePath, busyTimeoutMilliseconds: 100)
        let bridged = NSString(string: "bridged é \u{1F600}") as String
        let texts = [
            "", "a", "a\u{0}b", "\u{0}", "e\u{301}", String(repeating: "long ", count: 2000), bridged,
            String("substring as text".dropFirst(3)),
        ]
        for text in texts {
            let row = try c.cached("SELECT typeof(?1), length(CAST(?1 AS BLOB)), CAST(?1 AS BLOB)").firstRow(
                [.text(text)]
            ) { ($0.text(0), $0.int64(1), $0.blob(2)) }
            #expect(row?.0 == "text", "\(Array(text.utf8).prefix(8)) is text")
            #expect(row?.1 == Int64(text.utf8.count))
            #expect(row?.2 == Array(text.utf8))
        }
    }
}
