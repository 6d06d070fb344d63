import Foundation
import SharedStorePostgres
import Testing

/// The PostgreSQL layer of the mirror (issue 14), against a real server: `Scripts/test.sh` starts
/// one in a temporary directory (Scripts/lib/postgres.sh) and exports libpq's environment. Run
/// alone, `swift test` skips these when no server is named (PGHOST unset).
@Suite(.enabled(if: ProcessInfo.processInfo.environment["PGHOST"] != nil, "no PostgreSQL server (PGHOST)"))
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
}
