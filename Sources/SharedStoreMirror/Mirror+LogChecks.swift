import Foundation
import SharedStoreCore
import SharedStorePostgres

/// The checks that the server's log is the one this store mirrors into, and reads from where it
/// should: a store is bound to one log for good, a log rewritten under its cursor is refused,
/// and `--read-from` must name a standby of the upload server.
extension Mirror {
    /// A store bound to a log run without `--space`, where the log outside any space is not that
    /// log: refused before anything is made on the server (the first mirror makes that log),
    /// naming the space it mirrors into when this role may read it.
    func refuseForgottenSpace() throws {
        guard space == nil, let bound = try container.mirrorValue(MirrorKeys.serverLog) else { return }
        if try server.defaultLogExists(), (try? server.logID()) == bound { return }
        if let named = try? server.space(holdingLog: bound) {
            throw MirrorError(
                "this store mirrors into space '\(named)' (server log \(bound)): run with --space \(named)",
                code: .otherLog)
        }
        throw MirrorError(
            "this store mirrors into server log \(bound), which is not the log outside any space on "
                + "\(serverDescription), nor a space this role may read there: name its space with --space NAME, or "
                + "its server with --postgres (nothing was made on this server)", code: .otherLog)
    }

    /// Remembers the server log this store mirrors into, or refuses another one: its pull cursor
    /// and its record of what it uploaded name sequences of that log only.
    func bindLog() throws {
        let id = try server.logID()
        let here = space.map { "space '\($0)'" } ?? "the log outside any space"
        guard let bound = try container.mirrorValue(MirrorKeys.serverLog) else {
            // Mirrored before logs were recorded: by a build without spaces, into the log outside
            // any space. Its cursor names that log's sequences, never a space's.
            let cursor = try container.mirrorValue(MirrorKeys.pullCursor) ?? 0
            let pushed = try pushedToken()
            let mirroredBefore = cursor > 0 || pushed != nil
            guard space == nil || !mirroredBefore else {
                throw MirrorError(
                    "this store was mirrored before into the log outside any space (by a build that did not record "
                        + "logs), not into \(here): a store mirrors into one log; run without --space, or start a new "
                        + "store", code: .otherLog)
            }
            try container.setMirrorValue(MirrorKeys.serverLog, id)
            return
        }
        guard bound != id else { return }
        throw MirrorError(
            "this store mirrors into another server log (id \(bound)) than \(here) on \(serverDescription) (id \(id)): "
                + "another space, another server, or a log made anew; a store mirrors into one log; to move its "
                + "objects, start a new store and copy them", code: .otherLog)
    }

    /// Fails when the server's log ends before this store's pull cursor: rows it applied were
    /// removed from the server (an administrator, a restore of the server), and new rows would
    /// take sequence numbers it has read past — it would never pull them.
    func checkServerLog() throws {
        try server.checkNotMoved()
        // The old copy of a moved space holds the same log, frozen: pulls from it would wait for
        // rows that never come (lag 1 for good, no error).
        if readsElsewhere {
            do {
                try reader.checkNotMoved()
            } catch let error as PostgresError where error.sqlState == MirrorServer.movedState {
                throw MirrorError(
                    "--read-from names a server (\(reader.connection.serverDescription)) whose copy of this space is "
                        + "no longer written: \(error.message); name a standby of the space's server",
                    code: .otherLog)
            }
        }
        try checkReadServer()
        if let problem = try rewrittenLog() {
            throw MirrorError(
                problem + "; nothing was pushed or pulled. 'storectl mirror --once --rejoin' takes the server's state, "
                    + "keeping this store's changes the server lacks, which go up again", code: .otherLog)
        }
    }

    /// Fails when `--read-from` names a server that takes writes and is not the one uploads go
    /// to (a standby promoted since, an old primary): the same log id, another log, whose rows
    /// would be read under sequences of the log uploads go to, skipping some.
    func checkReadServer() throws {
        guard readsElsewhere, try !reader.isStandby(), try reader.instance() != server.instance() else { return }
        throw MirrorError(
            "--read-from names a server (\(reader.connection.serverDescription)) that is no standby (it takes writes: "
                + "a standby promoted since, or another primary) and not the one uploads go to "
                + "(\(server.connection.serverDescription)): its log is not theirs; name a standby of the server "
                + "uploads go to", code: .otherLog)
    }

    /// Why the server's log is not the one this store pulled (nil: it is, as far as it tells):
    /// it ends before this store's pull cursor (rows were removed: an administrator, a restore
    /// of the server, a failover that lost them), or it holds another row than this store read
    /// at a sequence (a failover lost rows and others were uploaded under their numbers, or an
    /// old primary took uploads after it). Pulling on would skip rows, and a full upload would
    /// take what it skipped for this store's deletions.
    func rewrittenLog() throws -> String? {
        let cursor = max(scanned, try container.mirrorValue(MirrorKeys.pullCursor) ?? 0)
        guard cursor > 0 else { return nil }
        let last = try server.maxSequence()
        if last < cursor {
            return "the server's log ends at sequence \(last), before this store's pull cursor \(cursor): rows were "
                + "removed from the server (a failover that lost them, a restore of the server), and new ones would be "
                + "skipped"
        }
        guard let sequence = try container.mirrorValue(MirrorKeys.checkedSequence), sequence > 0,
            let print = try container.mirrorValue(MirrorKeys.checkedRow),
            let now = try server.rowKey(at: sequence),
            MirrorKeys.rowPrint(origin: now.origin, token: now.token) != print
        else { return nil }
        return "the server's log holds another row at sequence \(sequence) than this store pulled there (now one of "
            + "store \(now.origin.uuidString.lowercased()) under key \(now.token)): the log was rewritten since — a "
            + "failover that lost rows and took others under their numbers, or an old primary written to after it — "
            + "and rows would be skipped"
    }
}
