import Foundation
import SharedStoreSupport

/// Reading the log: its bounds, the rows a pull, a replay or a check reads (each batch within
/// ``MirrorServer/fetchBudget`` bytes of payload, a row past ``MirrorServer/rowLimit`` withheld
/// unread), and the counts a round's lag is made of.
extension MirrorServer {
    /// The largest sequence on the server (0: none).
    ///
    /// - Throws: ``PostgresError`` when the server's answer is not a number.
    public func maxSequence() throws -> Int64 {
        try number(Self.maxSequenceSQL(schema), [])
    }

    /// The largest and the smallest token `origin` uploaded (0 when none): a store whose history
    /// is behind its largest was put back to an older copy, and its full uploads take keys below
    /// its smallest. Rows pruned below the horizon count.
    public func tokenRange(of origin: UUID) throws -> (min: Int64, max: Int64) {
        let parameters = [origin.uuidString.lowercased()]
        let union = """
            FROM (SELECT min(token) AS lo, max(token) AS hi FROM \(schema).transactions WHERE origin = $1
                UNION ALL SELECT min_token, max_token FROM \(schema).pruned_origins WHERE origin = $1) r
            """
        return (
            try number("SELECT coalesce(min(lo), 0) " + union, parameters),
            try number("SELECT coalesce(max(hi), 0) " + union, parameters)
        )
    }

    /// The transaction at `sequence` (nil: none).
    public func transaction(at sequence: Int64) throws -> MirrorTransaction? {
        try connection.execute(
            "SELECT sequence, origin, token, author, \(Self.limited), octet_length(payload) "
                + "FROM \(schema).transactions WHERE sequence = $1",
            [String(sequence), String(rowLimit)]
        ).compactMap(Self.transaction).first
    }

    /// The payload column where it is within the row limit (parameter 2 of a read that passes
    /// ``rowLimit``; NULL past it).
    static let limited = "CASE WHEN octet_length(payload) > $2::bigint THEN NULL ELSE payload END"

    /// `rows`, a query of transactions ordered by `sequence` that selects `payload`, cut where
    /// the payloads read reach `budget` bytes (parameter `$budget`), after one row at least. Adds
    /// `window_rows`: how many rows `rows` had (more than the result: the budget cut it).
    static func budgeted(_ rows: String, budget: String) -> String {
        """
        SELECT * FROM (
            SELECT r.*, count(*) OVER () AS window_rows,
                coalesce(sum(octet_length(payload)) OVER (ORDER BY sequence ROWS UNBOUNDED PRECEDING), 0)
                    - coalesce(octet_length(payload), 0) AS bytes_before
            FROM (\(rows)) r) b
        WHERE bytes_before < \(budget)::bigint ORDER BY sequence
        """
    }

    /// One number the server answers with.
    func number(_ sql: String, _ parameters: [String?]) throws -> Int64 {
        guard let text = try connection.execute(sql, parameters).first?[0], let value = Int64(text) else {
            throw PostgresError(
                sqlState: nil, message: "the server answered '\(sql)' with something other than a number")
        }
        return value
    }

    /// A row of `sequence, origin, token, author, payload`, then the payload's size where the
    /// payload may be withheld (nil: not readable as one).
    static func transaction(_ row: [String?]) -> MirrorTransaction? {
        guard row.count >= 5, let s = row[0].flatMap({ Int64($0) }),
            let o = row[1].flatMap({ UUID(uuidString: $0) }),
            let t = row[2].flatMap({ Int64($0) })
        else { return nil }
        if let payload = row[4] {
            return MirrorTransaction(sequence: s, origin: o, token: t, author: row[3], payload: payload)
        }
        guard row.count > 5, let size = row[5].flatMap({ Int64($0) }) else { return nil }
        return MirrorTransaction(sequence: s, origin: o, token: t, author: row[3], payload: "", withheld: size)
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
        ).compactMap(Self.transaction)
    }

    /// The next transactions after `sequence` to apply at `origin`: up to `limit` rows in the
    /// server's order, those of other origins returned, `origin`'s own read past (without their
    /// payloads) — except those whose token is in `reclaim`: rows of `origin` that its store
    /// lost (it was put back to an older copy), returned to be applied again. `through` is the
    /// last sequence read, `read` how many rows were (fewer than `limit`: nothing more was
    /// committed; `limit` where ``fetchBudget`` cut the read short), `first` the first sequence
    /// read (nil: none; one past `sequence + 1` means rows after `sequence` were pruned: the
    /// log's sequences have no gaps).
    public func pull(after sequence: Int64, for origin: UUID, reclaim: Set<Int64> = [], limit: Int = 500) throws
        -> (transactions: [MirrorTransaction], through: Int64, read: Int, first: Int64?, last: MirrorRowKey?)
    {
        let reclaimed = "{" + reclaim.sorted().map(String.init).joined(separator: ",") + "}"
        let rows = try connection.execute(
            Self.budgeted(
                """
                SELECT sequence, origin, token, author,
                    CASE WHEN origin = $3::uuid AND token <> ALL($5::bigint[]) THEN NULL ELSE \(Self.limited) END
                        AS payload,
                    octet_length(payload) AS size
                FROM \(schema).transactions WHERE sequence > $1 ORDER BY sequence LIMIT $4
                """, budget: "$6"),
            [
                String(sequence), String(rowLimit), origin.uuidString.lowercased(), String(limit), reclaimed,
                String(Self.fetchBudget),
            ])
        var out: [MirrorTransaction] = []
        var through = sequence
        var last: MirrorRowKey?
        for row in rows {
            guard let t = Self.transaction(row) else { continue }
            through = t.sequence
            last = MirrorRowKey(sequence: t.sequence, origin: t.origin, token: t.token)
            if t.origin != origin || reclaim.contains(t.token) { out.append(t) }
        }
        // Cut short by the budget: as many rows as a full batch were read, and more follow.
        let window = rows.first.flatMap { $0.count > 6 ? $0[6].flatMap { Int($0) } : nil } ?? rows.count
        return (out, through, rows.count < window ? limit : rows.count, rows.first?[0].flatMap { Int64($0) }, last)
    }

    /// Which row the log holds at `sequence` (nil: none, pruned or past its end).
    public func rowKey(at sequence: Int64) throws -> MirrorRowKey? {
        guard
            let row = try connection.execute(
                "SELECT origin, token FROM \(schema).transactions WHERE sequence = $1", [String(sequence)]
            ).first, row.count == 2, let origin = row[0].flatMap({ UUID(uuidString: $0) }),
            let token = row[1].flatMap({ Int64($0) })
        else { return nil }
        return MirrorRowKey(sequence: sequence, origin: origin, token: token)
    }

    /// `origin`'s own transactions after `sequence`, in order.
    public func ownTransactions(of origin: UUID, after sequence: Int64) throws -> [MirrorTransaction] {
        try connection.execute(
            "SELECT sequence, origin, token, author, payload FROM \(schema).transactions WHERE origin = $1 "
                + "AND sequence > $2 ORDER BY sequence",
            [origin.uuidString.lowercased(), String(sequence)]
        ).compactMap(Self.transaction)
    }

    /// Up to `limit` transactions of every origin after `sequence` through `through`, in order
    /// (fewer where ``fetchBudget`` cuts the read: read on after the last until `through`).
    public func log(after sequence: Int64, through: Int64, limit: Int = 500) throws -> [MirrorTransaction] {
        try connection.execute(
            Self.budgeted(
                """
                SELECT sequence, origin, token, author, \(Self.limited) AS payload, octet_length(payload) AS size
                FROM \(schema).transactions WHERE sequence > $1 AND sequence <= $3 ORDER BY sequence LIMIT $4
                """, budget: "$5"),
            [String(sequence), String(rowLimit), String(through), String(limit), String(Self.fetchBudget)]
        ).compactMap(Self.transaction)
    }
}
