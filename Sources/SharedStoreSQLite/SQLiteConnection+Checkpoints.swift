import CSQLite
import Foundation

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
/// This policy checkpoints as often as SQLite's (`everyFrames` frames after its last
/// checkpoint, not after every commit above the mark) and, when the WAL has not restarted by
/// `restartFrames` frames, runs a restarting checkpoint: it waits for the write lock and for
/// readers of the WAL for at most `restartWait` seconds, so that the next writer starts the WAL
/// over (else it copies what it can, as a passive one does, and tries again when the WAL has
/// grown by `restartFrames` more). A single writer never needs one: its own checkpoints leave nothing to copy when it
/// next writes.
package struct CheckpointPolicy: Sendable {
    /// Frames written since this connection's last checkpoint that call for the next one.
    package var everyFrames: Int32 = 1000
    /// WAL frames at which it is restarted (about 16 MiB of 4 KiB pages).
    package var restartFrames: Int32 = 4000
    /// The longest a restarting checkpoint waits for other writers and readers.
    package var restartWait: Double = 0.005

    package init() {}
}

/// The state of a connection's checkpoint policy, read and written by its WAL hook only (which
/// SQLite calls on the connection's thread, after a commit).
final class CheckpointState {
    let policy: CheckpointPolicy
    let busy: BusyWait
    /// The WAL's frames when this connection last checkpointed or committed; a smaller count at
    /// a commit means the WAL restarted since.
    var frames: Int32 = 0
    /// The frames copied back as of this connection's last checkpoint.
    var copied: Int32 = 0
    /// The WAL's frames at which the next restarting checkpoint runs: after one that could not
    /// restart (a reader holds an old snapshot), not before the WAL grew by as much again, so
    /// that a long reader does not make every commit wait.
    var restartAt: Int32
    /// Checkpoints this connection ran, and restarting ones among them (for tests).
    var checkpoints = 0, restarts = 0

    init(_ policy: CheckpointPolicy, busy: BusyWait) {
        self.policy = policy
        self.busy = busy
        restartAt = policy.restartFrames
    }

    /// After a commit that left `walFrames` frames in the WAL of `db`.
    func committed(_ db: OpaquePointer, walFrames: Int32) {
        if walFrames < frames {
            // The WAL restarted since this connection's last commit.
            copied = 0
            restartAt = policy.restartFrames
        }
        frames = walFrames
        var log: Int32 = 0
        var done: Int32 = 0
        if walFrames >= restartAt {
            // A bounded wait: this runs in a save, and holds the write lock while it waits.
            busy.cap = policy.restartWait
            defer { busy.cap = nil }
            restarts += 1
            checkpoints += 1
            let rc = sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_RESTART, &log, &done)
            if rc != SQLITE_OK {
                restartAt = walFrames > Int32.max - policy.restartFrames ? Int32.max : walFrames + policy.restartFrames
            }
        } else if walFrames - copied >= policy.everyFrames {
            checkpoints += 1
            _ = sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_PASSIVE, &log, &done)
        } else {
            return
        }
        // A failed checkpoint (busy, an I/O error) leaves the WAL as it was: the commit stands,
        // and the next commit tries again. -1 when nothing was done.
        if done >= 0 { copied = done }
    }
}

extension SQLiteConnection {
    /// Checkpoints after this connection's commits by `policy` instead of SQLite's
    /// auto-checkpoint (see ``CheckpointPolicy``).
    package func checkpoint(by policy: CheckpointPolicy) {
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

    /// What this connection's policy did: the checkpoints it ran, the restarting ones among
    /// them, and the WAL's frames after its last commit.
    package var checkpointFigures: (checkpoints: Int, restarts: Int, walFrames: Int32) {
        (checkpointState?.checkpoints ?? 0, checkpointState?.restarts ?? 0, checkpointState?.frames ?? 0)
    }
}
