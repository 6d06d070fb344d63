import Foundation
import SharedStoreSupport

/// A snapshot of a log (issue 25): the state of every object the log named through sequence
/// `through`, in `chunks` payloads of the log's own format, made by a mirror that replayed the
/// log. A machine that joins, or one whose cursor the log was pruned past, starts from it and
/// pulls the log after `through`.
public struct MirrorSnapshot: Sendable, Hashable {
    /// Its key on the server (random: a row planted before it is made cannot take it).
    public let id: UUID
    /// The last sequence it holds the effect of.
    public let through: Int64
    /// How many payloads it is, and how many objects (deleted ones aside) they hold.
    public let chunks: Int
    public let objects: Int64
    /// The role that stored it, as the server stamped it (nil: made by an older build).
    public var madeAs: String? = nil

    /// How errors and `--verify` name it: its id, sequence and role.
    public var description: String {
        "snapshot \(id.uuidString.lowercased()) through sequence \(through)"
            + (madeAs.map { ", made by role '\(TextSafety.visible($0))'" } ?? "")
    }
}

/// What one prune of a log did (``MirrorServer/prune(goneAfter:)``).
public struct MirrorPruneResult: Sendable, Hashable {
    /// The sequence the log is pruned through now (rows at or below it are gone; the snapshot at
    /// it holds their effect), and how many rows this prune deleted.
    public var prunedThrough: Int64 = 0
    public var deleted: Int64 = 0
    /// Mirrors seen within the age that holds the horizon back, and those counted gone.
    public var live = 0
    public var gone = 0
    /// The lowest pull cursor of a live mirror (nil: none is live), and the role that reported
    /// it: a horizon held back for long is that role's (a machine that stopped pulling, or a
    /// member reporting made-up stores; revoking the role lets it go).
    public var lowestLiveCursor: Int64?
    public var heldBy: String?
    /// The newest snapshot (nil: none was made yet; nothing can be pruned without one).
    public var newestSnapshot: Int64?
}

/// Retention: the log is pruned below a horizon, with a snapshot in its place.
///
/// - Every mirror reports its pull cursor (``reportCursor(origin:cursor:)``, table `cursors`).
/// - Mirrors make snapshots (``storeSnapshot(through:chunks:objects:origin:)``) as the log grows:
///   a snapshot is written whole in one transaction beside the log, and writers go on.
/// - ``prune(goneAfter:)`` (the log's owner, an administrator) deletes the rows at or below the
///   newest snapshot that no live mirror still has to pull: the horizon is the lowest cursor of
///   the mirrors seen within `goneAfter`. A mirror not seen for longer counts as gone, and starts
///   again from the snapshot when it returns.
/// - What each origin had uploaded below the horizon stays known (`pruned_keys`: every key;
///   `pruned_origins`: the lowest and highest), so an upload repeated after a crash is never
///   taken for a new one.
extension MirrorServer {
    /// The SQL of the largest sequence the log has given: its largest row, or the sequence it was
    /// pruned through when that is larger (every row may be pruned).
    static func maxSequenceSQL(_ schema: String) -> String {
        """
        SELECT greatest(coalesce((SELECT max(sequence) FROM \(schema).transactions), 0),
            coalesce((SELECT value::bigint FROM \(schema).meta WHERE key = 'pruned_through'), 0))
        """
    }

    /// The sequence the log was pruned through (0: never).
    public func prunedThrough() throws -> Int64 {
        guard
            let text = try connection.execute("SELECT value FROM \(schema).meta WHERE key = 'pruned_through'")
                .first?[0]
        else { return 0 }
        guard let value = Int64(text), value >= 0 else {
            throw PostgresError(sqlState: nil, message: "\(schema).meta has an unreadable pruned_through '\(text)'")
        }
        return value
    }

    /// The newest snapshot through `atMost` or before (nil: none). A head that is not a whole
    /// snapshot (``whole(_:)``) is passed over.
    public func newestSnapshot(atMost: Int64 = .max) throws -> MirrorSnapshot? {
        let rows = try connection.execute(
            """
            SELECT id, through, parts, objects, made_as FROM \(schema).snapshot_heads s
            WHERE through <= $1 AND \(Self.whole(schema)) ORDER BY through DESC, made_at LIMIT 1
            """, [String(atMost)])
        guard let row = rows.first else { return nil }
        guard row.count == 5, let id = row[0].flatMap({ UUID(uuidString: $0) }),
            let through = row[1].flatMap({ Int64($0) }), let parts = row[2].flatMap({ Int($0) }),
            let objects = row[3].flatMap({ Int64($0) })
        else { throw PostgresError(sqlState: nil, message: "\(schema).snapshot_heads holds an unreadable row") }
        return MirrorSnapshot(id: id, through: through, chunks: parts, objects: objects, madeAs: row[4])
    }

    /// The condition that snapshot head `s` has every one of its parts, 0 to `parts - 1` (a
    /// head a member wrote alone, or with parts of its own numbering, is no snapshot: it is
    /// neither read nor pruned through).
    static func whole(_ schema: String) -> String {
        "s.parts = (SELECT count(*) FROM \(schema).snapshot_parts c WHERE c.id = s.id AND c.part < s.parts)"
    }

    /// Stores a snapshot through `through`, whole, in one transaction (a reader sees all of it or
    /// none), under a new random id. Returns false, storing nothing, when a whole one through
    /// that sequence exists already (another mirror made it).
    ///
    /// - Throws: ``PostgresError`` when `chunks` is empty (a snapshot of nothing is one empty
    ///   part) or `through` is not a sequence.
    @discardableResult
    public func storeSnapshot(through: Int64, chunks: [String], objects: Int64, origin: UUID) throws -> Bool {
        guard !chunks.isEmpty, through > 0, objects >= 0 else {
            throw PostgresError(
                sqlState: "22023", message: "a snapshot has a sequence, at least one part and no negative count")
        }
        let id = UUID().uuidString.lowercased()
        return try transaction {
            let made = try connection.execute(
                """
                INSERT INTO \(schema).snapshot_heads(id, through, parts, objects, made_by)
                SELECT $1, $2, $3, $4, $5 WHERE NOT EXISTS
                    (SELECT 1 FROM \(schema).snapshot_heads s WHERE through = $2 AND \(Self.whole(schema)))
                RETURNING id
                """, [id, String(through), String(chunks.count), String(objects), origin.uuidString.lowercased()])
            guard !made.isEmpty else { return false }
            for start in stride(from: 0, to: chunks.count, by: 50) {
                let part = chunks[start..<min(start + 50, chunks.count)]
                var values: [String] = []
                var parameters: [String?] = [id]
                for (i, payload) in part.enumerated() {
                    values.append("($1, $\(parameters.count + 1), $\(parameters.count + 2))")
                    parameters += [String(start + i), payload]
                }
                try connection.execute(
                    "INSERT INTO \(schema).snapshot_parts(id, part, payload) VALUES " + values.joined(separator: ", "),
                    parameters)
            }
            return true
        }
    }

    /// Runs `body` in one repeatable-read, read-only transaction: every statement in it sees the
    /// log as it was at the first (a prune meanwhile deletes nothing it reads).
    public func consistentRead<T>(_ body: () throws -> T) throws -> T {
        try connection.transaction(begin: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", body)
    }

    /// Reads the payloads of `snapshot`, `batch` at a time in order (inside
    /// ``consistentRead(_:)``, so that a prune cannot delete it meanwhile).
    ///
    /// - Throws: ``PostgresError`` when payloads are missing (a row deleted by hand), or what
    ///   `body` throws (the read stops there).
    public func readSnapshot(_ snapshot: MirrorSnapshot, batch: Int = 20, _ body: ([String]) throws -> Void) throws {
        var next = 0
        while next < snapshot.chunks {
            // Parts in a budget of bytes (one at least): parts a member planted, however
            // large, are read one at a time.
            let rows = try connection.execute(
                """
                SELECT part, CASE WHEN octet_length(payload) > $6::bigint THEN NULL ELSE payload END,
                    octet_length(payload) FROM (
                    SELECT part, payload, coalesce(sum(octet_length(payload)) OVER (ORDER BY part
                        ROWS UNBOUNDED PRECEDING), 0) - coalesce(octet_length(payload), 0) AS bytes_before
                    FROM (SELECT part, payload FROM \(schema).snapshot_parts
                        WHERE id = $1 AND part >= $2 AND part < $3 ORDER BY part LIMIT $4) r) b
                WHERE bytes_before < $5::bigint ORDER BY part
                """,
                [
                    snapshot.id.uuidString.lowercased(), String(next), String(snapshot.chunks), String(max(batch, 1)),
                    String(Self.fetchBudget), String(rowLimit),
                ])
            var payloads: [String] = []
            for row in rows {
                guard row.count == 3, row[0] == String(next) else { break }
                guard let payload = row[1] else {
                    let size = row[2] ?? "?"
                    throw PostgresError(
                        sqlState: nil,
                        message: "part \(next) of \(snapshot.description) is \(size) bytes, past this machine's row "
                            + "limit of \(rowLimit) (storectl mirror --max-row-mb): not read")
                }
                payloads.append(payload)
                next += 1
            }
            guard !payloads.isEmpty else {
                throw PostgresError(
                    sqlState: nil,
                    message: "\(snapshot.description) lacks its part \(next) of \(snapshot.chunks): it was damaged on "
                        + "the server; the next one made replaces it")
            }
            try body(payloads)
        }
    }

    /// Records that the mirror of `origin` has pulled through `cursor`, now: the horizon does not
    /// pass it while it is seen.
    public func reportCursor(origin: UUID, cursor: Int64) throws {
        // (A member holding a lock on the table fails the report in time; it never hangs.)
        try transaction {
            try connection.execute("SELECT set_config('lock_timeout', '30s', true)")
            try connection.execute(
                """
                INSERT INTO \(schema).cursors(origin, cursor) VALUES ($1, $2)
                ON CONFLICT (origin, role) DO UPDATE SET cursor = EXCLUDED.cursor, seen_at = now()
                """, [origin.uuidString.lowercased(), String(cursor)])
        }
    }

    /// Which of `tokens` are keys of `origin`'s pruned rows: an upload under one was on the
    /// server before, and is not new. Each pruned key is kept (a range would let one row
    /// forged under another origin's id with a huge key make that origin's later uploads look
    /// old); keys pruned by the first layout are known as a range (`legacy_max`).
    public func prunedKeys(of origin: String, among tokens: [Int64]) throws -> Set<Int64> {
        guard !tokens.isEmpty else { return [] }
        let list = "{" + tokens.map(String.init).joined(separator: ",") + "}"
        let rows = try connection.execute(
            """
            SELECT token FROM \(schema).pruned_keys WHERE origin = $1 AND token = ANY($2::bigint[])
            UNION SELECT t FROM unnest($2::bigint[]) t JOIN \(schema).pruned_origins p
                ON p.origin = $1 AND t > 0 AND t <= p.legacy_max
            """, [origin, list])
        return Set(rows.compactMap { ($0.first ?? nil).flatMap { Int64($0) } })
    }

    /// Up to `limit` keys of `origin`'s pruned rows in `range`, smallest first (the first
    /// layout's range aside: ``legacyPrunedMax(of:)``).
    public func prunedKeys(of origin: String, in range: ClosedRange<Int64>, limit: Int) throws -> [Int64] {
        try connection.execute(
            """
            SELECT token FROM \(schema).pruned_keys WHERE origin = $1 AND token BETWEEN $2 AND $3
            ORDER BY token LIMIT $4
            """, [origin, String(range.lowerBound), String(range.upperBound), String(max(limit, 1))]
        ).compactMap { ($0.first ?? nil).flatMap { Int64($0) } }
    }

    /// The highest key of `origin` pruned by the first layout, which kept a range (0: none).
    public func legacyPrunedMax(of origin: String) throws -> Int64 {
        try connection.execute("SELECT legacy_max FROM \(schema).pruned_origins WHERE origin = $1", [origin])
            .first?[0].flatMap { Int64($0) } ?? 0
    }

    /// Throws when this role may not prune the log (only its owner deletes rows: SQLSTATE 42501),
    /// or the space was moved to another server (``movedState``).
    public func checkMayPrune() throws {
        let owner = try connection.execute(
            "SELECT has_table_privilege(\(Self.quoted(schema + ".transactions")), 'DELETE')")
        guard owner.first?[0] == "t" else {
            let what = space.map { "space '\($0)'" } ?? "this log"
            throw PostgresError(
                sqlState: "42501",
                message: "role '\(TextSafety.visible(connection.user))' may not prune \(what): only the log's owner "
                    + "(an administrator) prunes")
        }
        try checkNotMoved()
    }

    /// Deletes the rows at or below the newest snapshot that every live mirror has pulled: the
    /// horizon is the lowest cursor of the mirrors seen within `goneAfter` seconds (none: the
    /// whole log is behind it). Older snapshots go too. Run by the log's owner (an administrator
    /// for a space); uploads wait for it only while it deletes.
    ///
    /// - Throws: ``PostgresError`` when the role may not delete from the log.
    public func prune(goneAfter: TimeInterval) throws -> MirrorPruneResult {
        guard goneAfter.isFinite, goneAfter >= 0 else {
            throw PostgresError(
                sqlState: "22023", message: "the age after which a mirror counts as gone must be 0 or more")
        }
        try checkMayPrune()
        // (It waits longer than an upload: a move or another prune may hold the lock a while.)
        return try namingLockHolder { try transaction { try pruneLocked(goneAfter: goneAfter) } }
    }

    private func pruneLocked(goneAfter: TimeInterval) throws -> MirrorPruneResult {
        try lockUploads(wait: adminLockWait)
        var result = MirrorPruneResult()
        let seen = try connection.execute(
            """
            SELECT count(*) FILTER (WHERE seen_at > now() - make_interval(secs => $1::float8)),
                count(*) FILTER (WHERE seen_at <= now() - make_interval(secs => $1::float8)),
                min(cursor) FILTER (WHERE seen_at > now() - make_interval(secs => $1::float8)),
                (SELECT role FROM \(schema).cursors WHERE seen_at > now() - make_interval(secs => $1::float8)
                    ORDER BY cursor, seen_at LIMIT 1)
            FROM \(schema).cursors
            """, [String(goneAfter)])
        result.live = seen.first?[0].flatMap { Int($0) } ?? 0
        result.gone = seen.first?[1].flatMap { Int($0) } ?? 0
        result.lowestLiveCursor = seen.first?[2].flatMap { Int64($0) }
        result.heldBy = seen.first.flatMap { $0.count > 3 ? $0[3] : nil }
        let pruned = try prunedThrough()
        result.prunedThrough = pruned
        let limit = try result.lowestLiveCursor ?? maxSequence()
        let target = try connection.execute(
            "SELECT max(through) FROM \(schema).snapshot_heads s WHERE through <= $1 AND \(Self.whole(schema))",
            [String(limit)]
        ).first?[0].flatMap { Int64($0) }
        result.newestSnapshot = try newestSnapshot()?.through
        guard let target, target > pruned else { return result }
        try connection.execute(
            """
            INSERT INTO \(schema).pruned_keys(origin, token)
            SELECT origin, token FROM \(schema).transactions WHERE sequence <= $1 ON CONFLICT DO NOTHING
            """, [String(target)])
        try connection.execute(
            """
            INSERT INTO \(schema).pruned_origins(origin, min_token, max_token)
            SELECT origin, min(token), max(token) FROM \(schema).transactions WHERE sequence <= $1 GROUP BY origin
            ON CONFLICT (origin) DO UPDATE SET min_token = least(pruned_origins.min_token, EXCLUDED.min_token),
                max_token = greatest(pruned_origins.max_token, EXCLUDED.max_token)
            """, [String(target)])
        result.deleted =
            try connection.execute(
                "WITH gone AS (DELETE FROM \(schema).transactions WHERE sequence <= $1 RETURNING 1) "
                    + "SELECT count(*) FROM gone", [String(target)]
            ).first?[0].flatMap { Int64($0) } ?? 0
        // (Their parts go with them; so do heads that were never whole.)
        try connection.execute("DELETE FROM \(schema).snapshot_heads WHERE through < $1", [String(target)])
        try connection.execute(
            "UPDATE \(schema).meta SET value = $1 WHERE key = 'pruned_through'", [String(target)])
        result.prunedThrough = target
        return result
    }
}
