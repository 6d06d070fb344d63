import Foundation
import ReadLater
import SharedStore
import SharedStoreSQLite
import Testing

/// When writers checkpoint the WAL (``CheckpointPolicy``): with several processes writing at
/// once the WAL keeps restarting instead of growing without end (SQLite's auto-checkpoint then
/// checkpointed, with two fsyncs, on nearly every commit), and a reader holding an old snapshot
/// does not make every commit wait to restart it.
@Suite struct CheckpointTests {
    /// A writer with a small policy (a checkpoint every `every` frames, a restart at `restart`)
    /// on a new WAL store, and a table of rows that each take a page or two.
    func store(_ group: TemporaryGroup, every: Int32, restart: Int32) throws
        -> (SQLiteConnection, String, CheckpointPolicy)
    {
        var policy = CheckpointPolicy()
        policy.everyFrames = every
        policy.restartFrames = restart
        try FileManager.default.createDirectory(atPath: group.path, withIntermediateDirectories: true)
        let path = group.path + "/t.sqlite"
        let w = try SQLiteConnection(path: path, busyTimeoutMilliseconds: 5000)
        try w.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL")
        try w.checkpoint(by: policy)
        try w.execute("CREATE TABLE t(x BLOB)")
        return (w, path, policy)
    }

    /// One commit of a row of a page or so: the WAL's frames after it.
    func insertRow(_ w: SQLiteConnection) throws -> Int32 {
        try w.execute("INSERT INTO t VALUES (randomblob(3000))")
        return w.checkpointFigures.walFrames
    }

    @Test func aReaderOnAnOldSnapshotHoldsTheWALButDoesNotMakeEveryCommitTryToRestartIt() throws {
        let group = TemporaryGroup()
        let (w, path, policy) = try store(group, every: 50, restart: 200)
        let reader = try SQLiteConnection(path: path, busyTimeoutMilliseconds: 5000)
        try reader.execute("SELECT count(*) FROM t")
        try reader.beginPinnedRead()
        var highest: Int32 = 0
        for _ in 0..<600 {
            let frames = try insertRow(w)
            #expect(frames >= highest, "the WAL restarted under a reader that reads it")
            highest = frames
        }
        let held = w.checkpointFigures
        #expect(held.walFrames > 4 * policy.restartFrames)
        // One try to restart per restartFrames of growth, and one checkpoint per everyFrames,
        // not one per commit.
        #expect(held.restarts >= 1)
        #expect(held.restarts <= Int(held.walFrames / policy.restartFrames) + 1, "\(held)")
        #expect(held.checkpoints <= 2 * Int(held.walFrames / policy.everyFrames) + 2, "\(held)")
        reader.endRead()
        // Once the reader is gone, the WAL restarts within a few commits.
        var restarted = false
        for _ in 0..<(2 * Int(policy.restartFrames)) where !restarted {
            restarted = try insertRow(w) < highest
        }
        #expect(restarted, "\(w.checkpointFigures)")
    }

    @Test func aSingleWriterCheckpointsAsOftenAsSQLiteWouldAndNeverNeedsARestart() throws {
        let group = TemporaryGroup()
        let (w, _, policy) = try store(group, every: 100, restart: 400)
        var most: Int32 = 0
        for _ in 0..<1000 { most = max(most, try insertRow(w)) }
        let figures = w.checkpointFigures
        #expect(figures.restarts == 0, "\(figures)")
        #expect(figures.checkpoints >= 5, "\(figures)")
        // Each checkpoint leaves nothing to copy, so the next commit starts the WAL over.
        #expect(most < 2 * policy.everyFrames, "\(figures), at most \(most) frames")
    }

    /// A batch that leaves a large WAL file: once the WAL starts over, the next commit cuts the
    /// file back to the limit (it kept its largest size until the last connection closed).
    @Test func theWALFileIsCutBackAfterALargeBatch() throws {
        let group = TemporaryGroup()
        let container = try group.open()
        let title = String(repeating: "a long title ", count: 30)
        let rows: [[String: Value]] = (0..<40_000).map { i in
            ["title": .string("\(i) \(title)"), "url": .string("https://example.com/\(i)")]
        }
        _ = try container.newContext(author: "Batch").batchInsert("Article", rows)
        let wal = group.storePath + "-wal"
        func size() throws -> Int {
            ((try FileManager.default.attributesOfItem(atPath: wal))[.size] as? NSNumber)?.intValue ?? 0
        }
        let limit = Int(CheckpointPolicy().fileLimit)
        #expect(try size() > limit, "the batch should leave a WAL over the limit")
        let context = container.newContext(author: "App")
        for i in 0..<50 where try size() > limit {
            try context.insert(ReadLater.Article(title: "after \(i)", url: "https://example.org/\(i)"))
            try context.save()
        }
        #expect(try size() <= limit)
    }

    /// Real processes saving at once: the WAL file never grows far past the restart mark
    /// (before, it reached over 100 MiB in such a run, every frame of every save kept). Its size
    /// is watched while they save: a restart cuts the file back, so its size at the end says
    /// nothing of its largest.
    @Test(.tags(.multiProcess)) func writerProcessesSavingAtOnceKeepTheWALBounded() throws {
        let group = TemporaryGroup()
        // Held open through the run, so that the last writer to close does not remove the WAL.
        let container = try group.open()
        let count = 1500
        let writers = try ["A", "B", "C"].map { author in
            try Child(
                "sharedstore-helper", ["write", "--group", group.path, "--author", author, "--count", "\(count)"])
        }
        // A thread samples the WAL file's size until the writers have ended (each waited for
        // below, with its deadline).
        let sampler = WALSampler(group.storePath + "-wal")
        for writer in writers { #expect(try writer.waitForExit() == 0) }
        let largest = sampler.stop()
        #expect(try container.newContext().count(FetchRequest("Article")) == 3 * count)
        let frame = 4096 + 24
        let bound = 3 * Int(CheckpointPolicy().restartFrames) * frame
        #expect(largest > 0)
        #expect(largest <= bound, "the WAL reached \(largest / frame) frames")
    }
}

/// The largest size a file reached, sampled every 0.2 ms on a thread of its own until ``stop()``.
final class WALSampler: @unchecked Sendable {
    private let condition = NSCondition()
    private var stopped = false, finished = false, largest = 0

    init(_ path: String) {
        Thread { [self] in
            while !condition.withLock({ stopped }) {
                let size = ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue
                condition.withLock { largest = max(largest, size ?? 0) }
                usleep(200)
            }
            condition.withLock {
                finished = true
                condition.broadcast()
            }
        }.start()
    }

    /// Stops sampling; the largest size seen.
    func stop() -> Int {
        condition.withLock {
            stopped = true
            while !finished { condition.wait() }
            return largest
        }
    }
}
