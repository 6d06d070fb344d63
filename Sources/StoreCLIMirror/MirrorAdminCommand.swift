import Foundation
import SharedStore
import SharedStorePostgres
import StoreCLI

/// `storectl mirror-admin`: an administrator's spaces on the mirror's server (issue 25). It
/// connects as libpq's environment or `--postgres` say, as a role that may create schemas and
/// roles; mirrors connect as roles granted one space each (or a few).
enum MirrorAdminCommand {
    static let command = Command(
        "mirror-admin",
        "make, list and delete the mirror's spaces on the server, and grant or revoke a role the use of one "
            + "(run as a role that may create schemas and roles)",
        options: options, notTaking: ["group", "model-version", "durable"])

    static let options: [Option] = [
        .value(
            "postgres", "URL",
            "the server, as a libpq URL or key=value string without a password (default: libpq's environment)"),
        .value("create-space", "NAME", "make space NAME: its log, empty, and its role"),
        .value("delete-space", "NAME", "delete space NAME with every row of its log"),
        .value("grant", "NAME", "let --role read and write space NAME"),
        .value("revoke", "NAME", "take space NAME away from --role (its mirrors stop at their next round)"),
        .value("role", "ROLE", "with --grant or --revoke: the role (one that logs in: a machine's or a user's)"),
        .flag("list", "every space with the roles granted it (the default)"),
    ]

    static func run(_ inv: Invocation) throws {
        let actions = ["create-space", "delete-space", "grant", "revoke", "list"].filter {
            inv.arguments.has($0) || inv.arguments.value($0) != nil
        }
        guard actions.count <= 1 else {
            throw UsageError(actions.map { "--" + $0 }.joined(separator: " and ") + " exclude each other")
        }
        let action = actions.first ?? "list"
        let role = inv.arguments.value("role")
        if action == "grant" || action == "revoke" {
            guard role != nil else { throw UsageError("--\(action) needs --role ROLE") }
        } else if role != nil {
            throw UsageError("--role goes with --grant or --revoke")
        }
        let spaces = MirrorSpaces(connection: try PostgresConnection(try MirrorCommand.connectionString(inv)))
        let name = inv.arguments.value(action) ?? ""
        switch (action, role) {
        case ("create-space", _):
            try spaces.create(name)
            inv.output.record(.object([("space", .string(name)), ("created", .bool(true))]))
        case ("delete-space", _):
            try spaces.delete(name)
            inv.output.record(.object([("space", .string(name)), ("deleted", .bool(true))]))
        case ("grant", let role?):
            try spaces.grant(name, to: role)
            inv.output.record(.object([("space", .string(name)), ("role", .string(role)), ("granted", .bool(true))]))
        case ("revoke", let role?):
            try spaces.revoke(name, from: role)
            inv.output.record(.object([("space", .string(name)), ("role", .string(role)), ("revoked", .bool(true))]))
        default:
            for space in try spaces.list() {
                inv.output.record(
                    .object([("space", .string(space.name)), ("roles", .array(space.roles.map { .string($0) }))]))
            }
        }
    }
}
