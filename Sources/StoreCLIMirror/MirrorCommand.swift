import Dispatch
import Foundation
import SharedStore
import SharedStoreMirror
import SharedStorePostgres
import StoreCLI

extension Targets {
    /// storectl with its `mirror` command (only storectl links PostgreSQL's client library: the
    /// other targets stay as small in memory as they were).
    public static let storectlWithMirror = storectl.adding(MirrorCommand.command, MirrorCommand.run)
}

/// `storectl mirror`: the store's mirror through PostgreSQL (issue 14).
enum MirrorCommand {
    static let command = Command(
        "mirror", "push local history to and pull other stores' transactions from PostgreSQL", options: options)

    static let options: [Option] = [
        .value(
            "postgres", "URL",
            "the server, as a libpq URL or key=value string without a password (default: libpq's environment, "
                + "PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSFILE)"),
        .flag("once", "push and pull until nothing is left, print one line, exit (the default)"),
        .flag("follow", "stay up: mirror every local save and every remote upload as it happens"),
        .value("for", "SECONDS", "with --follow: stop after this many seconds"),
    ]

    static func run(_ inv: Invocation) throws {
        let conninfo = try connectionString(inv)
        if inv.arguments.has("once") && inv.arguments.has("follow") {
            throw UsageError("--once and --follow exclude each other")
        }
        guard inv.arguments.has("follow") else {
            let mirror = try Mirror(
                container: inv.container(), registry: inv.registry(), connection: try PostgresConnection(conninfo))
            inv.output.record(try mirror.round().json)
            return
        }
        try follow(inv, conninfo: conninfo, seconds: try inv.arguments.seconds("for", in: 0...31_536_000))
    }

    /// The connection string: libpq's environment, or `--postgres` when it carries no password
    /// (a command line is visible to every user in `ps`).
    static func connectionString(_ inv: Invocation) throws -> String {
        guard let text = inv.arguments.value("postgres") else { return "" }
        let lower = text.lowercased()
        // postgresql://user:password@host/db: a colon in the part before "@".
        var urlPassword = false
        if lower.hasPrefix("postgres://") || lower.hasPrefix("postgresql://"), let scheme = text.range(of: "://") {
            let rest = text[scheme.upperBound...]
            let authority = rest.prefix { $0 != "/" && $0 != "?" }
            if let at = authority.lastIndex(of: "@") { urlPassword = authority[..<at].contains(":") }
        }
        if lower.contains("password=") || urlPassword {
            throw UsageError(
                "--postgres must not carry a password (other users see it in ps): put it in PGPASSFILE (~/.pgpass)")
        }
        return text
    }

    /// Mirrors until `seconds` pass or SIGINT/SIGTERM: a round on every local change (the change
    /// signal) and every remote upload (LISTEN/NOTIFY); an unreachable server is retried with
    /// backoff (0.1 s doubling to 5 s) while the local targets go on undisturbed.
    static func follow(_ inv: Invocation, conninfo: String, seconds: TimeInterval?) throws {
        // SIGINT and SIGTERM end the loop from here on (exit 0), however early they come.
        let stop = StopFlag()
        let wake = try WakePipe()
        let sources = stop.setOnTerminationSignals { wake.ring() }
        defer { sources.forEach { $0.cancel() } }
        let container = try inv.container()
        let registry = try inv.registry()
        // A background process: the app's own saves come first (Core Data's CloudKit mirroring
        // runs at background priority too). Best effort: a failure leaves the priority as it is.
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10)
        let deadline = seconds.map { Monotonic.seconds() + $0 }
        // The change signal's inotify watch, polled with the server's socket: no thread, and a
        // burst of saves is one wake-up (a thread per change cost the processor per save).
        let watch = try ChangeSignalWatch(path: ChangeSignal.path(of: container))
        var loop = FollowLoop(container: container, registry: registry, conninfo: conninfo, output: inv.output)
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
            if stop.isSet { break }
            // Without inotify (a file system without it), a round every second catches changes.
            loop.wait(min(wait, remaining, watch.usesInotify ? 3600 : 1), wake: wake, watch: watch.descriptor)
        }
    }
}

/// The state of `storectl mirror --follow` between rounds.
private struct FollowLoop {
    let container: Container
    let registry: TokenRegistry
    let conninfo: String
    let output: Output
    var mirror: Mirror?
    var backoff: TimeInterval = 0.1
    var lastError: String?
    /// When the last round ended (monotonic seconds), and how many transactions it moved.
    var lastRound: Double = 0
    var lastWork = 0
    var printedFirst = false

    init(container: Container, registry: TokenRegistry, conninfo: String, output: Output) {
        self.container = container
        self.registry = registry
        self.conninfo = conninfo
        self.output = output
    }

    /// One round (connecting first when needed); returns how long to wait for the next event.
    mutating func step() -> TimeInterval {
        do {
            if mirror == nil {
                let m = try Mirror(
                    container: container, registry: registry, connection: try PostgresConnection(conninfo))
                try m.listen()
                mirror = m
            }
            guard let mirror else { return backoff }
            let round = try mirror.round()
            lastWork = round.pushed + round.pulled
            // The first round is always printed: the mirror is up, and where it stands.
            if lastWork > 0 || lastError != nil || !printedFirst { output.record(round.json) }
            printedFirst = true
            lastError = nil
            backoff = 0.1
            return 5
        } catch {
            // The server went away or refused: start again with a new connection, later.
            mirror = nil
            let text = TextSafety.visible("\(error)")
            printedFirst = true
            if text != lastError {
                output.record(MirrorRound(server: "unreachable, retrying in \(backoff) s", error: text).json)
            }
            lastError = text
            keepAlive()
            let wait = backoff
            backoff = min(backoff * 2, 5)
            return wait
        }
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
