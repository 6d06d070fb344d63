import CLibPQ
import Foundation
import SharedStoreSupport

/// One transaction on the server: a store's (its origin's) history transaction, in the server's
/// order.
public struct MirrorTransaction: Sendable, Hashable {
    /// The server's sequence number: every mirror applies transactions in this order.
    public let sequence: Int64
    public let origin: UUID
    public let token: Int64
    public let author: String?
    /// The transaction's changes, as JSON.
    public let payload: String
}

/// One local transaction to upload.
public struct MirrorUpload: Sendable, Hashable {
    public let token: Int64
    public let author: String?
    public let payload: String

    public init(token: Int64, author: String?, payload: String) {
        self.token = token
        self.author = author
        self.payload = payload
    }
}

/// The mirror's tables on a PostgreSQL server, in a schema of their own (`sharedstore_mirror`),
/// created and versioned by the mirror (issue 14). The server is the one order every machine
/// applies: uploads are serialized (an advisory lock per upload transaction), so a sequence
/// number is never committed before a smaller one and a reader after sequence `n` misses nothing.
/// An upload is idempotent by (origin, token): a mirror killed after uploading and before noting
/// it uploads again, and nothing is doubled.
public struct MirrorServer {
    /// The layout of the server's tables this build writes and reads.
    public static let schemaVersion = 1
    /// The channel LISTEN/NOTIFY wakes mirrors on.
    public static let channel = "sharedstore_mirror"

    public let connection: PostgresConnection
    public let schema: String

    public init(connection: PostgresConnection, schema: String = "sharedstore_mirror") throws {
        guard schema.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }), !schema.isEmpty else {
            throw PostgresError(sqlState: nil, message: "schema name '\(schema)' is not a plain identifier")
        }
        self.connection = connection
        self.schema = schema
    }

    /// Creates the schema and its tables when missing (several mirrors may start at once: an
    /// advisory lock makes it one at a time) and checks the server's layout version.
    ///
    /// - Throws: ``PostgresError`` when the server's tables were made by a newer mirror.
    public func prepare() throws {
        try transaction {
            try connection.execute("SELECT pg_advisory_xact_lock(hashtext($1))", [schema])
            try connection.execute("CREATE SCHEMA IF NOT EXISTS \(schema)")
            try connection.execute(
                "CREATE TABLE IF NOT EXISTS \(schema).meta(key text PRIMARY KEY, value text NOT NULL)")
            try connection.execute(
                """
                CREATE TABLE IF NOT EXISTS \(schema).transactions(
                    sequence bigserial PRIMARY KEY,
                    origin uuid NOT NULL,
                    token bigint NOT NULL,
                    author text,
                    uploaded_at timestamptz NOT NULL DEFAULT now(),
                    payload text NOT NULL,
                    UNIQUE (origin, token))
                """)
            try connection.execute(
                "INSERT INTO \(schema).meta(key, value) VALUES ('schema_version', $1) ON CONFLICT (key) DO NOTHING",
                [String(Self.schemaVersion)])
            let rows = try connection.execute("SELECT value FROM \(schema).meta WHERE key = 'schema_version'")
            guard let text = rows.first?[0], let version = Int(text) else {
                throw PostgresError(sqlState: nil, message: "\(schema).meta has no readable schema_version")
            }
            guard version <= Self.schemaVersion else {
                throw PostgresError(
                    sqlState: nil,
                    message: "the server's mirror tables are version \(version), newer than this build's "
                        + "(\(Self.schemaVersion)): update the app")
            }
        }
    }

    /// Uploads one local transaction and wakes the other mirrors (at commit). Returns its
    /// sequence, or nil when the server had it already (an upload repeated after a crash).
    @discardableResult
    public func upload(origin: UUID, token: Int64, author: String?, payload: String) throws -> Int64? {
        let (sequence, isNew) = try upload(
            origin: origin, [MirrorUpload(token: token, author: author, payload: payload)])[0]
        return isNew ? sequence : nil
    }

    /// Uploads local transactions in one server transaction (one lock, one wake-up) and returns
    /// each one's sequence, with whether it is new (false: the server had it from an earlier
    /// attempt, and keeps what it had).
    public func upload(origin: UUID, _ uploads: [MirrorUpload]) throws -> [(sequence: Int64, isNew: Bool)] {
        guard !uploads.isEmpty else { return [] }
        return try transaction {
            // One upload at a time: sequence numbers commit in order.
            try connection.execute("SELECT pg_advisory_xact_lock(hashtext($1 || '.upload'))", [schema])
            let originText = origin.uuidString.lowercased()
            var out: [(Int64, Bool)] = []
            var newest: Int64?
            for u in uploads {
                let rows = try connection.execute(
                    """
                    INSERT INTO \(schema).transactions(origin, token, author, payload) VALUES ($1, $2, $3, $4)
                    ON CONFLICT (origin, token) DO NOTHING RETURNING sequence
                    """, [originText, String(u.token), u.author, u.payload])
                if let text = rows.first?[0], let sequence = Int64(text) {
                    out.append((sequence, true))
                    newest = sequence
                    continue
                }
                let existing = try connection.execute(
                    "SELECT sequence FROM \(schema).transactions WHERE origin = $1 AND token = $2",
                    [originText, String(u.token)])
                guard let text = existing.first?[0], let sequence = Int64(text) else {
                    throw PostgresError(sqlState: nil, message: "upload of token \(u.token) neither added nor found")
                }
                out.append((sequence, false))
            }
            if let newest { try connection.execute("SELECT pg_notify($1, $2)", [Self.channel, String(newest)]) }
            return out
        }
    }

    /// How many transactions of other origins are on the server after `sequence`.
    public func count(after sequence: Int64, excluding origin: UUID?) throws -> Int64 {
        let rows = try connection.execute(
            """
            SELECT count(*) FROM \(schema).transactions
            WHERE sequence > $1 AND ($2::uuid IS NULL OR origin <> $2::uuid)
            """, [String(sequence), origin?.uuidString.lowercased()])
        return rows.first?[0].flatMap { Int64($0) } ?? 0
    }

    /// Up to `limit` transactions after `sequence`, in the server's order, without those of
    /// `origin` (a mirror's own).
    public func transactions(after sequence: Int64, excluding origin: UUID?, limit: Int = 500) throws
        -> [MirrorTransaction]
    {
        try connection.execute(
            """
            SELECT sequence, origin, token, author, payload FROM \(schema).transactions
            WHERE sequence > $1 AND ($2::uuid IS NULL OR origin <> $2::uuid) ORDER BY sequence LIMIT $3
            """, [String(sequence), origin?.uuidString.lowercased(), String(limit)]
        ).compactMap { row in
            guard row.count == 5, let s = row[0].flatMap({ Int64($0) }),
                let o = row[1].flatMap({ UUID(uuidString: $0) }),
                let t = row[2].flatMap({ Int64($0) }), let payload = row[4]
            else { return nil }
            return MirrorTransaction(sequence: s, origin: o, token: t, author: row[3], payload: payload)
        }
    }

    /// Starts receiving the wake-ups of uploads on this connection.
    public func listen() throws { try connection.execute("LISTEN \(Self.channel)") }

    /// Runs `body` in one server transaction (rolled back when it throws).
    private func transaction<T>(_ body: () throws -> T) throws -> T {
        try connection.execute("BEGIN")
        do {
            let result = try body()
            try connection.execute("COMMIT")
            return result
        } catch {
            _ = try? connection.execute("ROLLBACK")
            throw error
        }
    }
}
