import Foundation
import SharedStoreSQLite
import Testing

/// A statement binds short text and blobs from buffers of its own (SQLITE_STATIC) instead of
/// having SQLite copy each value: every value reads back as it was bound, whatever the order of
/// lengths (a buffer outgrown, a long value SQLite copies, an empty one that is not NULL), and a
/// value stays readable while the statement runs.
@Suite struct StatementBindingTests {
    /// Texts and blobs around the buffers' sizes (64 bytes at first, 1,024 at most), in random
    /// order, through every way of binding: by position, a list, a UUID.
    @Test func everyBoundValueReadsBackAsItWasBound() throws {
        let seed = UInt64.random(in: 1...UInt64(UInt32.max))
        var random = TestRandom(state: seed)
        let group = TemporaryGroup()
        try FileManager.default.createDirectory(atPath: group.path, withIntermediateDirectories: true)
        let db = try SQLiteConnection(path: group.path + "/b.sqlite", busyTimeoutMilliseconds: 1000)
        try db.execute("CREATE TABLE t(k INTEGER PRIMARY KEY, a, b, c, d)")
        let lengths = [0, 1, 15, 16, 63, 64, 65, 200, 1023, 1024, 1025, 5000]
        let pieces = ["a", "é", "日", "👩‍👩‍👧", "\0", "\t"]
        func text() -> String {
            let n = random.pick(lengths)
            var s = ""
            while s.utf8.count < n { s += random.pick(pieces) }
            return s
        }
        func blob() -> [UInt8] { (0..<random.pick(lengths)).map { _ in UInt8(random.next(256)) } }
        var expected: [[SQLValue]] = []
        let insert = try db.cached("INSERT INTO t(a, b, c, d) VALUES (?, ?, ?, ?)")
        for row in 0..<2_000 {
            let uuid = UUID()
            let values: [SQLValue] = [.text(text()), .blob(blob()), .text(text()), .blob(uuidBytes(uuid))]
            switch row % 3 {
            case 0:
                for (i, v) in values.prefix(3).enumerated() { try insert.bind(v, at: Int32(i + 1)) }
                try insert.bind(uuid: uuid, at: 4)
                try insert.run()
            case 1:
                try insert.execute(values)
            default:
                try db.execute("INSERT INTO t(a, b, c, d) VALUES (?, ?, ?, ?)", values)
            }
            expected.append(values)
        }
        let stored = try db.cached("SELECT a, b, c, d, typeof(a), typeof(c) FROM t ORDER BY k").rows { row in
            ([row.value(0), row.value(1), row.value(2), row.value(3)], row.text(4), row.text(5))
        }
        #expect(stored.count == expected.count, "seed \(seed)")
        for (i, (values, typeA, typeC)) in stored.enumerated() where i < expected.count {
            #expect(values == expected[i], "seed \(seed): row \(i + 1)")
            // Empty text is text, not NULL (a buffer always has an address).
            #expect(typeA == "text" && typeC == "text", "seed \(seed): row \(i + 1) \(typeA) \(typeC)")
        }
    }

    /// A value bound to a running query is read at every step of it, from the statement's buffer:
    /// it is the value bound, row after row, and the next run binds another.
    @Test func aBoundValueHoldsWhileTheStatementRuns() throws {
        let group = TemporaryGroup()
        try FileManager.default.createDirectory(atPath: group.path, withIntermediateDirectories: true)
        let db = try SQLiteConnection(path: group.path + "/r.sqlite", busyTimeoutMilliseconds: 1000)
        try db.execute("CREATE TABLE n(i INTEGER)")
        for i in 0..<500 { try db.execute("INSERT INTO n VALUES (?)", [.integer(Int64(i))]) }
        let query = try db.cached("SELECT ? || i FROM n ORDER BY i")
        for prefix in ["short-", String(repeating: "long enough to outgrow the first buffer ", count: 3), "", "x"] {
            var seen = 0
            try query.forEachRow([.text(prefix)]) { row in
                #expect(row.text(0) == prefix + String(seen))
                // Other statements of the connection bind meanwhile: their buffers are their own.
                try db.execute("INSERT INTO n SELECT NULL WHERE ? = 'never'", [.text("a value of another statement")])
                seen += 1
            }
            #expect(seen == 500)
        }
    }

    /// A statement that ran and was not reset refuses a binding: the value it holds is neither
    /// overwritten nor freed, and the next run (which resets it) inserts that value again, as
    /// when SQLite kept copies (found by a review: the buffer was written before SQLite refused).
    @Test func aRefusedBindingLeavesTheBoundValueAsItWas() throws {
        let group = TemporaryGroup()
        try FileManager.default.createDirectory(atPath: group.path, withIntermediateDirectories: true)
        let db = try SQLiteConnection(path: group.path + "/m.sqlite", busyTimeoutMilliseconds: 1000)
        try db.execute("CREATE TABLE t(k INTEGER PRIMARY KEY, a)")
        let insert = try db.cached("INSERT INTO t(a) VALUES (?)")
        // A shorter value (written over the kept buffer) and a longer one (a new buffer).
        for refused in ["BBB", String(repeating: "C", count: 300)] {
            try db.execute("DELETE FROM t")
            try insert.bind(.text("AAAAAAAAAA"), at: 1)
            #expect(try insert.step() == false)
            #expect(throws: SQLiteError.self) { try insert.bind(.text(refused), at: 1) }
            // Memory freed now would be handed out again: the value must not come from it.
            let noise = (0..<64).map { _ in [UInt8](repeating: 0x5A, count: 64) }
            try insert.run()
            #expect(noise.count == 64)
            let stored = try db.cached("SELECT a FROM t ORDER BY k").rows { $0.text(0) }
            #expect(stored == ["AAAAAAAAAA", "AAAAAAAAAA"], "after refusing \(refused.prefix(5))…")
        }
    }

    func uuidBytes(_ uuid: UUID) -> [UInt8] {
        withUnsafeBytes(of: uuid.uuid) { Array($0) }
    }
}
