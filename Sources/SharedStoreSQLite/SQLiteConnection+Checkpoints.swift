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
/// writer starts it over. First a passive checkpoint copies the frames back without holding
/// anyone up. Then, when it was quick (within `restartWait`: a long one, after a large commit or
/// on a slow disk, leaves the restart to a try `everyFrames / 4` frames later, so that the frames
/// others committed meanwhile are not copied with the write lock held) and left at most
/// `everyFrames` uncopied for readers of older snapshots, a restarting checkpoint takes the write
/// lock, copies what was committed since, and waits for those readers: both waits together about
/// `restartWait` at most. When readers or
/// other writers still defeat it (a pin, a long fetch, a catch-up, a reader that holds its
/// snapshot through the wait), the policy tries again once the WAL has grown by `restartFrames`
/// more, not at every commit. A writer alone with no reader never needs it: its own checkpoints
/// leave nothing to copy when it next writes, and the WAL starts over then.
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

    package init() {}
}

/// The state of a connection's checkpoint policy, read and written by its WAL hook only (which
/// SQLite calls on the connection's thread, after a commit).
final class CheckpointState {
    let policy: CheckpointPolicy
    let busy: BusyWait
    /// The WAL's frames after this connection's last commit. A smaller count at a commit means
    /// the WAL restarted since; a connection that commits rarely may miss a restart (the WAL grew
    /// back past its count meanwhile): it then checkpoints or restarts later than it could,
    /// while the writers that commit often do it.
    var frames: Int32 = 0
    /// The WAL's frames when this connection last checkpointed.
    var checkpointedAt: Int32 = 0
    /// The WAL's frames at which the next restart is tried: after a try that readers or other
    /// writers defeated, not before the WAL grew by `restartFrames` more, so that a long reader
    /// does not make every commit wait.
    var restartAt: Int32
    /// Checkpoints this connection ran, and its tries to restart the WAL (for tests).
    var checkpoints = 0, restarts = 0

    init(_ policy: CheckpointPolicy, busy: BusyWait) {
        self.policy = policy
        self.busy = busy
        restartAt = policy.restartFrames
    }

    /// After a commit that left `walFrames` frames in the WAL of `db`. A checkpoint that fails
    /// (busy, an I/O error) leaves the WAL as it was; the commit stands either way.
    func committed(_ db: OpaquePointer, walFrames: Int32) {
        if walFrames < frames {
            checkpointedAt = 0
            restartAt = policy.restartFrames
        }
        frames = walFrames
        if walFrames >= restartAt {
            restart(db, walFrames: walFrames)
        } else if walFrames - min(checkpointedAt, walFrames) >= policy.everyFrames {
            _ = checkpoint(db, SQLITE_CHECKPOINT_PASSIVE)
            checkpointedAt = walFrames
        }
    }

    /// A passive checkpoint, then a restarting one if the first was quick and left little.
    private func restart(_ db: OpaquePointer, walFrames: Int32) {
        checkpointedAt = walFrames
        let start = Monotonic.seconds()
        let (_, log, done) = checkpoint(db, SQLITE_CHECKPOINT_PASSIVE)
        // log -1: nothing was done (another connection holds the checkpoint lock, or an error).
        // A long copy (a large commit, a slow disk): the restart would copy under the write lock
        // what others committed meanwhile. Either way, try again soon, but not at every commit
        // (on a disk whose fsyncs outlast the wait, every commit would copy with two of them).
        guard log >= 0, Monotonic.seconds() - start <= policy.restartWait else {
            restartAt = Self.adding(walFrames, max(1, policy.everyFrames / 4))
            return
        }
        restarts += 1
        // Readers of older snapshots hold more than a restart should copy under the lock.
        var defeated = log - done > policy.everyFrames
        if !defeated {
            // A bounded wait: this runs in a save, and holds the write lock while it waits.
            busy.cap = policy.restartWait
            defer { busy.cap = nil }
            let (rc, log, _) = checkpoint(db, SQLITE_CHECKPOINT_RESTART)
            defeated = rc != SQLITE_OK && log >= 0
        }
        if defeated { restartAt = Self.adding(walFrames, policy.restartFrames) }
    }

    /// `a + b` for frame counts (b positive), at most `Int32.max`.
    private static func adding(_ a: Int32, _ b: Int32) -> Int32 { a > Int32.max - b ? Int32.max : a + b }

    private func checkpoint(_ db: OpaquePointer, _ mode: Int32) -> (rc: Int32, log: Int32, done: Int32) {
        checkpoints += 1
        var log: Int32 = -1
        var done: Int32 = -1
        let rc = sqlite3_wal_checkpoint_v2(db, nil, mode, &log, &done)
        return (rc, log, done)
    }
}

extension SQLiteConnection {
    /// Checkpoints after this connection's commits by `policy` instead of SQLite's
    /// auto-checkpoint (see ``CheckpointPolicy``).
    package func checkpoint(by policy: CheckpointPolicy) throws {
        _ = try cached("PRAGMA journal_size_limit = \(policy.fileLimit)").firstRow { $0.int64(0) }
        let state = CheckpointState(policy, busy: busy)
        checkpointState = state
        sqlite3_wal_hook(
            handle,
            { context, db, _, frames in
                guard let context, let db else { return SQLITE_OK }
                Unmanaged<CheckpointState>.fromOpaque(context).takeUnretainedValue().committed(db, walFrames: frames)
                return SQLITE_OK
            }, Unmanaged.passUnretained(state).toOpaque())
    }

    /// What this connection's policy did: the checkpoints it ran, its tries to restart the WAL,
    /// and the WAL's frames after its last commit.
    package var checkpointFigures: (checkpoints: Int, restarts: Int, walFrames: Int32) {
        (checkpointState?.checkpoints ?? 0, checkpointState?.restarts ?? 0, checkpointState?.frames ?? 0)
    }
}
