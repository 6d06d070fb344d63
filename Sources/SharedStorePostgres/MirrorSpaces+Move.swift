import Foundation
import SharedStoreSupport

/// What moving a space did.
public struct MirrorMoveResult: Sendable, Hashable {
    /// Rows of the log copied, and snapshots.
    public var transactions: Int64 = 0
    public var snapshots = 0
    /// True when an earlier move had copied and marked the space already: only the directory
    /// was left to change.
    public var resumed = false
}

extension MirrorSpaces {
    /// Moves space `name` from this server to the one `target` reaches, while its mirrors run,
    /// and records `toServer` (that server as a libpq string without a password) in `directory`.
    ///
    /// 1. The space's upload lock is taken here: uploads wait (at most 30 s each, then their next
    ///    round tries again), pulls go on.
    /// 2. The space is made on the target with the same log id, rows, snapshots, cursors and
    ///    grants (each granted role must exist there), in one transaction there.
    /// 3. This copy is marked moved and the lock released: an upload waiting for it is refused
    ///    (SQLSTATE ``MirrorServer/movedState``), and a mirror's next round here stops with the
    ///    same, and finds the new server in the directory.
    /// 4. The directory names the target.
    ///
    /// Every upload acknowledged before the move is in the copy, none is taken after it, and the
    /// sequences are the same: a mirror's cursor goes on on the new server, nothing lost or
    /// doubled. A move that stopped after step 3 is finished by running it again; one that stopped
    /// before left this copy in charge (a copy on the target with the same log id is made again).
    ///
    /// - Throws: ``PostgresError`` when there is no such space, a granted role is missing on the
    ///   target, the target holds another space of that name, or a server fails (nothing is
    ///   marked then).
    public func move(_ name: String, to target: PostgresConnection, toServer: String, directory: MirrorDirectory)
        throws -> MirrorMoveResult
    {
        try MirrorDirectory.checkServer(toServer)
        guard try exists(name) else { throw noSpace(name) }
        let schema = try MirrorServer.schema(forSpace: name)
        let source = try MirrorServer(connection: connection, space: name)
        let destination = MirrorSpaces(connection: target)
        let logID = try source.logID()
        let sameLogThere = { () throws -> Bool in
            try destination.exists(name) && (try? MirrorServer(connection: target, space: name).logID()) == logID
        }
        try refuseSameDatabase(schema, target)
        if try movedTo(schema) != nil {
            guard try sameLogThere() else {
                throw PostgresError(
                    sqlState: "55000",
                    message:
                        "space '\(name)' was moved from this server already, and not to \(target.serverDescription)")
            }
            try directory.place(name, on: toServer)
            return MirrorMoveResult(resumed: true)
        }
        try upgrade(name)
        let roles = try list().first { $0.name == name }?.roles ?? []
        try clearTarget(name, roles: roles, on: destination, sameLog: try sameLogThere())
        let result = try source.namingLockHolder { () throws -> MirrorMoveResult in
            try connection.transaction {
                try source.lockUploads(wait: source.adminLockWait)
                try destination.create(name)
                let result: MirrorMoveResult
                do {
                    result = try copy(schema, to: target)
                } catch {
                    _ = try? destination.delete(name)
                    throw error
                }
                for role in roles { try destination.grant(name, to: role) }
                try connection.execute(
                    "INSERT INTO \(schema).meta(key, value) VALUES ('moved_to', $1) "
                        + "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", [toServer])
                // Followers waiting here wake (at commit), find the space moved and look it up.
                try connection.execute("SELECT pg_notify($1, 'moved')", [try source.notifyChannel()])
                return result
            }
        }
        try directory.place(name, on: toServer)
        return result
    }

    /// Checks that every role in `roles` exists on `destination`'s server, and deletes a copy of
    /// space `name` there that an earlier move left (marked moved, or a copy of the same log that
    /// a move stopped before marking this one).
    private func clearTarget(_ name: String, roles: [String], on destination: MirrorSpaces, sameLog: Bool) throws {
        let target = destination.connection
        let missing = try roles.filter { try target.execute("SELECT 1 FROM pg_roles WHERE rolname = $1", [$0]).isEmpty }
        guard missing.isEmpty else {
            throw PostgresError(
                sqlState: "42704",
                message:
                    "role(s) \(missing.map(TextSafety.visible).joined(separator: ", ")) granted space '\(name)' do "
                    + "not exist on \(target.serverDescription): make them there first (roles belong to a server)")
        }
        guard try destination.exists(name) else { return }
        guard try sameLog || destination.movedTo(try MirrorServer.schema(forSpace: name)) != nil else {
            throw PostgresError(
                sqlState: "42P06",
                message: "\(target.serverDescription) holds another space '\(name)': delete it there first")
        }
        try destination.delete(name)
    }

    /// Refuses a target that is this very database, however its string is written: a random
    /// value written here is looked for there (a move onto itself would delete the space).
    private func refuseSameDatabase(_ schema: String, _ target: PostgresConnection) throws {
        let probe = String(UInt64.random(in: 1...UInt64.max))
        try connection.execute(
            "INSERT INTO \(schema).meta(key, value) VALUES ('move_probe', $1) "
                + "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", [probe])
        defer { _ = try? connection.execute("DELETE FROM \(schema).meta WHERE key = 'move_probe'") }
        let there = try? target.execute("SELECT value FROM \(schema).meta WHERE key = 'move_probe'").first?[0]
        guard there != probe else {
            throw PostgresError(
                sqlState: "42P06",
                message: "the server --to names (\(target.serverDescription)) is the one space "
                    + "'\(schema.dropFirst(MirrorServer.spacePrefix.count))' is on: nothing to move")
        }
    }

    /// Where the space of `schema` on this server was moved (nil: it was not).
    func movedTo(_ schema: String) throws -> String? {
        try connection.execute("SELECT value FROM \(schema).meta WHERE key = 'moved_to'").first?[0] ?? nil
    }

    /// Copies the log of `schema` (its meta values first, so that the order trigger there knows
    /// where it was pruned) to the same schema on `target`, in one transaction there.
    private func copy(_ schema: String, to target: PostgresConnection) throws -> MirrorMoveResult {
        try target.transaction {
            // The rows are copied as they are: the triggers there claim no store id for the
            // administrator (the claims are copied).
            try target.execute("SELECT set_config('sharedstore.copying', 'on', true)")
            var result = MirrorMoveResult()
            for row in try connection.execute("SELECT key, value FROM \(schema).meta WHERE key <> 'schema_version'") {
                try target.execute(
                    "INSERT INTO \(schema).meta(key, value) VALUES ($1, $2) "
                        + "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", row)
            }
            for (table, columns, key) in [
                ("pruned_origins", ["origin", "min_token", "max_token", "legacy_max"], ["origin"]),
                ("pruned_keys", ["origin", "token"], ["origin", "token"]),
                ("origins", ["origin", "role", "claimed_at"], ["origin"]),
                ("cursors", ["origin", "role", "cursor", "seen_at"], ["origin", "role"]),
                ("snapshot_heads", ["id", "through", "parts", "objects", "made_by", "made_at", "made_as"], ["id"]),
                ("snapshot_parts", ["id", "part", "payload"], ["id", "part"]),
                ("transactions", ["sequence", "origin", "token", "author", "uploaded_at", "payload"], ["sequence"]),
            ] {
                let copied = try copyRows("\(schema).\(table)", columns: columns, key: key, to: target)
                if table == "transactions" { result.transactions = copied }
                if table == "snapshot_heads" { result.snapshots = Int(copied) }
            }
            return result
        }
    }

    /// Copies every row of `table` to the same table on `target`, 200 at a time in the order of
    /// `key` (the first columns); returns how many.
    private func copyRows(_ table: String, columns: [String], key: [String], to target: PostgresConnection) throws
        -> Int64
    {
        let list = columns.joined(separator: ", ")
        let order = key.joined(separator: ", ")
        var after: [String?]?
        var copied: Int64 = 0
        while true {
            let condition =
                after == nil
                ? "" : "WHERE (\(order)) > (" + key.indices.map { "$\($0 + 1)" }.joined(separator: ", ") + ")"
            let rows = try connection.execute(
                "SELECT \(list) FROM \(table) \(condition) ORDER BY \(order) LIMIT 200", after ?? [])
            guard !rows.isEmpty else { return copied }
            var values: [String] = []
            var parameters: [String?] = []
            for row in rows {
                let n = parameters.count
                values.append("(" + columns.indices.map { "$\(n + $0 + 1)" }.joined(separator: ", ") + ")")
                parameters += row
            }
            try target.execute("INSERT INTO \(table)(\(list)) VALUES " + values.joined(separator: ", "), parameters)
            copied += Int64(rows.count)
            after = rows.last.map { Array($0.prefix(key.count)) }
            if rows.count < 200 { return copied }
        }
    }
}
