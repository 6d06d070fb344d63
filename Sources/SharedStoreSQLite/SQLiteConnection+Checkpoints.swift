import CSQLite
import Foundation
import SharedStoreSupport

/// When a connection checkpoints the WAL after its commits, in place of SQLite's auto-checkpoint.
///
/// SQLite's auto-checkpoint runs a passive checkpoint on every commit that leaves the WAL at or
/// above 1000 frames. The WAL only starts again from its beginning (restarts) when a write
/// transaction begins with every frame copied back. With two processes writing at once, one of
/// them nearly always commits while the other checkpoints, so the WAL stops restarting: it grows
/// without end, and every commit of every writer then runs a checkpoint of the few frames since
/// the last, with two fsyncs (measured: two writer processes made 0.57 fsync per save, one
/// writer 0.011).
///
/// This policy checkpoints as often as SQLite's (after `everyFrames` frames written, by any
/// process, since this connection's last checkpoint, not after every commit above the mark) and,
/// when the WAL has not restarted by `restartFrames` frames, tries to restart it so that the next
/// writer starts it over. The checkpoints run on a thread of their own (``Checkpointer``), so
/// no save waits for their copies and fsyncs.
///
/// A restart begins with passive checkpoints, which copy the frames back without holding anyone
/// up: up to three, each copying what was committed during the one before, until one is quick
/// (within `restartWait`). When none is (a slow disk, a large commit), the restart is left to a
/// try `everyFrames / 4` frames later, so that frames committed meanwhile are not copied with
/// the write lock held; once the WAL reaches twice `restartFrames`, it goes on anyway. When the
/// last pass left at most `everyFrames` uncopied for readers of older snapshots, a restarting
/// checkpoint takes the write lock, copies what was committed since, and waits for those
/// readers: both waits together about `restartWait` at most, besides the copy. When readers or
/// other writers still defeat it (a pin, a long fetch, a catch-up, a reader that holds its
/// snapshot through the wait), the policy tries again once the WAL has grown by `restartFrames`
/// more, not at every commit. A writer that pauses, alone and with no reader, never needs it:
/// the checkpoints leave nothing to copy when it next writes, and the WAL starts over then.
package struct CheckpointPolicy: Sendable {
    /// Frames written since this connection's last checkpoint that call for the next one.
    package var everyFrames: Int32 = 1000
    /// WAL frames at which it is restarted (about 16 MiB of 4 KiB pages).
    package var restartFrames: Int32 = 4000
    /// About the longest the passive checkpoint before a restart may take for the restart to
    /// follow it, and the longest the restart waits for other writers and readers (the busy
    /// handler sleeps in steps of up to 2 ms, so it may pass it by that much).
    package var restartWait: Double = 0.005
    /// The size the WAL file is cut back to at the first commit after it restarts, when it grew
    /// past it (a large batch, a pin): SQLite's `journal_size_limit`. Without it the file keeps
    /// its largest size until the last connection closes.
    package var fileLimit: Int64 = 16 << 20
    /// Whether checkpoints run on a thread of their own (see ``Checkpointer``), or in the commit
    /// that calls for them. A store whose commits each wait for an fsync (`synchronous = FULL`)
    /// runs them in the commit: there, checkpoints beside the commits made it slower (measured:
    /// 0.71–0.80 of the C API's durable saves against 0.88–1.04), where a store that syncs only
    /// at checkpoints went from 0.76 to 0.98 of the C API's saves with no history.
    package var onThread = true
    /// Called before each checkpoint job, on the thread that runs it (for tests).
    package var beforeJob: (@Sendable () -> Void)?

    package init() {}
}

/// The checkpoints of one writer connection, by its ``CheckpointPolicy``, run on a connection and
/// a thread of their own, so that no commit waits for a checkpoint's copy and its two fsyncs (up
/// to 61 ms each on this machine's disk). The writer's WAL hook only counts frames and, when a
/// checkpoint is due, hands it over. The one exception is the restarting checkpoint that ends a
/// restart: the writer runs it, in the commit after the thread's passive checkpoints made it
/// ready. From another connection it would wait for the write lock, which a writer that never
/// pauses nearly always holds (tried: the WAL grew to four times the mark and more), and the
/// writer would wait for it meanwhile anyway.
///
/// The thread starts with the first checkpoint due (a process that writes a few frames and exits
/// never starts one). Where it cannot start (the process is out of threads), or the policy says
/// not to (``CheckpointPolicy/onThread``), the committing thread runs the checkpoint itself, as
/// SQLite's auto-checkpoint would.
final class Checkpointer: @unchecked Sendable {
    enum Job {
        case passive
        /// A restart tried at `frames`, the WAL not having started over since `resets` did.
        case restart(frames: Int32, resets: Int)
    }

    let policy: CheckpointPolicy
    /// The checkpoints' own connection to the writer's database, used by one thread at a time:
    /// the checkpoint thread, or the committing thread while `running` where there is none.
    private let connection: SQLiteConnection
    private let condition = NSCondition()
    // Everything below is guarded by `condition`.
    /// The WAL's frames after the writer's last commit. A smaller count at a commit means the
    /// WAL restarted since; a connection that commits rarely may miss a restart (the WAL grew
    /// back past its count meanwhile): it then checkpoints or restarts later than it could,
    /// while the writers that commit often do it.
    private var frames: Int32 = 0
    /// The WAL's frames when the last checkpoint was handed over.
    private var checkpointedAt: Int32 = 0
    /// The WAL's frames at which the next restart is tried: after a try that readers or other
    /// writers defeated, not before the WAL grew by `restartFrames` more, so that a long reader
    /// does not make every commit try.
    private var restartAt: Int32
    /// How many times the WAL was seen starting over.
    private var resets = 0
    private var due: Job?
    /// Set by the thread when the next commit is to restart the WAL: the count of `resets` then.
    private var restartReady: Int?
    private var running = false, stopping = false
    private var thread: pthread_t?
    /// Checkpoints run, and tries to restart the WAL (for tests).
    private var checkpoints = 0, restarts = 0

    /// The writer's busy wait, capped for the restart it runs.
    private let writerBusy: BusyWait

    init(_ policy: CheckpointPolicy, connection: SQLiteConnection, writerBusy: BusyWait) {
        self.policy = policy
        self.connection = connection
        self.writerBusy = writerBusy
        restartAt = policy.restartFrames
    }

    /// After a commit of the writer `db` that left `walFrames` frames in the WAL (on the
    /// committing thread, from its WAL hook). A checkpoint that fails (busy, an I/O error) leaves
    /// the WAL as it was; the commit stands either way.
    func committed(_ db: OpaquePointer, walFrames: Int32) {
        condition.lock()
        if walFrames < frames {
            checkpointedAt = 0
            restartAt = policy.restartFrames
            resets += 1
        }
        frames = walFrames
        // One checkpoint at a time: one due while another runs waits for a later commit.
        guard due == nil, !running, !stopping else { return condition.unlock() }
        if let ready = restartReady {
            restartReady = nil
            // Unless the WAL started over since the passes (then there is nothing to restart).
            if ready == resets {
                running = true
                condition.unlock()
                return restart(db, walFrames: walFrames)
            }
        }
        let job: Job
        if walFrames >= restartAt {
            job = .restart(frames: walFrames, resets: resets)
        } else if walFrames - min(checkpointedAt, walFrames) >= policy.everyFrames {
            job = .passive
        } else {
            return condition.unlock()
        }
        checkpointedAt = walFrames
        if policy.onThread && startThread() {
            due = job
            condition.signal()
            return condition.unlock()
        }
        running = true
        condition.unlock()
        run(job)
    }

    /// Whether the checkpoint thread runs (started now if it was not). Called with the lock held.
    private func startThread() -> Bool {
        if thread != nil { return true }
        let context = Unmanaged.passRetained(self).toOpaque()
        var id = pthread_t()
        let rc = pthread_create(
            &id, nil,
            { context in
                guard let context else { return nil }
                let checkpointer = Unmanaged<Checkpointer>.fromOpaque(context).takeRetainedValue()
                checkpointer.loop()
                return nil
            }, context)
        guard rc == 0 else {
            Unmanaged<Checkpointer>.fromOpaque(context).release()
            return false
        }
        thread = id
        return true
    }

    /// The checkpoint thread: runs each job handed over until ``stop()``.
    private func loop() {
        condition.lock()
        while true {
            while due == nil && !stopping { condition.wait() }
            guard !stopping, let job = due else { break }
            due = nil
            running = true
            condition.unlock()
            run(job)
            condition.lock()
        }
        condition.unlock()
    }

    /// The restarting checkpoint on the writer `db`, in its commit (`running` set by the caller).
    private func restart(_ db: OpaquePointer, walFrames: Int32) {
        policy.beforeJob?()
        var log: Int32 = -1
        let rc: Int32
        do {
            // A bounded wait: it holds the write lock while it waits for readers.
            writerBusy.cap = policy.restartWait
            defer { writerBusy.cap = nil }
            rc = sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_RESTART, &log, nil)
        }
        condition.lock()
        checkpoints += 1
        if rc != SQLITE_OK && log >= 0 { restartAt = Self.adding(walFrames, policy.restartFrames) }
        running = false
        condition.broadcast()
        condition.unlock()
    }

    /// Runs `job` on the checkpoints' connection (`running` set by the caller), then records it.
    private func run(_ job: Job) {
        policy.beforeJob?()
        var outcome = (checkpoints: 1, tried: false, retryAt: Int32?.none, ready: false)
        var jobResets = 0
        switch job {
        case .passive:
            _ = checkpoint(SQLITE_CHECKPOINT_PASSIVE)
        case .restart(let walFrames, let resets):
            outcome = prepareRestart(walFrames: walFrames)
            jobResets = resets
        }
        condition.lock()
        checkpoints += outcome.checkpoints
        if outcome.tried { restarts += 1 }
        // A restart put off: not tried again before `retryAt`, unless the WAL started over since.
        if let at = outcome.retryAt, jobResets == resets { restartAt = at }
        if outcome.ready { restartReady = jobResets }
        running = false
        condition.broadcast()
        condition.unlock()
    }

    /// Passive checkpoints until one is quick (each copies what was committed during the one
    /// before; three at most): the checkpoints run, whether a restart was tried, the frames before
    /// which no restart is to be tried again, and whether the writer's next commit is to restart
    /// the WAL (when the last pass left at most `everyFrames` for readers of older snapshots).
    private func prepareRestart(walFrames: Int32) -> (checkpoints: Int, tried: Bool, retryAt: Int32?, ready: Bool) {
        var passes = 0
        var quick = false
        var last: (log: Int32, done: Int32) = (-1, -1)
        while passes < 3 && !quick {
            passes += 1
            let start = Monotonic.seconds()
            let (_, log, done) = checkpoint(SQLITE_CHECKPOINT_PASSIVE)
            // log -1: nothing was done (another connection holds the checkpoint lock, or an
            // error): try again later.
            guard log >= 0 else {
                return (passes, false, Self.adding(walFrames, max(1, policy.everyFrames / 4)), false)
            }
            last = (log, done)
            quick = Monotonic.seconds() - start <= policy.restartWait
        }
        // Still long copies (a slow disk, writers committing fast): the restart would copy under
        // the write lock what was committed meanwhile. Try again soon, but not at every commit;
        // once the WAL has grown to twice the mark, restart anyway (a save may then wait for
        // the restart's copy and fsyncs), or a writer that never pauses would grow it for good.
        guard quick || walFrames / 2 >= policy.restartFrames else {
            return (passes, false, Self.adding(walFrames, max(1, policy.everyFrames / 4)), false)
        }
        // Readers of older snapshots hold more than a restart should copy under the lock.
        if last.log - last.done > policy.everyFrames {
            return (passes, true, Self.adding(walFrames, policy.restartFrames), false)
        }
        return (passes, true, nil, true)
    }

    /// `a + b` for frame counts (b positive), at most `Int32.max`.
    private static func adding(_ a: Int32, _ b: Int32) -> Int32 { a > Int32.max - b ? Int32.max : a + b }

    private func checkpoint(_ mode: Int32) -> (rc: Int32, log: Int32, done: Int32) {
        var log: Int32 = -1
        var done: Int32 = -1
        let rc = sqlite3_wal_checkpoint_v2(connection.handle, nil, mode, &log, &done)
        return (rc, log, done)
    }

    /// Ends the checkpoint thread, after the checkpoint it runs (if any); none starts after.
    func stop() {
        condition.lock()
        stopping = true
        condition.broadcast()
        let thread = thread
        condition.unlock()
        if let thread { pthread_join(thread, nil) }
    }

    /// Waits until no checkpoint is due or running, at most `timeout` seconds: whether none is.
    func settle(timeout: Double) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while due != nil || running {
            if !condition.wait(until: deadline) { return due == nil && !running }
        }
        return true
    }

    var figures: (checkpoints: Int, restarts: Int, walFrames: Int32) {
        condition.lock()
        defer { condition.unlock() }
        return (checkpoints, restarts, frames)
    }
}

extension SQLiteConnection {
    /// Checkpoints after this connection's commits by `policy` instead of SQLite's
    /// auto-checkpoint (see ``CheckpointPolicy``), on a connection of their own to the same
    /// database (opened here, so that it is the same file) and a thread of their own.
    ///
    /// - Throws: ``SQLiteError`` when that connection cannot be opened.
    package func checkpoint(by policy: CheckpointPolicy) throws {
        _ = try cached("PRAGMA journal_size_limit = \(policy.fileLimit)").firstRow { $0.int64(0) }
        // An in-memory or temporary database has no WAL and no file to open again.
        guard let name = sqlite3_db_filename(handle, "main"), name.pointee != 0 else { return }
        // The checkpoints' connection keeps SQLite's default synchronous level (FULL): in WAL
        // mode a checkpoint syncs the WAL and the database at NORMAL and FULL alike.
        let own = try SQLiteConnection(
            path: String(cString: name), create: false,
            busyTimeoutMilliseconds: Int32(exactly: (busy.timeout * 1000).rounded()) ?? 5000)
        // A first read opens its WAL: a connection that never read does not know the database
        // is in WAL mode, and its checkpoints would do nothing.
        _ = try own.cached("PRAGMA schema_version").firstRow { $0.int64(0) }
        let checkpointer = Checkpointer(policy, connection: own, writerBusy: busy)
        self.checkpointer = checkpointer
        sqlite3_wal_hook(
            handle,
            { context, db, _, frames in
                guard let context, let db else { return SQLITE_OK }
                Unmanaged<Checkpointer>.fromOpaque(context).takeUnretainedValue().committed(db, walFrames: frames)
                return SQLITE_OK
            }, Unmanaged.passUnretained(checkpointer).toOpaque())
    }

    /// What this connection's policy did: the checkpoints it ran, its tries to restart the WAL,
    /// and the WAL's frames after its last commit.
    package var checkpointFigures: (checkpoints: Int, restarts: Int, walFrames: Int32) {
        checkpointer?.figures ?? (0, 0, 0)
    }

    /// Waits until this connection's policy has no checkpoint due or running, at most `timeout`
    /// seconds: whether it has none (for tests, which look at what the checkpoints did).
    package func checkpointsSettled(timeout: Double = 10) -> Bool {
        checkpointer?.settle(timeout: timeout) ?? true
    }
}
