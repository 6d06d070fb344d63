import Foundation
import ReadLater
import SharedStore
import SharedStoreSupport
import Testing

/// A watcher or a mirror follower asked to stop (SIGTERM) stops, however soon after its start the
/// signal comes: it ends its loop (exit 0), or, before it could catch the signal, dies by it.
/// Never does it run on. Signal sources of libdispatch were installed on another thread after
/// they were made; a signal in that window was dropped, and the mirror's randomized test saw
/// followers that did not stop (about one in three 15-second runs with a restore).
@Suite struct TerminationSignalTests {
    @Test(.tags(.multiProcess)) func aProcessAskedToStopRightAfterItStartedStops() throws {
        let group = TemporaryGroup()
        _ = try group.open(ReadLater.model)
        let seed = UInt64.random(in: 0...UInt64(UInt32.max))
        print("TerminationSignalTests: seed \(seed)")
        var random = SeededRandom(seed: seed)
        for i in 0..<40 {
            let (tool, arguments) =
                i % 2 == 0
                ? ("main-app", ["watch", "--group", group.path])
                // A server that is not there: the follower waits between retries.
                : ("storectl", ["mirror", "--follow", "--group", group.path, "--postgres", "host=/nonexistent"])
            let child = try Child(tool, arguments)
            // From at once to well after the process is up.
            usleep(UInt32(random.below(60_000)))
            kill(child.pid, SIGTERM)
            let status = try child.waitForExit(timeout: 30)
            #expect(
                status == 0 || (status == SIGTERM && child.process.terminationReason == .uncaughtSignal),
                "seed \(seed): \(tool) ended with \(status) (\(child.lines.suffix(2)))")
        }
    }
}
