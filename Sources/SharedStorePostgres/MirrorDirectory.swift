import Foundation
import SharedStoreSupport

/// The space directory (issue 25): which PostgreSQL server holds each space, on a server of its
/// own (or one of the spaces' servers). Spaces are the unit of partitioning: a space's log is
/// whole on one server, and a mirror started with the directory connects to its space's server
/// and follows it when an administrator moves the space (``MirrorSpaces/move(_:to:toServer:directory:)``).
///
/// Every role may read it (a mirror must find its space; a space's name and server are no
/// secret, its rows are); only its owner, the administrator, changes it. A server is stored as a
/// libpq connection string without a password: each machine adds its own role and password from
/// its environment (`PGUSER`, `~/.pgpass`).
public struct MirrorDirectory {
    /// The schema of the directory's table.
    public static let schema = "sharedstore_directory"

    public let connection: PostgresConnection

    /// The directory on the server `connection` reaches.
    public init(connection: PostgresConnection) { self.connection = connection }

    /// One entry: a space, its server, and how many times it was placed (each move adds one).
    public struct Entry: Sendable, Hashable {
        public let space: String
        public let server: String
        public let epoch: Int64
    }

    /// Makes the directory's table when missing, readable by every role (run as the administrator).
    public func prepare() throws {
        try connection.transaction {
            try connection.execute("SELECT pg_advisory_xact_lock(hashtext($1))", [Self.schema])
            try connection.execute("CREATE SCHEMA IF NOT EXISTS \(Self.schema)")
            try connection.execute(
                """
                CREATE TABLE IF NOT EXISTS \(Self.schema).spaces(
                    space text PRIMARY KEY, server text NOT NULL, epoch bigint NOT NULL DEFAULT 1,
                    placed_at timestamptz NOT NULL DEFAULT now())
                """)
            try connection.execute("GRANT USAGE ON SCHEMA \(Self.schema) TO PUBLIC")
            try connection.execute("GRANT SELECT ON \(Self.schema).spaces TO PUBLIC")
        }
    }

    /// The server of space `space`.
    ///
    /// - Throws: ``PostgresError`` when the directory has no such space, or no directory is there.
    public func server(of space: String) throws -> String {
        _ = try MirrorServer.schema(forSpace: space)
        let rows: [[String?]]
        do {
            rows = try connection.execute("SELECT server FROM \(Self.schema).spaces WHERE space = $1", [space])
        } catch let error as PostgresError where error.sqlState == "42P01" || error.sqlState == "3F000" {
            throw PostgresError(
                sqlState: error.sqlState,
                message: "there is no space directory on \(connection.serverDescription) (an administrator makes one "
                    + "with 'storectl mirror-admin --place SPACE --on URL --directory URL')")
        }
        guard let server = rows.first?[0] else {
            throw PostgresError(
                sqlState: "3F000",
                message: "the space directory has no space '\(space)' (an administrator places it "
                    + "with 'storectl mirror-admin --place \(space) --on URL --directory URL')")
        }
        try Self.checkServer(server)
        return server
    }

    /// Every entry, by space.
    public func list() throws -> [Entry] {
        try connection.execute("SELECT space, server, epoch FROM \(Self.schema).spaces ORDER BY space").compactMap {
            row in
            guard row.count == 3, let space = row[0], let server = row[1], let epoch = row[2].flatMap({ Int64($0) })
            else { return nil }
            return Entry(space: space, server: server, epoch: epoch)
        }
    }

    /// Records that space `space` is on `server` (a libpq string without a password).
    ///
    /// - Throws: ``PostgresError`` for a string libpq cannot parse or one with a password.
    public func place(_ space: String, on server: String) throws {
        _ = try MirrorServer.schema(forSpace: space)
        try Self.checkServer(server)
        try prepare()
        try connection.execute(
            """
            INSERT INTO \(Self.schema).spaces(space, server) VALUES ($1, $2)
            ON CONFLICT (space) DO UPDATE SET server = EXCLUDED.server, epoch = spaces.epoch + 1, placed_at = now()
            """, [space, server])
    }

    /// Refuses a server string libpq cannot parse, or one that holds a password (every role
    /// reads the directory).
    static func checkServer(_ server: String) throws {
        let options = try PostgresConnection.options(of: server)
        guard options["password"].map({ $0.isEmpty }) ?? true, options["sslpassword"].map({ $0.isEmpty }) ?? true else {
            throw PostgresError(
                sqlState: "22023",
                message: "a server in the space directory must not hold a password (every role reads it): each "
                    + "machine's password comes from its own ~/.pgpass")
        }
    }
}
