import Foundation
import SharedStorePostgres
import Testing

/// The PostgreSQL layer of the mirror (issue 14), against a real server: `Scripts/test.sh` starts
/// one in a temporary directory (Scripts/lib/postgres.sh) and exports libpq's environment. Run
/// alone, `swift test` skips these when no server is named (PGHOST unset).
@Suite(
    .enabled(if: ProcessInfo.processInfo.environment["PGHOST"] != nil, "no PostgreSQL server (PGHOST)"),
    .tags(.postgres))
struct PostgresTests {
    @Test func aConnectionFromTheEnvironmentRunsParameterizedStatements() throws {
        let pg = try PostgresConnection()
        #expect(pg.serverVersion >= 100_000)
        let schema = "sharedstore_test_\(UUID().uuidString.prefix(8).lowercased())"
        try pg.execute("CREATE SCHEMA \(schema)")
        defer { _ = try? pg.execute("DROP SCHEMA \(schema) CASCADE") }
        try pg.execute("CREATE TABLE \(schema).t(k bigint PRIMARY KEY, v text)")
        try pg.execute("INSERT INTO \(schema).t VALUES ($1, $2), ($3, NULL)", ["1", "Café 'quoted'", "2"])
        let rows = try pg.execute("SELECT k, v FROM \(schema).t WHERE k >= $1 ORDER BY k", ["1"])
        #expect(rows == [["1", "Café 'quoted'"], ["2", nil]])
        do {
            try pg.execute("INSERT INTO \(schema).t VALUES ($1, $2)", ["1", "again"])
            Issue.record("a duplicate key was accepted")
        } catch let error as PostgresError {
            #expect(error.sqlState == "23505", "\(error)")
        }
    }

    @Test func aServerThatIsNotThereIsAClearError() {
        do {
            _ = try PostgresConnection("host=/nonexistent-sharedstore connect_timeout=2")
            Issue.record("connected to nothing")
        } catch let error as PostgresError {
            #expect(error.message.hasPrefix("cannot connect:"), "\(error)")
        } catch {
            Issue.record("\(error)")
        }
    }

    func server() throws -> MirrorServer {
        let schema = "mirror_test_\(UUID().uuidString.prefix(8).lowercased())"
        return try MirrorServer(connection: try PostgresConnection(), schema: schema)
    }

    @Test func theServerTablesAreMadeOnceAndUploadsAreIdempotentAndOrdered() throws {
        let a = try server()
        defer { _ = try? a.connection.execute("DROP SCHEMA \(a.schema) CASCADE") }
        try a.prepare()
        let b = try MirrorServer(connection: try PostgresConnection(), schema: a.schema)
        try b.prepare()  // a second mirror finds them made
        let (one, two) = (UUID(), UUID())
        let s1 = try #require(try a.upload(origin: one, token: 1, author: "MainApp", payload: #"{"changes":[]}"#))
        #expect(try a.upload(origin: one, token: 1, author: "MainApp", payload: #"{"changes":[]}"#) == nil, "repeated")
        let s2 = try #require(try b.upload(origin: two, token: 1, author: nil, payload: #"{"changes":[1]}"#))
        #expect(s2 > s1)
        let all = try a.transactions(after: 0, excluding: nil)
        #expect(all.map(\.sequence) == [s1, s2] && all.map(\.origin) == [one, two])
        #expect(try a.transactions(after: 0, excluding: one).map(\.origin) == [two], "not its own")
        #expect(try a.transactions(after: s2, excluding: nil).isEmpty)
    }

    @Test func aNewerServerLayoutIsRefused() throws {
        let a = try server()
        defer { _ = try? a.connection.execute("DROP SCHEMA \(a.schema) CASCADE") }
        try a.prepare()
        try a.connection.execute("UPDATE \(a.schema).meta SET value = '99' WHERE key = 'schema_version'")
        do {
            try a.prepare()
            Issue.record("a newer layout was accepted")
        } catch let error as PostgresError {
            #expect(error.message.contains("update the app"), "\(error)")
        }
    }

    @Test func anUploadWakesAListeningMirror() throws {
        let a = try server()
        defer { _ = try? a.connection.execute("DROP SCHEMA \(a.schema) CASCADE") }
        try a.prepare()
        let listener = try MirrorServer(connection: try PostgresConnection(), schema: a.schema)
        try listener.listen()
        let sequence = try #require(try a.upload(origin: UUID(), token: 7, author: nil, payload: "{}"))
        var received: [(channel: String, payload: String)] = []
        let deadline = Date().addingTimeInterval(10)
        // Waits for this upload's own wake-up: another test's upload on the same server may wake
        // the listener first.
        func arrived() -> Bool {
            received.contains { $0.channel == MirrorServer.channel && $0.payload == String(sequence) }
        }
        while !arrived() && Date() < deadline {
            received += try listener.connection.notifications(timeout: 1)
        }
        #expect(received.contains { $0.channel == MirrorServer.channel && $0.payload == String(sequence) })
    }
}
