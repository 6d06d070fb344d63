import Foundation
import SharedStoreSupport

/// The upload lock: one upload (or prune, or move) of a log at a time, and an error that names
/// the session holding it when a wait runs out.
extension MirrorServer {
    /// Takes the log's upload lock until the transaction ends. A space has its own, which only its
    /// members may take (an advisory lock's key is public: any role could hold it and stop the
    /// space's uploads); a member holding it past `wait` fails this transaction, with an error
    /// naming the session that holds it (``namingLockHolder(_:)``), and the next round tries again.
    func lockUploads(wait: TimeInterval? = nil) throws {
        guard space != nil else {
            try connection.execute("SELECT pg_advisory_xact_lock(hashtext($1 || '.upload'))", [schema])
            return
        }
        // (A wait that is no number waits 30 s: no trap on a caller's NaN.)
        let seconds = wait ?? uploadLockWait
        let milliseconds = seconds.isFinite ? Int(min(max(seconds, 0.001), 86_400) * 1000) : 30_000
        try connection.execute("SELECT set_config('lock_timeout', $1, true)", ["\(milliseconds)ms"])
        let locked: [[String?]]
        do {
            locked = try connection.execute("SELECT 1 FROM \(schema).upload_lock WHERE id = 1 FOR UPDATE")
        } catch let error as PostgresError where error.sqlState == "55P03" {
            throw UploadLockTimeout(error: error)
        }
        guard !locked.isEmpty else {
            throw PostgresError(
                sqlState: "55000",
                message: "space '\(space ?? "")' has no upload lock row (id 1): it was changed on the server, and "
                    + "uploads stop until an administrator puts it back "
                    + "(INSERT INTO \(schema).upload_lock VALUES (1, 0))")
        }
    }

    /// Waiting for the upload lock timed out (``namingLockHolder(_:)`` says who holds it, once
    /// the transaction is rolled back).
    struct UploadLockTimeout: Error, CustomStringConvertible {
        let error: PostgresError
        var description: String { "\(error)" }
    }

    /// Runs `body`, a transaction that takes the upload lock; when waiting for it timed out
    /// (SQLSTATE 55P03), throws an error naming the session that holds it (its role and server
    /// process), which an administrator can end.
    func namingLockHolder<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch is UploadLockTimeout {
            // A row locked for update holds its locker's transaction id; that transaction's
            // lock names the session.
            let holder = try? connection.execute(
                """
                SELECT a.pid, a.usename FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                WHERE l.locktype = 'transactionid' AND l.granted AND l.mode = 'ExclusiveLock'
                    AND l.transactionid::text = (SELECT xmax::text FROM \(schema).upload_lock WHERE id = 1)
                LIMIT 1
                """
            ).first
            let who =
                holder.flatMap { row in
                    row.count == 2
                        ? row[0].map {
                            "role '\(TextSafety.visible(row[1] ?? "?"))' (server process \(TextSafety.visible($0)))"
                        } : nil
                } ?? "another session"
            let end =
                holder.flatMap { $0.first ?? nil }.flatMap { Int64($0) }.map { " (SELECT pg_terminate_backend(\($0)))" }
                ?? ""
            throw PostgresError(
                sqlState: "55P03",
                message: "\(space.map { "space '\($0)'" } ?? "the log")'s upload lock is held by \(who), which did not "
                    + "let it go in time: an administrator can end that session\(end); "
                    + "the next round tries again")
        }
    }
}
