import Foundation
import ReadLater
import SharedStore
import Testing

/// Issue 23, point 7: `SHAREDSTORE_SQL_DEBUG=1` prints each statement a process runs, with its
/// time, and its plan when it scans; without it nothing is printed.
@Suite(.tags(.multiProcess)) struct DebugSwitchTests {
    /// Runs target `name` with `arguments` and `environment`; returns its exit status and what it
    /// wrote to standard error.
    func run(_ name: String, _ arguments: [String], _ environment: [String: String]) throws -> (Int32, [String]) {
        let process = Process()
        process.executableURL = Child.directory.appendingPathComponent(name)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        // Read to the end first: the pipe would fill and stall the process otherwise.
        let data = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (
            process.terminationStatus, String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
        )
    }

    @Test func theSQLDebugSwitchPrintsStatementsTimesAndScans() throws {
        let group = TemporaryGroup()
        let env = ["SHAREDSTORE_GROUP": group.path]
        #expect(try run("main-app", ["add", "--title", "Hello", "--url", "https://a.example"], env).0 == 0)
        let (status, quiet) = try run("main-app", ["list", "--search", "hel"], env)
        #expect(status == 0 && !quiet.contains { $0.hasPrefix("sharedstore-sql:") }, "off: nothing printed")
        var on = env
        on["SHAREDSTORE_SQL_DEBUG"] = "1"
        let (again, lines) = try run("main-app", ["list", "--search", "hel"], on)
        #expect(again == 0)
        // Each statement with its time in milliseconds.
        let fetch = try #require(
            lines.firstIndex { $0.hasPrefix("sharedstore-sql: ") && $0.contains(#"FROM "Article""#) },
            "\(lines.prefix(20))")
        let words = lines[fetch].split(separator: " ")
        #expect(words.count > 3 && Double(words[1]) != nil && words[2] == "ms", "\(lines[fetch])")
        // A text search reads every article: its plan follows it.
        #expect(
            fetch + 1 < lines.count && lines[fetch + 1].hasPrefix("sharedstore-sql:   scan")
                && lines[fetch + 1].contains("SCAN"), "\(lines[fetch...].prefix(2))")
        // The plans the log asks for are not shown as statements of the process.
        #expect(!lines.contains { $0.contains("EXPLAIN QUERY PLAN") })
    }
}

extension DebugSwitchTests {
    /// `SHAREDSTORE_CONCURRENCY_DEBUG=1` stops a process that uses a context from another thread,
    /// naming the context and the call; without it the same process runs on.
    @Test func theConcurrencyDebugSwitchStopsAContextUsedFromAnotherThread() throws {
        let group = TemporaryGroup()
        _ = try group.open()
        let (status, _) = try run("sharedstore-helper", ["cross-thread", "--group", group.path], [:])
        #expect(status == 0, "off: the misuse goes unnoticed, as without the switch")
        let (stopped, lines) = try run(
            "sharedstore-helper", ["cross-thread", "--group", group.path], ["SHAREDSTORE_CONCURRENCY_DEBUG": "1"])
        #expect(stopped != 0)
        #expect(
            lines.contains {
                $0.hasPrefix("SHAREDSTORE_CONCURRENCY_DEBUG: context crossing used in count(_:)")
                    && $0.contains("belongs to thread")
            }, "\(lines.prefix(5))")
    }
}
