import CLibPQ
import Foundation
import SharedStoreSupport

/// An error PostgreSQL or libpq reported: the SQLSTATE when the server sent one, and its message.
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    public let sqlState: String?
    public let message: String
    /// True when the server could not be reached or the connection to it broke (libpq said so,
    /// or the connection is no longer up): trying again later, with a new connection, may work.
    public let connectionFailed: Bool

    /// An error with `sqlState` (nil: libpq's own, not the server's) and `message`.
    public init(sqlState: String?, message: String, connectionFailed: Bool = false) {
        self.sqlState = sqlState
        self.message = message
        self.connectionFailed = connectionFailed
    }

    public var description: String { "PostgreSQL: \(message)" + (sqlState.map { " (SQLSTATE \($0))" } ?? "") }
}

/// One connection to a PostgreSQL server through libpq. The server, user, database and password
/// come from libpq's standard environment (`PGHOST`, `PGPORT`, `PGUSER`, `PGDATABASE`,
/// `PGPASSFILE`…) or a connection string, never from a command-line argument others can read in
/// `ps`. Used from one thread at a time.
public final class PostgresConnection {
    private let handle: OpaquePointer

    /// Connects with `conninfo` (empty: everything from the environment).
    ///
    /// - Throws: ``PostgresError`` naming why the server could not be reached.
    public init(_ conninfo: String = "") throws {
        guard let connection = PQconnectdb(conninfo) else {
            throw PostgresError(sqlState: nil, message: "libpq could not allocate a connection")
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = String(cString: PQerrorMessage(connection)).trimmingCharacters(in: .whitespacesAndNewlines)
            PQfinish(connection)
            throw PostgresError(sqlState: nil, message: "cannot connect: \(message)", connectionFailed: true)
        }
        handle = connection
        // Notices ("already exists, skipping") are not errors: not printed.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
    }

    deinit { PQfinish(handle) }

    /// The options `conninfo` sets (a URL or `key=value` string), read by libpq's own parser
    /// (`PQconninfoParse`): however a password is spelled (`password = x`, `pass%77ord=x` in a
    /// URL's query, `user:secret@` in a URL), it comes back as `password`.
    ///
    /// - Throws: ``PostgresError`` with libpq's message when the string cannot be parsed.
    public static func options(of conninfo: String) throws -> [String: String] {
        var message: UnsafeMutablePointer<CChar>?
        guard let parsed = PQconninfoParse(conninfo, &message) else {
            let text = message.map { String(cString: $0) } ?? "out of memory"
            if let message { PQfreemem(message) }
            throw PostgresError(
                sqlState: nil,
                message: "the connection string cannot be read: \(text.trimmingCharacters(in: .whitespacesAndNewlines))"
            )
        }
        defer { PQconninfoFree(parsed) }
        var out: [String: String] = [:]
        var option = parsed
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val { out[String(cString: keyword)] = String(cString: value) }
            option += 1
        }
        return out
    }

    /// Whether the connection is up (libpq's `PQstatus`): false once the server went away.
    public var isConnected: Bool { PQstatus(handle) == CONNECTION_OK }

    /// The server's version number (150004 for 15.4).
    public var serverVersion: Int { Int(PQserverVersion(handle)) }

    /// Where the connection goes, without secrets: `PostgreSQL 15.4 at /tmp/x:5432, database d`.
    public var serverDescription: String {
        let v = serverVersion
        let host = PQhost(handle).map { String(cString: $0) } ?? "?"
        let port = PQport(handle).map { String(cString: $0) } ?? "?"
        let db = PQdb(handle).map { String(cString: $0) } ?? "?"
        return "PostgreSQL \(v / 10000).\(v % 10000) at \(host):\(port), database \(db)"
    }

    /// The role this connection logged in as (libpq's `PQuser`).
    public var user: String { PQuser(handle).map { String(cString: $0) } ?? "?" }

    /// Whether the server syncs its commits to disk (its `fsync` setting: "on" or "off"; nil when
    /// it does not say).
    ///
    /// - Throws: ``PostgresError`` when the server cannot be asked.
    public func fsyncSetting() throws -> String? {
        try execute("SHOW fsync").first?[0] ?? nil
    }

    /// Creates database `name` (a plain identifier), for a test or benchmark of its own.
    public func createDatabase(_ name: String) throws {
        try execute("CREATE DATABASE \(try Self.identifier(name))")
    }

    /// Drops database `name`, ending the sessions still connected to it.
    public func dropDatabase(_ name: String) throws {
        try execute("DROP DATABASE IF EXISTS \(try Self.identifier(name)) WITH (FORCE)")
    }

    /// Creates role `name` (a plain identifier) that may log in, with no other attribute: a
    /// machine's role for a test or benchmark of its own (``MirrorSpaces/grant(_:to:)``).
    public func createLoginRole(_ name: String) throws {
        try execute("CREATE ROLE \(try Self.identifier(name)) LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB")
    }

    /// Drops role `name` when it exists (its privileges in databases dropped before go with them).
    public func dropRole(_ name: String) throws {
        try execute("DROP ROLE IF EXISTS \(try Self.identifier(name))")
    }

    /// `name` when it is a plain lowercase identifier (nothing to quote).
    static func identifier(_ name: String) throws -> String {
        guard !name.isEmpty, name.count <= 63,
            name.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "_") })
        else { throw PostgresError(sqlState: nil, message: "'\(name)' is not a plain identifier") }
        return name
    }

    /// Runs `sql` with `parameters` bound to `$1`, `$2`… as text (nil: NULL); returns the rows,
    /// each column as text (nil: NULL).
    ///
    /// - Throws: ``PostgresError`` with the server's SQLSTATE and message.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [String?] = []) throws -> [[String?]] {
        let result = withCStrings(parameters) { values in
            PQexecParams(handle, sql, Int32(parameters.count), nil, values, nil, nil, 0)
        }
        guard let result else {
            throw PostgresError(
                sqlState: nil, message: String(cString: PQerrorMessage(handle)), connectionFailed: !isConnected)
        }
        defer { PQclear(result) }
        return try rows(of: result)
    }

    /// The rows of `result`, or the error it holds.
    private func rows(of result: OpaquePointer) throws -> [[String?]] {
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
            return []
        case PGRES_TUPLES_OK:
            return (0..<PQntuples(result)).map { row in
                (0..<PQnfields(result)).map { column in
                    PQgetisnull(result, row, column) != 0 ? nil : String(cString: PQgetvalue(result, row, column))
                }
            }
        default:
            func field(_ code: UInt8) -> String? {
                PQresultErrorField(result, Int32(code)).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
            }
            // The server's message, its detail and hint, on one line: not libpq's whole report,
            // whose severity prefix and PL/pgSQL CONTEXT lines are no part of an error a user reads.
            let full = String(cString: PQresultErrorMessage(result)).trimmingCharacters(in: .whitespacesAndNewlines)
            var message = field(UInt8(ascii: "M")) ?? full
            if let detail = field(UInt8(ascii: "D")) { message += " (\(detail))" }
            if let hint = field(UInt8(ascii: "H")) { message += "; \(hint)" }
            message = message.split(whereSeparator: \.isNewline).joined(separator: " ")
            throw PostgresError(
                sqlState: field(UInt8(ascii: "C")), message: message, connectionFailed: !isConnected)
        }
    }

    /// Commits the open transaction, waiting at most `seconds` for the server's answer. A commit
    /// the server holds longer — with synchronous replication, waiting for a standby that is
    /// not there (`synchronous_standby_names`) — is asked to stop waiting (a cancel: the
    /// transaction then stands on this server, unconfirmed) and fails with SQLSTATE
    /// ``unconfirmedCommitState``, naming the cause: the caller tries again later, never
    /// waiting for good.
    ///
    /// - Throws: ``PostgresError``: the server's error, the unconfirmed commit, or a connection
    ///   that answers nothing a minute after the cancel (`connectionFailed`).
    public func commit(within seconds: TimeInterval) throws {
        guard PQsendQuery(handle, "COMMIT") == 1 else {
            throw PostgresError(
                sqlState: nil, message: String(cString: PQerrorMessage(handle)), connectionFailed: !isConnected)
        }
        let limit = seconds.isFinite ? min(max(seconds, 0.001), 86_400) : 30
        let start = Monotonic.seconds()
        var canceled = false
        while PQisBusy(handle) == 1 {
            let elapsed = Monotonic.seconds() - start
            if !canceled && elapsed >= limit {
                if let cancel = PQgetCancel(handle) {
                    var buffer = [CChar](repeating: 0, count: 256)
                    _ = PQcancel(cancel, &buffer, 256)
                    PQfreeCancel(cancel)
                }
                canceled = true
            }
            if canceled && elapsed >= limit + 60 {
                throw PostgresError(
                    sqlState: nil, message: "the server answered neither a commit nor its cancel for a minute",
                    connectionFailed: true)
            }
            var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
            let wait = canceled ? 1 : max(0.001, min(limit - elapsed, 1))
            if poll(&descriptor, 1, Int32(wait * 1000)) > 0, PQconsumeInput(handle) != 1 {
                throw PostgresError(
                    sqlState: nil, message: String(cString: PQerrorMessage(handle)), connectionFailed: true)
            }
        }
        var failure: (any Error)?
        while let result = PQgetResult(handle) {
            defer { PQclear(result) }
            do { _ = try rows(of: result) } catch { failure = failure ?? error }
        }
        if let failure { throw failure }
        guard !canceled else {
            throw PostgresError(
                sqlState: Self.unconfirmedCommitState,
                message: "the server did not confirm a commit within \(Int(limit)) s: with synchronous replication it "
                    + "waits for a standby to confirm it, and none did (is the synchronous standby up? "
                    + "synchronous_standby_names); the commit stands on this server only, unconfirmed, and the next "
                    + "round tries again")
        }
    }

    /// The SQLSTATE of a commit the server held past its limit (``commit(within:)``).
    public static let unconfirmedCommitState = "SSCNF"

    /// Waits up to `timeout` seconds for a notification on a channel this connection LISTENs to
    /// (``MirrorServer/listen()``); returns the channels and payloads that arrived (empty: none).
    ///
    /// - Throws: ``PostgresError`` when the connection broke.
    ///
    /// - Parameter wake: descriptors that end the wait early when one becomes readable (the read
    ///   end of a pipe another thread writes to, an inotify watch); they are not read here.
    public func notifications(timeout: TimeInterval, wake: [Int32] = []) throws -> [(channel: String, payload: String)]
    {
        var out = drainNotifications()
        guard out.isEmpty else { return out }
        let socket = PQsocket(handle)
        guard socket >= 0 else {
            throw PostgresError(sqlState: nil, message: "the connection is closed", connectionFailed: true)
        }
        var descriptors = [pollfd(fd: socket, events: Int16(POLLIN), revents: 0)]
        for fd in wake where fd >= 0 { descriptors.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0)) }
        let ready = poll(&descriptors, nfds_t(descriptors.count), Int32(max(0, min(timeout, 3600)) * 1000))
        guard ready > 0, descriptors[0].revents != 0 else { return [] }
        guard PQconsumeInput(handle) == 1 else {
            // Reading the socket failed: the connection broke.
            throw PostgresError(sqlState: nil, message: String(cString: PQerrorMessage(handle)), connectionFailed: true)
        }
        out = drainNotifications()
        return out
    }

    private func drainNotifications() -> [(channel: String, payload: String)] {
        var out: [(channel: String, payload: String)] = []
        while let n = PQnotifies(handle) {
            out.append((String(cString: n.pointee.relname), String(cString: n.pointee.extra)))
            PQfreemem(n)
        }
        return out
    }

    /// `parameters` as C strings alive during `body`.
    private func withCStrings<T>(_ parameters: [String?], _ body: ([UnsafePointer<CChar>?]) -> T) -> T {
        let storage: [UnsafeMutablePointer<CChar>?] = parameters.map { $0.map { strdup($0) } ?? nil }
        defer { storage.forEach { free($0) } }
        return body(storage.map { UnsafePointer($0) })
    }
}
