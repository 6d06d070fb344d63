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
    /// The transaction's changes, as JSON (empty where ``withheld``).
    public let payload: String
    /// The size in bytes of a payload that was not read because it is past the reader's
    /// ``MirrorServer/rowLimit`` (nil: read).
    public var withheld: Int64? = nil
}

/// Which row a log holds at a sequence: the store that uploaded it and the key it went up under
/// (together, one upload: an upload repeated is the same row).
public struct MirrorRowKey: Sendable, Hashable {
    public let sequence: Int64
    public let origin: UUID
    public let token: Int64

    /// The row at `sequence` of `origin` under key `token`.
    public init(sequence: Int64, origin: UUID, token: Int64) {
        self.sequence = sequence
        self.origin = origin
        self.token = token
    }
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

/// The mirror's tables on a PostgreSQL server, in a schema of their own, created and versioned
/// by the mirror (issue 14). The server is the one order every machine applies: uploads are
/// serialized (an advisory lock per upload transaction), so a sequence number is never committed
/// before a smaller one and a reader after sequence `n` misses nothing. An upload is idempotent
/// by (origin, token): a mirror killed after uploading and before noting it uploads again, and
/// nothing is doubled.
///
/// Without a space, the log is `sharedstore_mirror`, made by the first mirror that connects: one
/// person's machines. A **space** (issue 25) is a log of its own, `sharedstore_space_NAME`, made
/// by an administrator (``MirrorSpaces``) and readable and writable only by the roles granted it:
/// PostgreSQL's privileges keep spaces apart, not the client.
public struct MirrorServer {
    /// The layout of the server's tables this build writes and reads.
    public static let schemaVersion = 1
    /// The channel LISTEN/NOTIFY wakes mirrors on, for the log outside any space.
    public static let channel = "sharedstore_mirror"
    /// The schema of the log outside any space.
    public static let defaultSchema = "sharedstore_mirror"
    /// The SQLSTATE of a space's log that was moved to another server (its uploads are refused
    /// there; the space directory names the new one).
    public static let movedState = "SSMOV"
    /// The SQLSTATE of a row a member uploads under a store id another role's uploads claimed.
    public static let foreignOriginState = "SSORG"
    /// The prefix of a space's schema, and of the role that may use it.
    public static let spacePrefix = "sharedstore_space_"

    public let connection: PostgresConnection
    public let schema: String
    /// How long an upload waits for the space's upload lock (then it fails, naming the session
    /// that holds it, and the next round tries again), and how long a prune or a move does.
    public var uploadLockWait: TimeInterval = 30
    public var adminLockWait: TimeInterval = 300
    /// How long a commit of this log's writes may wait for the server (with synchronous
    /// replication, for a standby's confirmation) before it is given up on, unconfirmed, and
    /// the round fails naming why.
    public var commitWait: TimeInterval = 30
    /// The space this log is (nil: the log outside any space).
    public let space: String?
    /// The largest payload, in bytes, that reads of transactions bring from the server: a larger
    /// one comes back ``MirrorTransaction/withheld``, unread, so that a row a member planted
    /// cannot exhaust this machine's memory (reading a row costs about three times its size).
    public var rowLimit: Int64 = Int64.max
    /// How many bytes of payloads one read of transactions brings at most, one row at least:
    /// however large the rows, a read holds one batch of this size, or one row.
    public static let fetchBudget: Int64 = 16 << 20

    /// The log in `schema` (a plain identifier), outside any space.
    public init(connection: PostgresConnection, schema: String = "sharedstore_mirror") throws {
        guard schema.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }), !schema.isEmpty else {
            throw PostgresError(sqlState: nil, message: "schema name '\(schema)' is not a plain identifier")
        }
        self.connection = connection
        self.schema = schema
        space = nil
    }

    /// The log of space `space` (nil: the log outside any space).
    ///
    /// - Throws: ``PostgresError`` when `space` is not a valid space name (``schema(forSpace:)``).
    public init(connection: PostgresConnection, space: String?) throws {
        self.connection = connection
        schema = try Self.schema(forSpace: space)
        self.space = space
    }

    /// The schema (and the role) of space `space`: `sharedstore_space_NAME`; the default log's
    /// schema for nil.
    ///
    /// - Throws: ``PostgresError`` unless the name is 1 to 40 lowercase ASCII letters, digits and
    ///   underscores, starting with a letter.
    public static func schema(forSpace space: String?) throws -> String {
        guard let space else { return defaultSchema }
        guard let first = space.first, first.isASCII, first.isLowercase, space.utf8.count <= 40,
            space.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "_") })
        else {
            throw PostgresError(
                sqlState: nil,
                message: "'\(TextSafety.visible(space))' is not a space name: 1 to 40 lowercase letters, digits and "
                    + "underscores, starting with a letter")
        }
        return spacePrefix + space
    }

    /// Creates the schema and its tables when missing (several mirrors may start at once: an
    /// advisory lock makes it one at a time) and checks the server's layout version. A space is
    /// never made here (an administrator makes it): it is only checked.
    ///
    /// - Throws: ``PostgresError`` when the server's tables were made by a newer mirror, or
    ///   (SQLSTATE 42501) when this role may not use the space, or (3F000) when there is no
    ///   such space.
    public func prepare() throws {
        if space != nil {
            try checkSpace()
            return
        }
        try transaction {
            try connection.execute("SELECT pg_advisory_xact_lock(hashtext($1))", [schema])
            try connection.execute("CREATE SCHEMA IF NOT EXISTS \(schema)")
            try Self.createTables(connection, schema)
            try checkVersion()
        }
    }

    /// The tables of a log in `schema`, when missing, with its version and its id.
    static func createTables(_ connection: PostgresConnection, _ schema: String) throws {
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
        // The log's identity: a store remembers the log it mirrors into, and refuses another
        // (its pull cursor names sequences of this log only).
        try connection.execute(
            "INSERT INTO \(schema).meta(key, value) VALUES ('log_id', $1) ON CONFLICT (key) DO NOTHING",
            [String(Int64.random(in: 1...Int64.max))])
        try createRetentionTables(connection, schema)
    }

    private func checkVersion() throws {
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

    /// Checks that the space exists and this role may read and write it.
    private func checkSpace() throws {
        do {
            try checkVersion()
            // Reading is not writing: a role granted a space may do both (a space's role has
            // SELECT and INSERT on its log).
            let rows = try connection.execute(
                "SELECT has_table_privilege(\(Self.quoted(schema + ".transactions")), 'INSERT')")
            guard rows.first?[0] == "t" else { throw accessDenied() }
            try checkNotMoved()
            let layout = try connection.execute("SELECT value FROM \(schema).meta WHERE key = 'retention_layout'")
            guard let text = layout.first?[0], let number = Int(text), number >= Self.retentionLayout else {
                throw PostgresError(
                    sqlState: nil,
                    message: "space '\(space ?? "")' was made by an older build (its snapshots or cursors are missing "
                        + "or of an older layout): an administrator brings it up to date with "
                        + "'storectl mirror-admin --upgrade \(space ?? "")'")
            }
        } catch let error as PostgresError where error.sqlState == "42501" {
            throw accessDenied()
        } catch let error as PostgresError where error.sqlState == "3F000" || error.sqlState == "42P01" {
            throw PostgresError(
                sqlState: error.sqlState,
                message: "there is no space '\(space ?? "")' on this server (an administrator makes one with "
                    + "'storectl mirror-admin --create-space \(space ?? "")')")
        }
    }

    /// Throws SQLSTATE ``movedState`` when an administrator moved this space to another server:
    /// this copy takes no upload and gets no new row (the space directory names the new server).
    public func checkNotMoved() throws {
        guard space != nil,
            let to = try connection.execute("SELECT value FROM \(schema).meta WHERE key = 'moved_to'").first?[0]
        else { return }
        throw PostgresError(
            sqlState: Self.movedState,
            message:
                "space '\(space ?? "")' was moved from \(connection.serverDescription) to \(TextSafety.visible(to)): "
                + "the space directory names its server")
    }

    /// The error of a role that may not use this space.
    package func accessDenied() -> PostgresError {
        PostgresError(
            sqlState: "42501",
            message: "role '\(TextSafety.visible(connection.user))' may not use space '\(space ?? "")' (never granted, "
                + "or revoked): an administrator grants it with 'storectl mirror-admin --grant \(space ?? "") --role "
                + "\(TextSafety.visible(connection.user))'")
    }

    /// `text` as a SQL string literal.
    static func quoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }

    /// The log's identity (``createTables(_:_:)``): the same for every mirror of this log, and
    /// another for another space, server or a log made again.
    public func logID() throws -> Int64 {
        guard let text = try connection.execute("SELECT value FROM \(schema).meta WHERE key = 'log_id'").first?[0],
            let id = Int64(text), id > 0
        else {
            throw PostgresError(sqlState: nil, message: "\(schema).meta has no readable log_id")
        }
        return id
    }

    /// Whether this server is a standby (in recovery: it takes no writes).
    public func isStandby() throws -> Bool {
        try connection.execute("SELECT pg_is_in_recovery()").first?[0] == "t"
    }

    /// What tells this server apart from another (its start and where it listens): two
    /// connections with the same one reach the same server.
    public func instance() throws -> String {
        try connection.execute(
            "SELECT pg_postmaster_start_time()::text || ' ' || current_setting('port') || ' ' "
                + "|| coalesce(inet_server_addr()::text, 'socket') || ' ' || current_database()"
        ).first?[0] ?? ""
    }

    /// Whether the log outside any space exists on this server (its first mirror makes it).
    public func defaultLogExists() throws -> Bool {
        try connection.execute("SELECT to_regclass($1) IS NOT NULL", [Self.defaultSchema + ".meta"]).first?[0] == "t"
    }

    /// The space on this server whose log has id `logID`, among those this role may read (nil:
    /// none): what a store bound to that log names with `--space`.
    public func space(holdingLog logID: Int64) throws -> String? {
        let schemas = try connection.execute(
            """
            SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1)
                AND has_schema_privilege(oid, 'USAGE') ORDER BY nspname LIMIT 10000
            """, [Self.spacePrefix])
        for row in schemas {
            guard let schema = row.first ?? nil,
                schema.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") })
            else { continue }
            let id = try? connection.execute(
                "SELECT value FROM \(schema).meta WHERE key = 'log_id'"
            ).first?[0]
            if id == String(logID) { return String(schema.dropFirst(Self.spacePrefix.count)) }
        }
        return nil
    }

    /// The channel uploads to this log wake mirrors on: the default log's, or for a space one
    /// named after its id, which only roles that may read the space know.
    public func notifyChannel() throws -> String {
        guard space != nil else { return Self.channel }
        return "sharedstore_log_" + String(try logID(), radix: 16)
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
        return try namingLockHolder { try uploadInTransaction(origin: origin, uploads) }
    }

    private func uploadInTransaction(origin: UUID, _ uploads: [MirrorUpload]) throws -> [(
        sequence: Int64, isNew: Bool
    )] {
        try transaction {
            // One upload at a time: the sequence numbers given here commit in order, and every
            // row of a batch gets them in the order of its tokens.
            try lockUploads()
            let originText = origin.uuidString.lowercased()
            let tokens = "{" + uploads.map { String($0.token) }.joined(separator: ",") + "}"
            var known: [Int64: Int64] = [:]
            for row in try connection.execute(
                "SELECT token, sequence FROM \(schema).transactions WHERE origin = $1 AND token = ANY($2::bigint[])",
                [originText, tokens])
            {
                if let t = row[0].flatMap({ Int64($0) }), let s = row[1].flatMap({ Int64($0) }) { known[t] = s }
            }
            var next = try maxSequence()
            // A row pruned below the horizon was uploaded before, whatever the log holds now.
            let pruned = try prunedKeys(of: originText, among: uploads.map(\.token).filter { known[$0] == nil })
            for u in uploads where known[u.token] == nil && pruned.contains(u.token) { known[u.token] = 0 }
            var out: [(Int64, Bool)] = []
            var values: [String] = []
            var parameters: [String?] = []
            for u in uploads {
                if let s = known[u.token] {
                    out.append((s, false))
                    continue
                }
                // A sequence at the top of the range (a row another program wrote) ends uploads
                // with an error, never a trap or a wrapped number.
                let (following, overflow) = next.addingReportingOverflow(1)
                guard !overflow else {
                    // 22003, numeric_value_out_of_range: the server answered, this is no outage.
                    throw PostgresError(
                        sqlState: "22003",
                        message: "the server's sequence is at its largest value (\(next)): nothing more can be uploaded"
                    )
                }
                next = following
                known[u.token] = next
                out.append((next, true))
                let n = parameters.count
                values.append("($\(n + 1), $\(n + 2), $\(n + 3), $\(n + 4), $\(n + 5))")
                parameters += [String(next), originText, String(u.token), u.author, u.payload]
            }
            guard !values.isEmpty else { return out }
            try connection.execute(
                "INSERT INTO \(schema).transactions(sequence, origin, token, author, payload) VALUES "
                    + values.joined(separator: ", "), parameters)
            if space == nil {
                try connection.execute("SELECT pg_notify($1, $2)", [Self.channel, String(next)])
            } else {
                // notifyChannel() in the same statement.
                try connection.execute(
                    "SELECT pg_notify('sharedstore_log_' || to_hex((SELECT value::bigint FROM \(schema).meta "
                        + "WHERE key = 'log_id')), $1)", [String(next)])
            }
            return out
        }
    }

    /// Starts receiving the wake-ups of uploads on this connection.
    public func listen() throws { try connection.execute("LISTEN \(try notifyChannel())") }

    /// Runs `body` in one server transaction (rolled back when it throws), its commit waited for
    /// ``commitWait`` at most (``PostgresConnection/commit(within:)``).
    func transaction<T>(_ body: () throws -> T) throws -> T {
        try connection.transaction(commitWithin: commitWait, body)
    }
}

extension PostgresConnection {
    /// Runs `body` in one transaction that `begin` starts, committed when it returns (waiting
    /// `commitWithin` seconds at most; nil: as long as the server takes) and rolled back when it
    /// throws.
    func transaction<T>(begin: String = "BEGIN", commitWithin: TimeInterval? = nil, _ body: () throws -> T) throws
        -> T
    {
        try execute(begin)
        let result: T
        do {
            result = try body()
        } catch {
            _ = try? execute("ROLLBACK")
            throw error
        }
        if let commitWithin {
            try commit(within: commitWithin)
        } else {
            try execute("COMMIT")
        }
        return result
    }
}
