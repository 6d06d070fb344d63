import Foundation
import SharedStoreSupport

/// What an administrator does with spaces (issue 25): makes one, grants a role the use of it,
/// revokes that, lists them, deletes one. Run as a role that may create schemas (`CREATE` on the
/// database, or a superuser); the mirrors connect as roles without it.
///
/// A space is a schema, `sharedstore_space_NAME`, holding one log (the tables a mirror uses).
/// Granting a space gives a role, directly, `USAGE` on the schema, `SELECT` and `INSERT` on its
/// log, `SELECT` on its meta table and the right to take its upload lock; never `UPDATE` or
/// `DELETE` on the log. There is no role of the space to switch to: a revoke takes the privileges
/// themselves away, and PostgreSQL checks them at the next statement of every session of that
/// role. The log refuses a row that is not the next in order (a trigger of the administrator's),
/// so a member cannot put a row where machines that read past it would never see it.
///
/// Why a schema per space rather than row-level security on one shared table: the server's own
/// privileges decide with no policy run per row, a space's log keeps its own sequence, indexes and
/// upload lock (only its members may take it), and a space is one unit to prune, dump, move to
/// another server or drop.
///
/// For example, as the administrator:
/// ```swift
/// let spaces = MirrorSpaces(connection: try PostgresConnection())
/// try spaces.create("alice")
/// try spaces.grant("alice", to: "alice_laptop")
/// ```
public struct MirrorSpaces {
    public let connection: PostgresConnection

    /// Spaces administered through `connection`.
    public init(connection: PostgresConnection) { self.connection = connection }

    /// One space: its name and the roles granted it (directly: members of those roles reach it too).
    public struct Space: Sendable, Hashable {
        public let name: String
        public let roles: [String]

        /// Space `name`, granted to `roles`.
        public init(name: String, roles: [String]) {
            self.name = name
            self.roles = roles
        }
    }

    /// Makes space `name`: its schema with an empty log, its upload lock and the trigger that
    /// keeps the log in order.
    ///
    /// - Throws: ``PostgresError`` for an invalid name, a space that exists already, or a role
    ///   that may not create schemas.
    public func create(_ name: String) throws {
        let schema = try MirrorServer.schema(forSpace: name)
        try transaction {
            if try exists(name) { throw PostgresError(sqlState: "42P06", message: "space '\(name)' exists already") }
            try connection.execute("CREATE SCHEMA \(schema)")
            try MirrorServer.createTables(connection, schema)
            try connection.execute("CREATE TABLE \(schema).upload_lock(id int PRIMARY KEY, taken bigint)")
            try connection.execute("INSERT INTO \(schema).upload_lock VALUES (1, 0)")
            try connection.execute(Self.orderFunction(schema))
            try connection.execute(
                "CREATE TRIGGER next_in_order BEFORE INSERT ON \(schema).transactions "
                    + "FOR EACH ROW EXECUTE FUNCTION \(schema).next_in_order()")
            try Self.createLockTrigger(connection, schema)
        }
    }

    /// Rows go into a space's log under its upload lock: an insert that does not hold it takes
    /// it first (once per statement), so a member that inserts rows without it and leaves its
    /// transaction open is named, role and server process, to the uploads it stalls, as one
    /// holding the lock is (``MirrorServer/namingLockHolder(_:)``). An upload holds it already.
    static func createLockTrigger(_ connection: PostgresConnection, _ schema: String) throws {
        try connection.execute(
            """
            CREATE OR REPLACE FUNCTION \(schema).take_upload_lock() RETURNS trigger LANGUAGE plpgsql
            SET search_path = pg_catalog, pg_temp AS $$
            BEGIN
                PERFORM 1 FROM \(schema).upload_lock WHERE id = 1 FOR UPDATE;
                RETURN NULL;
            END $$
            """)
        try connection.execute("DROP TRIGGER IF EXISTS take_upload_lock ON \(schema).transactions")
        try connection.execute(
            "CREATE TRIGGER take_upload_lock BEFORE INSERT ON \(schema).transactions "
                + "FOR EACH STATEMENT EXECUTE FUNCTION \(schema).take_upload_lock()")
    }

    /// The function of the trigger that keeps a space's log in order: a row must take the next
    /// sequence after the largest the log gave (its largest row, or where it was pruned through).
    static func orderFunction(_ schema: String) -> String {
        """
        CREATE OR REPLACE FUNCTION \(schema).next_in_order() RETURNS trigger LANGUAGE plpgsql
        SET search_path = pg_catalog, pg_temp AS $$
        BEGIN
            -- A member uploads under store ids of its own role (the owner copies any, on a move).
            \(MirrorServer.memberCheck(schema, what: "uploads"))
            IF EXISTS (SELECT 1 FROM \(schema).meta WHERE key = 'moved_to') THEN
                RAISE EXCEPTION 'this space was moved to another server' USING ERRCODE = '\(MirrorServer.movedState)';
            END IF;
            IF NEW.sequence IS DISTINCT FROM (\(MirrorServer.maxSequenceSQL(schema))) + 1 THEN
                RAISE EXCEPTION 'sequence % is not the next in the log of this space', NEW.sequence
                    USING ERRCODE = '23514';
            END IF;
            RETURN NEW;
        END $$
        """
    }

    /// Brings space `name`, made by an older build, to this build's layout: the tables of
    /// retention (snapshots, cursors), the order trigger that knows where the log was pruned, and
    /// its members' privileges on them. Doing it again changes nothing.
    ///
    /// - Throws: ``PostgresError`` when there is no such space.
    public func upgrade(_ name: String) throws {
        let schema = try MirrorServer.schema(forSpace: name)
        guard try exists(name) else { throw noSpace(name) }
        let roles = try list().first(where: { $0.name == name })?.roles ?? []
        // In one transaction: no member gains the new tables (and claims store ids) before
        // the others, or before the trigger that checks them.
        try transaction {
            try MirrorServer.createRetentionTables(connection, schema)
            try connection.execute(Self.orderFunction(schema))
            try Self.createLockTrigger(connection, schema)
            for role in roles { try applyMembership(schema, role, grant: true) }
        }
    }

    /// Whether the space of `schema` has this build's layout.
    private func isCurrent(_ schema: String) throws -> Bool {
        let layout = try connection.execute("SELECT value FROM \(schema).meta WHERE key = 'retention_layout'")
        return layout.first?[0].flatMap { Int($0) }.map { $0 >= MirrorServer.retentionLayout } ?? false
    }

    /// Prunes space `name` (nil: the log outside any space) as ``MirrorServer/prune(goneAfter:)``
    /// says, after bringing a space to this build's layout.
    public func prune(_ name: String?, goneAfter: TimeInterval) throws -> MirrorPruneResult {
        let log = try MirrorServer(connection: connection, space: name)
        if let name {
            guard try exists(name) else { throw noSpace(name) }
            try log.checkMayPrune()
            try upgrade(name)
        }
        return try log.prune(goneAfter: goneAfter)
    }

    /// Deletes space `name`: its log and every row in it (the grants go with it). Waits at most
    /// 10 s for sessions that use it.
    ///
    /// - Throws: ``PostgresError`` when there is no such space, or a session holds it longer.
    public func delete(_ name: String) throws {
        let schema = try MirrorServer.schema(forSpace: name)
        try transaction {
            guard try exists(name) else { throw noSpace(name) }
            try connection.execute("SET LOCAL lock_timeout = '10s'")
            try connection.execute("DROP SCHEMA \(schema) CASCADE")
        }
    }

    /// Lets `role` (a role that logs in, one per machine or per user) read and write space `name`.
    ///
    /// - Throws: ``PostgresError`` when there is no such space or role, or this connection's role
    ///   is neither the space's owner nor a superuser (SQLSTATE 42501, naming the owner).
    public func grant(_ name: String, to role: String) throws {
        try changeMembership(name, role, grant: true)
    }

    /// Takes space `name` away from `role`: its mirrors stop at their next statement, with an
    /// error that says so. A role that was never granted the space directly is an error too (one
    /// that reaches it as a member of a granted role is told which).
    ///
    /// - Throws: ``PostgresError`` when there is no such space or role, the role was not granted
    ///   it, or this connection's role is neither the space's owner nor a superuser (42501).
    public func revoke(_ name: String, from role: String) throws {
        try changeMembership(name, role, grant: false)
    }

    /// Every space, by name, with the roles granted it directly.
    public func list() throws -> [Space] {
        let rows = try connection.execute(
            """
            SELECT substr(n.nspname, length($1) + 1),
                coalesce(string_agg(r.rolname, ',' ORDER BY r.rolname), '')
            FROM pg_namespace n
            LEFT JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = 'transactions'
            LEFT JOIN LATERAL aclexplode(c.relacl) a ON a.privilege_type = 'INSERT'
            LEFT JOIN pg_roles r ON r.oid = a.grantee AND r.oid <> c.relowner
            WHERE starts_with(n.nspname, $1)
            GROUP BY n.nspname ORDER BY n.nspname
            """, [MirrorServer.spacePrefix])
        return rows.compactMap { row in
            guard row.count == 2, let name = row[0] else { return nil }
            let roles = (row[1] ?? "").split(separator: ",").map(String.init)
            return Space(name: name, roles: roles)
        }
    }

    /// Whether the log outside any space exists on this server (its first mirror made it) and this
    /// role may delete from it (it owns it, or is a superuser): what ``prune(_:goneAfter:)`` needs.
    public func defaultLogPrunable() throws -> Bool {
        let table = MirrorServer.quoted(MirrorServer.defaultSchema + ".transactions")
        return try connection.execute(
            "SELECT CASE WHEN to_regclass(\(table)) IS NULL THEN false ELSE has_table_privilege(\(table), 'DELETE') END"
        ).first?[0] == "t"
    }

    /// Whether space `name` exists.
    public func exists(_ name: String) throws -> Bool {
        let schema = try MirrorServer.schema(forSpace: name)
        return !(try connection.execute("SELECT 1 FROM pg_namespace WHERE nspname = $1", [schema])).isEmpty
    }

    private func changeMembership(_ name: String, _ role: String, grant: Bool) throws {
        let schema = try MirrorServer.schema(forSpace: name)
        guard !role.isEmpty, role.utf8.count <= 63, !role.contains("\0") else {
            throw PostgresError(sqlState: nil, message: "'\(TextSafety.visible(role))' is not a role name")
        }
        guard !role.hasPrefix("pg_") else {
            throw PostgresError(
                sqlState: "42939",
                message: "'\(TextSafety.visible(role))' is a role PostgreSQL reserves: grant a space "
                    + "to a role of a machine, a user or a team")
        }
        guard try exists(name) else { throw noSpace(name) }
        guard !(try connection.execute("SELECT 1 FROM pg_roles WHERE rolname = $1", [role])).isEmpty else {
            throw PostgresError(
                sqlState: "42704",
                message: "there is no role '\(TextSafety.visible(role))' on this server (make it first, for example "
                    + "CREATE ROLE name LOGIN PASSWORD '…')")
        }
        let granted = try list().first { $0.name == name }?.roles.contains(role) == true
        if !grant && !granted {
            let through =
                try connection.execute(
                    """
                    SELECT string_agg(g, ', ' ORDER BY g) FROM unnest($2::text[]) g
                    WHERE g <> $1 AND pg_has_role($1, g, 'MEMBER')
                    """.replacingOccurrences(of: "$2::text[]", with: "string_to_array($2, chr(1))"),
                    [role, (try list().first { $0.name == name }?.roles ?? []).joined(separator: "\u{1}")]
                ).first?[0] ?? nil
            throw PostgresError(
                sqlState: "42704",
                message: "role '\(TextSafety.visible(role))' was not granted space '\(name)'"
                    + (through.map {
                        " (it reaches it as a member of \(TextSafety.visible($0)): revoke it from that role)"
                    }
                        ?? ""))
        }
        // A space of an older build is brought up to date first, every member with it.
        if try !isCurrent(schema) { try upgrade(name) }
        try transaction {
            try checkMembership(name, schema, role, grant: grant, applied: false)
            try applyMembership(schema, role, grant: grant)
            try checkMembership(name, schema, role, grant: grant, applied: true)
        }
    }

    /// Fails (the caller's transaction rolls back) before a grant (or revoke) when this
    /// connection's role may not change the space's members, and after it when `role`'s access
    /// is not what it asked: PostgreSQL only warns ("no privileges were granted") when a role
    /// that did not make the grants runs GRANT or REVOKE, and a grant reported done that was not
    /// would be a false success.
    private func checkMembership(_ name: String, _ schema: String, _ role: String, grant: Bool, applied: Bool)
        throws
    {
        let table = MirrorServer.quoted(schema + ".transactions")
        let row = try connection.execute(
            """
            SELECT EXISTS (SELECT 1 FROM aclexplode((SELECT relacl FROM pg_class WHERE oid = \(table)::regclass))
                    WHERE grantee = (SELECT oid FROM pg_roles WHERE rolname = $1) AND privilege_type = 'INSERT'),
                pg_get_userbyid(n.nspowner), current_user,
                pg_has_role(current_user, n.nspowner, 'USAGE')
                    OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
            FROM pg_namespace n WHERE n.nspname = $2
            """, [role, schema]
        ).first
        guard let row, row.count == 4 else {
            throw PostgresError(sqlState: nil, message: "the server did not say who may change space '\(name)'")
        }
        let (holds, mayChange) = (row[0] == "t", row[3] == "t")
        guard applied ? holds != grant : !mayChange else { return }
        let owner = TextSafety.visible(row[1] ?? "?")
        let me = TextSafety.visible(row[2] ?? "?")
        throw PostgresError(
            sqlState: "42501",
            message: "role '\(TextSafety.visible(role))' was not \(grant ? "granted" : "revoked") space '\(name)': "
                + "only the space's owner ('\(owner)') or a superuser \(grant ? "grants" : "revokes") it, "
                + "and this connection is role '\(me)'; connect as '\(owner)'")
    }

    /// Grants (or revokes) `role` the space of `schema`, inside the caller's transaction.
    private func applyMembership(_ schema: String, _ role: String, grant: Bool) throws {
        for verb in Self.membershipStatements(grant: grant) {
            guard
                let statement = try connection.execute("SELECT format($1, $2::text, $3::text)", [verb, schema, role])
                    .first?[0]
            else { throw PostgresError(sqlState: nil, message: "the server did not format '\(verb)'") }
            try connection.execute(statement)
        }
    }

    /// The statements that grant (or revoke) a role a space: `format` patterns of the schema and
    /// the role (the server quotes the names, %I: any name a role may have is safe here).
    static func membershipStatements(grant: Bool) -> [String] {
        grant
            ? [
                "GRANT USAGE ON SCHEMA %I TO %I", "GRANT SELECT, INSERT ON %I.transactions TO %I",
                // UPDATE of one column only: it lets a member lock the row (FOR UPDATE), never
                // move it away (uploads would find no lock) or lock the whole table.
                "REVOKE UPDATE ON %I.upload_lock FROM %I", "REVOKE UPDATE ON %I.cursors FROM %I",
                "GRANT SELECT ON %I.meta TO %I", "GRANT SELECT, UPDATE (taken) ON %I.upload_lock TO %I",
                "GRANT SELECT, INSERT ON %I.snapshot_heads TO %I", "GRANT SELECT, INSERT ON %I.snapshot_parts TO %I",
                "GRANT SELECT, INSERT, UPDATE (cursor, seen_at) ON %I.cursors TO %I",
                "GRANT SELECT ON %I.pruned_origins TO %I",
                "GRANT SELECT ON %I.pruned_keys TO %I", "GRANT SELECT, INSERT ON %I.origins TO %I",
            ]
            : [
                "REVOKE ALL ON %I.transactions FROM %I", "REVOKE ALL ON %I.meta FROM %I",
                "REVOKE ALL ON %I.upload_lock FROM %I", "REVOKE ALL ON %I.snapshot_heads FROM %I",
                "REVOKE ALL ON %I.snapshot_parts FROM %I", "REVOKE ALL ON %I.cursors FROM %I",
                "REVOKE ALL ON %I.pruned_origins FROM %I", "REVOKE ALL ON %I.pruned_keys FROM %I",
                "REVOKE ALL ON %I.origins FROM %I",
                // Its mirrors cannot report any more: their cursors hold the horizon no longer.
                "DELETE FROM %1$I.cursors WHERE role = %2$L",
                "REVOKE ALL ON SCHEMA %I FROM %I",
            ]
    }

    func noSpace(_ name: String) -> PostgresError {
        PostgresError(sqlState: "3F000", message: "there is no space '\(name)' on this server")
    }

    private func transaction(_ body: () throws -> Void) throws { try connection.transaction(body) }
}
