import Foundation
import ReadLater
import SharedStore
import Testing

/// Real processes writing one store at once.
@Suite struct MultiProcessTests {
    /// Every target started at the same moment on a group nobody opened yet: one of them makes
    /// the store, the others find it made or in the making, and none fails. (storectl read the
    /// store's model version from a file another process had just created, empty: "no such
    /// table: ss_meta".) storectl's `stats` and `tokens` only look: they make no store, so they
    /// either read the one made or say there is none yet, and never fail otherwise.
    @Test(.tags(.multiProcess)) func targetsStartedAtOnceOnANewGroupAllSucceed() throws {
        for round in 0..<6 {
            let group = TemporaryGroup()
            let g = ["--group", group.path, "--json"]
            let lookers = [["stats"], ["tokens"]].map { Looker("storectl", $0 + g) }
            try runAtOnce(
                (0..<3).map { k in
                    ("share-extension", ["share", "--url", "https://\(round).example/\(k)", "--title", "\(k)"] + g)
                } + [("widget", ["show"] + g), ("main-app", ["list"] + g)])
            for looker in lookers {
                let (status, error) = looker.finish()
                #expect(status == 0 || status == 1 && error.contains("no store"), "\(looker.arguments): \(error)")
            }
        }
        // Looking makes nothing: no store, no registry.
        let empty = TemporaryGroup()
        let stats = Looker("storectl", ["stats", "--group", empty.path])
        let (status, error) = stats.finish()
        #expect(status == 1 && error.contains("no store in"), "\(error)")
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: empty.path)) ?? []).isEmpty)
    }

    @Test(.tags(.multiProcess)) func twoProcessesWritingAtOnceLeaveEverySaveOnceInCommitOrder() throws {
        let group = TemporaryGroup()
        let container = try group.open()  // create the store first so both writers find it
        let start = try container.currentToken()
        let count = 150
        let writers = try ["Left", "Right"].map { author in
            try Child(
                "sharedstore-helper", ["write", "--group", group.path, "--author", author, "--count", "\(count)"])
        }
        for writer in writers { #expect(try writer.waitForExit() == 0) }
        let history = try container.fetchHistory(HistoryRequest(after: start))
        #expect(history.count == 2 * count)
        #expect(history.map(\.token.value) == Array((start.value + 1)...(start.value + Int64(2 * count))))
        for author in ["Left", "Right"] {
            let mine = history.filter { $0.author == author }
            #expect(mine.count == count)
            #expect(Set(mine.map(\.processID)).count == 1)
            #expect(mine.allSatisfy { $0.executable == "sharedstore-helper" })
            // Each writer's saves appear in the order it made them.
            let titles = try mine.map { t in
                try container.newContext().object(with: t.changes[0].objectID)["title"].stringValue ?? ""
            }
            #expect(titles == (0..<count).map { "\(author)-\($0)" })
        }
        #expect(try container.newContext().count(FetchRequest("Article")) == 2 * count)
    }
}

/// A process whose standard error is kept (its output is dropped): a command expected to fail
/// with a message, or to succeed.
final class Looker {
    let arguments: [String]
    private let process = Process()
    private let error = Pipe()
    private var started = true

    init(_ name: String, _ arguments: [String], environment: [String: String] = [:]) {
        self.arguments = arguments
        process.executableURL = Child.directory.appendingPathComponent(name)
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = error
        do { try process.run() } catch { started = false }
    }

    /// Its exit status and standard error, once it ended (-1 when it could not start).
    func finish() -> (Int32, String) {
        guard started else { return (-1, "could not start") }
        let data = error.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
