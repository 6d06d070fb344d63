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
        "make, list, upgrade, prune, place, move and delete the mirror's spaces, and grant or revoke a role the use of "
            + "one (run as a role that may create schemas and roles)",
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
        .value(
            "prune", "NAME",
            "delete the rows of space NAME's log that a snapshot holds and every live mirror has pulled, with older "
                + "snapshots"),
        .flag("prune-all", "prune every space, and the log outside any space when this role owns one"),
        .value(
            "gone-after", "SECONDS",
            "with --prune or --prune-all: a mirror not seen for this long counts as gone and holds nothing back "
                + "(it starts again from the snapshot when it returns); default 2592000 (30 days)"),
        .value("upgrade", "NAME", "bring space NAME, made by an older build, to this build's tables"),
        .value(
            "place", "NAME", "record in the space directory (--directory) that space NAME is on the server --on names"),
        .value(
            "move", "NAME",
            "move space NAME, while its mirrors run, from this server to the one --to names, and record it in the "
                + "space directory (--directory)"),
        .value("on", "URL", "with --place: the space's server (a libpq URL or key=value string without a password)"),
        .value("to", "URL", "with --move: the server to move to (a libpq URL or key=value string without a password)"),
        .value(
            "directory", "URL",
            "with --place, --move or --list: the server holding the space directory (made when missing)"),
    ]

    static func run(_ inv: Invocation) throws {
        let actions = [
            "create-space", "delete-space", "grant", "revoke", "list", "prune", "prune-all", "upgrade", "place", "move",
        ].filter { inv.arguments.has($0) || inv.arguments.value($0) != nil }
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
        try checkPlacementOptions(inv, action)
        let goneAfter = try inv.arguments.seconds("gone-after", in: 0...3_153_600_000)
        if goneAfter != nil && !action.hasPrefix("prune") {
            throw UsageError("--gone-after goes with --prune or --prune-all")
        }
        let name = inv.arguments.value(action) ?? ""
        if !name.isEmpty { try MirrorCommand.checkSpaceName(name, option: action) }
        let spaces = MirrorSpaces(connection: try PostgresConnection(try MirrorCommand.connectionString(inv)))
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
        case ("prune", _), ("prune-all", _):
            try prune(inv, action == "prune" ? name : nil, spaces, goneAfter: goneAfter ?? 2_592_000)
        case ("place", _), ("move", _),
            ("list", _) where inv.arguments.value("directory") != nil:
            try placeOrMove(inv, action, name, spaces)
        case ("upgrade", _):
            try spaces.upgrade(name)
            inv.output.record(.object([("space", .string(name)), ("upgraded", .bool(true))]))
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

    /// `--prune NAME` (`name`), or `--prune-all` (nil): a line per log. A space's copy that a
    /// move left behind is skipped by `--prune-all` (it is pruned where it went); a space that
    /// fails gets a line with its error, the others are pruned, and the command fails at the end.
    static func prune(_ inv: Invocation, _ name: String?, _ spaces: MirrorSpaces, goneAfter: TimeInterval) throws {
        let names: [String?] =
            try name.map { [$0] } ?? spaces.list().map(\.name) + (try spaces.defaultLogPrunable() ? [nil] : [])
        var failed: [String] = []
        for space in names {
            let label = space.map(JSONValue.string) ?? .null
            do {
                inv.output.record(Self.json(space, try spaces.prune(space, goneAfter: goneAfter)))
            } catch let error as PostgresError where error.sqlState == MirrorServer.movedState && name == nil {
                inv.output.record(.object([("space", label), ("skipped", .string(error.message))]))
            } catch  where name == nil {
                inv.output.record(.object([("space", label), ("error", .string(TextSafety.visible("\(error)")))]))
                failed.append(space ?? "(the log outside any space)")
            }
        }
        guard failed.isEmpty else {
            throw PostgresError(
                sqlState: nil,
                message: "\(failed.count) of \(names.count) logs could not be pruned (their lines say why): "
                    + failed.map(TextSafety.visible).joined(separator: ", "))
        }
    }

    /// `--on`, `--to` and `--directory` go with the actions that use them.
    static func checkPlacementOptions(_ inv: Invocation, _ action: String) throws {
        let uses = ["on": ["place"], "to": ["move"], "directory": ["place", "move", "list"]]
        for (option, actions) in uses.sorted(by: { $0.key < $1.key }) {
            let given = inv.arguments.value(option) != nil
            if given && !actions.contains(action) {
                throw UsageError("--\(option) goes with " + actions.map { "--" + $0 }.joined(separator: " or "))
            }
            if !given && actions.contains(action) && action != "list" {
                throw UsageError("--\(action) needs --\(option) URL")
            }
        }
    }

    /// `--place NAME --on URL`, `--move NAME --to URL` or `--list`, with `--directory URL`.
    static func placeOrMove(_ inv: Invocation, _ action: String, _ name: String, _ spaces: MirrorSpaces) throws {
        let directoryURL = try MirrorCommand.connectionString(inv, option: "directory") ?? ""
        let directory = MirrorDirectory(connection: try PostgresConnection(directoryURL))
        if action == "list" {
            for entry in try directory.list() {
                inv.output.record(
                    .object([
                        ("space", .string(entry.space)), ("server", .string(entry.server)),
                        ("epoch", .number(Double(entry.epoch))),
                    ]))
            }
            return
        }
        if action == "place" {
            let server = try MirrorCommand.connectionString(inv, option: "on") ?? ""
            try directory.place(name, on: server)
            inv.output.record(
                .object([("space", .string(name)), ("server", .string(server)), ("placed", .bool(true))]))
            return
        }
        let target = try MirrorCommand.connectionString(inv, option: "to") ?? ""
        // From the server the directory names, unless --postgres says where the space is.
        let spaces =
            try inv.arguments.value("postgres") == nil
            ? (try? directory.server(of: name)).map { MirrorSpaces(connection: try PostgresConnection($0)) } ?? spaces
            : spaces
        let result = try spaces.move(name, to: try PostgresConnection(target), toServer: target, directory: directory)
        inv.output.record(
            .object([
                ("space", .string(name)), ("server", .string(target)), ("moved", .bool(true)),
                ("transactions", .number(Double(result.transactions))),
                ("snapshots", .number(Double(result.snapshots))),
                ("resumed", .bool(result.resumed)),
            ]))
    }

    /// `--prune`'s line for `space` (nil: the log outside any space).
    static func json(_ space: String?, _ r: MirrorPruneResult) -> JSONValue {
        .object([
            ("space", space.map(JSONValue.string) ?? .null), ("pruned_through", .number(Double(r.prunedThrough))),
            ("deleted", .number(Double(r.deleted))), ("live", .number(Double(r.live))),
            ("gone", .number(Double(r.gone))),
            ("lowest_live_cursor", r.lowestLiveCursor.map { .number(Double($0)) } ?? .null),
            ("held_by", r.heldBy.map(JSONValue.string) ?? .null),
            ("snapshot", r.newestSnapshot.map { .number(Double($0)) } ?? .null),
        ])
    }
}
