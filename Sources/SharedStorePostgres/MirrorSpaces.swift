import Foundation
import SharedStoreSupport

/// What an administrator does with spaces (issue 25): makes one, grants a role the use of it,
/// revokes that, lists them, deletes one. Run as a role that may create schemas and roles
/// (`CREATEROLE` and `CREATE` on the database, or a superuser); the mirrors connect as roles
/// without either.
///
/// A space is a schema, `sharedstore_space_NAME`, holding one log (the tables a mirror uses), and
/// a role of the same name that may read and append to it (`USAGE` on the schema, `SELECT` and
/// `INSERT` on its log, `SELECT` on its meta table; never `UPDATE` or `DELETE`). Granting a space
/// to a machine's role makes that role a member of the space's role; revoking takes the
/// membership away, and PostgreSQL checks it at the mirror's next statement. Why a schema per
/// space rather than row-level security on one shared table: the server's own privileges decide
/// with no policy run per row (nothing to measure on push and pull), a space's log keeps its own
/// sequence and indexes, and a space is one unit to prune, dump, move to another server or drop.
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

    /// One space: its name and the roles granted it.
    public struct Space: Sendable, Hashable {
        public let name: String
        public let roles: [String]

        /// Space `name`, granted to `roles`.
        public init(name: String, roles: [String]) {
            self.name = name
            self.roles = roles
        }
    }

    /// Makes space `name`: its schema with an empty log, and its role.
    ///
    /// - Throws: ``PostgresError`` for an invalid name, a space that exists already, or a role
    ///   that may not create schemas or roles.
    public func create(_ name: String) throws {
        let schema = try MirrorServer.schema(forSpace: name)
        try transaction {
            if try exists(name) { throw PostgresError(sqlState: "42P06", message: "space '\(name)' exists already") }
            let roleExists = try connection.execute("SELECT 1 FROM pg_roles WHERE rolname = $1", [schema])
            if roleExists.isEmpty { try connection.execute("CREATE ROLE \(schema) NOLOGIN") }
            try connection.execute("CREATE SCHEMA \(schema)")
            try MirrorServer.createTables(connection, schema)
            try connection.execute("GRANT USAGE ON SCHEMA \(schema) TO \(schema)")
            try connection.execute("GRANT SELECT, INSERT ON \(schema).transactions TO \(schema)")
            try connection.execute("GRANT SELECT ON \(schema).meta TO \(schema)")
        }
    }

    /// Deletes space `name`: its log, every row in it, and its role (the grants go with it).
    ///
    /// - Throws: ``PostgresError`` when there is no such space.
    public func delete(_ name: String) throws {
        let schema = try MirrorServer.schema(forSpace: name)
        try transaction {
            guard try exists(name) else { throw noSpace(name) }
            try connection.execute("DROP SCHEMA \(schema) CASCADE")
            try connection.execute("DROP ROLE IF EXISTS \(schema)")
        }
    }

    /// Lets `role` (a role that logs in, one per machine or per user) read and write space `name`.
    ///
    /// - Throws: ``PostgresError`` when there is no such space or role.
    public func grant(_ name: String, to role: String) throws {
        try changeMembership(name, role, grant: true)
    }

    /// Takes space `name` away from `role`: its mirrors stop at their next statement, with an
    /// error that says so. A role that was never granted the space is an error too.
    ///
    /// - Throws: ``PostgresError`` when there is no such space or role, or the role was not granted it.
    public func revoke(_ name: String, from role: String) throws {
        try changeMembership(name, role, grant: false)
    }

    /// Every space, by name, with the roles granted it.
    public func list() throws -> [Space] {
        let rows = try connection.execute(
            """
            SELECT substr(n.nspname, length($1) + 1),
                coalesce(string_agg(m.rolname, ',' ORDER BY m.rolname), '')
            FROM pg_namespace n
            LEFT JOIN pg_roles s ON s.rolname = n.nspname
            LEFT JOIN pg_auth_members a ON a.roleid = s.oid
            LEFT JOIN pg_roles m ON m.oid = a.member
            WHERE starts_with(n.nspname, $1)
            GROUP BY n.nspname ORDER BY n.nspname
            """, [MirrorServer.spacePrefix])
        return rows.compactMap { row in
            guard row.count == 2, let name = row[0] else { return nil }
            let roles = (row[1] ?? "").split(separator: ",").map(String.init)
            return Space(name: name, roles: roles)
        }
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
        guard try exists(name) else { throw noSpace(name) }
        guard !(try connection.execute("SELECT 1 FROM pg_roles WHERE rolname = $1", [role])).isEmpty else {
            throw PostgresError(
                sqlState: "42704",
                message: "there is no role '\(TextSafety.visible(role))' on this server (make it first, for example "
                    + "CREATE ROLE name LOGIN PASSWORD '…')")
        }
        let member =
            try connection.execute(
                "SELECT pg_has_role($1, $2, 'MEMBER') AND $1 <> $2", [role, schema]
            ).first?[0] == "t"
        if !grant && !member {
            throw PostgresError(
                sqlState: "42704",
                message: "role '\(TextSafety.visible(role))' was not granted space '\(name)'")
        }
        // The server quotes the role's name (%I): any name a role may have is safe here.
        let verb = grant ? "GRANT %I TO %I" : "REVOKE %I FROM %I"
        guard
            let statement = try connection.execute("SELECT format($1, $2::text, $3::text)", [verb, schema, role])
                .first?[0]
        else { throw PostgresError(sqlState: nil, message: "the server did not format the \(verb) statement") }
        try connection.execute(statement)
    }

    private func noSpace(_ name: String) -> PostgresError {
        PostgresError(sqlState: "3F000", message: "there is no space '\(name)' on this server")
    }

    private func transaction(_ body: () throws -> Void) throws {
        try connection.execute("BEGIN")
        do {
            try body()
            try connection.execute("COMMIT")
        } catch {
            _ = try? connection.execute("ROLLBACK")
            throw error
        }
    }
}
