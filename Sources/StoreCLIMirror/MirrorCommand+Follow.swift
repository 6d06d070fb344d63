import Dispatch
import Foundation
import SharedStore
import SharedStoreMirror
import SharedStorePostgres
import StoreCLI

/// `storectl mirror --follow`: rounds on every local change and every remote upload until told
/// to stop, with the loop's state between rounds.
extension MirrorCommand {
    /// How long a follower asked to stop may go on finishing its round.
    static let stopGrace: TimeInterval = 10

    /// Mirrors until `seconds` pass or SIGINT/SIGTERM: a round on every local change (the change
    /// signal) and every remote upload (LISTEN/NOTIFY); an unreachable server is retried with
    /// backoff (0.1 s doubling to 5 s) while the local targets go on undisturbed.
    static func follow(
        _ inv: Invocation, server: @escaping () throws -> String, seconds: TimeInterval?, snapshotEvery: Int64?
    ) throws {
        // SIGINT and SIGTERM end the loop from here on (exit 0), however early they come.
        let stop = StopFlag()
        let wake = try WakePipe()
        let signals = try stop.setOnTerminationSignals {
            wake.ring()
            // A round waits on the server without a deadline of its own (libpq's calls block): a
            // server that hangs, or a network that drops packets, would keep a follower asked to
            // stop from stopping. After 10 s it ends anyway, as a kill would end it: a round is
            // one SQLite transaction here and idempotent on the server, so nothing is lost.
            DispatchQueue.global().asyncAfter(deadline: .now() + stopGrace) {
                let message =
                    "error: still in a round \(Int(stopGrace)) s after the signal to stop "
                    + "(the server does not answer); stopping now\n"
                FileHandle.standardError.write(Data(message.utf8))
                _exit(1)
            }
        }
        defer { signals.cancel() }
        let container = try inv.container()
        let registry = try inv.registry()
        // A background process: the app's own saves come first (Core Data's CloudKit mirroring
        // runs at background priority too). Best effort: a failure leaves the priority as it is.
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10)
        let deadline = seconds.map { Monotonic.seconds() + $0 }
        // The change signal's inotify watch, polled with the server's socket: no thread, and a
        // burst of saves is one wake-up (a thread per change cost the processor per save).
        let watch = try ChangeSignalWatch(path: ChangeSignal.path(of: container))
        var loop = FollowLoop(
            container: container, registry: registry, server: server, space: inv.arguments.value("space"),
            output: inv.output)
        loop.readConninfo = try readConnectionString(inv)
        loop.snapshotEvery = snapshotEvery
        loop.rowLimit = try rowLimit(inv)
        loop.isCancelled = { stop.isSet }
        while !stop.isSet {
            let remaining = deadline.map { $0 - Monotonic.seconds() } ?? 3600
            if remaining <= 0 { break }
            // In a burst (the last round moved several transactions), rounds at most every 5 ms:
            // the saves are pushed in batches, not a round per save competing with the app for
            // the processor. A lone save, or one after the last, goes at once.
            let since = Monotonic.seconds() - loop.lastRound
            if since < 0.005 && loop.lastWork > 1 { usleep(UInt32((0.005 - since) * 1_000_000)) }
            // Drained before the round: a change signalled during it rings again, and the wait
            // below returns at once.
            wake.drain()
            watch.drainEvents()
            let wait = loop.step()
            loop.lastRound = Monotonic.seconds()
            // A store migrated by a newer app, or rows only a newer app can read: retrying cannot
            // help, so the follower ends (exit 1) as the targets' watchers do.
            if let fatal = loop.fatal { throw fatal }
            if stop.isSet { break }
            // Without inotify (a file system without it), a round every second catches changes.
            loop.wait(min(wait, remaining, watch.usesInotify ? 3600 : 1), wake: wake, watch: watch.descriptor)
        }
    }
}

/// The state of `storectl mirror --follow` between rounds.
struct FollowLoop {
    let container: Container
    let registry: TokenRegistry
    /// Where to connect, asked at each connection (the space directory may have moved the space).
    let server: () throws -> String
    let space: String?
    /// Where pulls read (`--read-from`; nil: where uploads go).
    var readConninfo: String?
    /// `--snapshot-every` (nil: the mirror's default).
    var snapshotEvery: Int64?
    /// `name` checked as a space name before anything connects: a usage error naming the rule.
    static func checkSpaceName(_ name: String, option: String) throws {
        do {
            _ = try MirrorServer.schema(forSpace: name)
        } catch let error as PostgresError {
            throw UsageError("--\(option): \(error.message)")
        }
    }

    /// `--max-row-mb` in bytes (nil: the mirror's default).
    var rowLimit: Int64?
    /// Why the `--read-from` server could not be reached, and since when (monotonic seconds):
    /// pulls read from the upload server meanwhile.
    var readsFromUploadServer: (error: String, since: Double)?
    /// Rounds in a row that looked again soon for a lagging standby.
    var standbyLooks = 0
    let output: Output
    var mirror: Mirror?
    var backoff: TimeInterval = 0.1
    var lastError: String?
    /// How rounds named the server last (nil: none was reached yet).
    var lastServer: String?
    /// When the last round ended (monotonic seconds), and how many transactions it moved.
    var lastRound: Double = 0
    var lastWork = 0
    var printedFirst = false
    /// How many rows were quarantined after the last round (a change is printed).
    var lastQuarantined = 0
    /// An error that retrying cannot mend (the loop ends with it).
    var fatal: (any Error)?
    /// Whether the loop was asked to stop (a round ends between batches then).
    var isCancelled: @Sendable () -> Bool = { false }

    init(
        container: Container, registry: TokenRegistry, server: @escaping () throws -> String, space: String?,
        output: Output
    ) {
        self.container = container
        self.registry = registry
        self.server = server
        self.space = space
        self.output = output
    }

    /// One round (connecting first when needed); returns how long to wait for the next event.
    mutating func step() -> TimeInterval {
        do {
            if mirror == nil {
                let connection = try PostgresConnection(try server())
                let m = try Mirror(
                    container: container, registry: registry, connection: connection, space: space,
                    readConnection: readConnection())
                try m.listen()
                m.isCancelled = isCancelled
                if let snapshotEvery { m.snapshotEvery = snapshotEvery }
                if let rowLimit { m.rowLimit = rowLimit }
                mirror = m
            }
            guard let mirror else { return backoff }
            lastServer = mirror.serverDescription
            let round = try mirror.round()
            lastWork = round.pushed + round.pulled
            // The first round is always printed: the mirror is up, and where it stands.
            if lastWork > 0 || lastError != nil || !printedFirst || round.quarantinedCount != lastQuarantined {
                var line = round.json
                if case .object(let fields) = line, let down = readsFromUploadServer {
                    line = .object(fields + [("read_from_down", .string(down.error))])
                }
                output.record(line)
            }
            // Pulls read from the upload server while the --read-from server is down: it is tried
            // again every 30 s, with the next connection.
            if let down = readsFromUploadServer, Monotonic.seconds() - down.since >= 30 { self.mirror = nil }
            lastQuarantined = round.quarantinedCount
            printedFirst = true
            lastError = nil
            backoff = 0.1
            // A standby pulls read from may lag the primary that woke this round: look again soon,
            // for at most 5 s in a row (a lag that is this store's own, a change that cannot go up,
            // would otherwise keep it busy).
            if (round.lag ?? 0) == 0 { standbyLooks = 0 }
            if readConninfo != nil, (round.lag ?? 0) > 0, standbyLooks < 50 {
                standbyLooks += 1
                return 0.1
            }
            return 5
        } catch {
            if Self.isFatal(error) {
                fatal = error
                return 0
            }
            // The server went away or refused, another mirror holds the store, or a round failed:
            // start again with a new connection, later.
            mirror = nil
            report(error)
            keepAlive()
            let wait = backoff
            // A space moved is looked up again soon: the directory names its new server at once,
            // or within the move's last step.
            let moved = (error as? MirrorError)?.code == .spaceMoved
            backoff = moved ? 0.1 : min(backoff * 2, 5)
            return wait
        }
    }

    /// The connection pulls read from: `--read-from`'s server, or nil (pulls read where uploads
    /// go) when there is none or it cannot be reached. A standby that is down does not stop the
    /// uploads: the upload server holds the same log, and the rounds say it (`read_from_down`).
    mutating func readConnection() -> PostgresConnection? {
        guard let readConninfo else { return nil }
        do {
            let connection = try PostgresConnection(readConninfo)
            readsFromUploadServer = nil
            return connection
        } catch {
            let text = TextSafety.visible("\(error)".split(whereSeparator: \.isNewline).joined(separator: " "))
            readsFromUploadServer = (text, Monotonic.seconds())
            return nil
        }
    }

    /// Prints the line of a round that could not run, once per distinct error: `server` names
    /// the server as rounds do (the last one reached; null: none yet), `state` what keeps the
    /// round from running, `retry_in` when the next is tried.
    mutating func report(_ error: any Error) {
        let text = TextSafety.visible("\(error)".split(whereSeparator: \.isNewline).joined(separator: " "))
        printedFirst = true
        if text != lastError {
            output.record(
                .object([
                    ("pushed", .number(0)), ("pulled", .number(0)), ("lag", .null),
                    ("server", lastServer.map(JSONValue.string) ?? .null), ("state", .string(Self.state(of: error))),
                    ("retry_in", .number(backoff)), ("error", .string(text)),
                ]))
        }
        lastError = text
    }

    /// Whether retrying cannot mend `error`: the store was migrated by a newer app, the server
    /// holds rows only a newer app can read, or the store mirrors into another log. (A role
    /// denied its space is retried: an administrator may grant it again.)
    static func isFatal(_ error: any Error) -> Bool {
        if case .newerModel? = MirrorError.reason(of: error) { return true }
        if let e = error as? MirrorError, e.code == .otherLog || e.code == .behindHorizon { return true }
        if let e = error as? StoreError { return e.code == .modelOutdated || e.code == .modelNewer }
        return false
    }

    /// What kept the round from running, in a few words.
    static func state(of error: any Error) -> String {
        switch MirrorError.reason(of: error) {
        case .busy?: return "another mirror runs on this store"
        case .serverUnreachable?: return "unreachable"
        case .accessDenied?: return "access denied"
        case .newerModel?, .badRow?, nil: break
        }
        if let e = error as? StoreError, e.code == .busy { return "the store is busy" }
        if let e = error as? MirrorError, e.code == .spaceMoved { return "the space moved" }
        if let e = error as? PostgresError, e.sqlState == PostgresConnection.unconfirmedCommitState {
            return "the server's synchronous standby does not confirm commits"
        }
        return "the round failed"
    }

    /// Tells the registry the mirror is alive while the server is away, so that a cleaner that
    /// evicts silent consumers keeps the history it has not pushed.
    func keepAlive() {
        if let token = try? registry.consumer(Mirror.consumer)?.token, token.storeID == container.storeID {
            _ = try? registry.advance(Mirror.consumer, to: token)
        }
    }

    /// Waits for a server wake-up, a local change (`watch`: the change signal's inotify
    /// descriptor), a signal, or `timeout`.
    mutating func wait(_ timeout: TimeInterval, wake: WakePipe, watch: Int32) {
        guard let mirror else {
            wake.wait(timeout: timeout)
            return
        }
        do {
            try mirror.wait(timeout: timeout, wake: [wake.readEnd, watch])
        } catch {
            self.mirror = nil
        }
    }
}

/// A pipe that wakes a waiting thread: another thread (a signal handler) writes a byte; the
/// waiter polls the read end.
final class WakePipe: Sendable {
    let readEnd: Int32
    private let writeEnd: Int32

    init() throws {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else {
            throw StoreError(.storage, "cannot make a pipe: \(String(cString: strerror(errno)))")
        }
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, O_NONBLOCK)
        }
        readEnd = fds[0]
        writeEnd = fds[1]
    }

    deinit {
        close(readEnd)
        close(writeEnd)
    }

    func ring() {
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    func drain() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(readEnd, &buffer, buffer.count) > 0 {}
    }

    func wait(timeout: TimeInterval) {
        var fd = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
        _ = poll(&fd, 1, Int32(max(0, min(timeout, 3600)) * 1000))
    }
}
