import Foundation
import Observation
import ReadLater
import SharedStore
import SharedStoreSupport
import Testing

extension Tag {
    /// A test that starts other processes (`sharedstore-helper`, the targets, `storectl`): it
    /// needs the executables built beside the test bundle, and it is the slow kind.
    @Tag static var multiProcess: Self
    /// A suite that needs the PostgreSQL server `Scripts/test.sh` starts (`PGHOST`); it is
    /// skipped without one.
    @Tag static var postgres: Self
}

/// The randomized tests' generator, shared by every suite: seeded, so that a failure replays from
/// the seed its message names.
struct TestRandom {
    var state: UInt64

    init(state: UInt64) { self.state = state }

    /// A number in `0..<n` (0 when `n` is not positive).
    mutating func next(_ n: Int) -> Int {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return n > 0 ? Int((state >> 33) % UInt64(n)) : 0
    }

    /// One of `choices` (which must not be empty).
    mutating func pick<T>(_ choices: [T]) -> T { choices[next(choices.count)] }

    /// True with probability `percent` / 100.
    mutating func chance(_ percent: Int) -> Bool { next(100) < percent }

    /// A short word over a small alphabet, so that random values often meet (equal, prefix, order).
    mutating func word(maxLength: Int = 3, letters: [Character] = ["a", "b", "C", "é"]) -> String {
        String((0..<next(maxLength + 1)).map { _ in pick(letters) })
    }

    /// An integer in `range`, or nil about one time in `nilOneIn`.
    mutating func optionalInteger(_ range: ClosedRange<Int>, nilOneIn: Int = 5) -> Int? {
        next(nilOneIn) == 0 ? nil : range.lowerBound + next(range.count)
    }
}

/// A private temporary group directory per test, removed when the test ends.
final class TemporaryGroup {
    let root: String
    let path: String

    init() {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sharedstore-tests-\(UUID().uuidString)")
        root = base.path
        path = base.appendingPathComponent("group").path
    }

    /// Kept at the end (a test that failed keeps what it failed on, to be looked at).
    var keep = false

    /// Removed at the end, unless `SHAREDSTORE_KEEP_GROUPS` is set (to look at a failure) or the
    /// test asked to ``keep`` it.
    deinit {
        if !keep && ProcessInfo.processInfo.environment["SHAREDSTORE_KEEP_GROUPS"] == nil {
            try? FileManager.default.removeItem(atPath: root)
        }
    }

    /// Opens the store as a target does, with the change signal attached (`signal: false`:
    /// without it, as a writer whose signals are lost).
    func open(_ model: Model = ReadLater.model, options: Container.Options = Container.Options(), signal: Bool = true)
        throws -> Container
    {
        let container = try Container(group: path, model: model, options: options)
        if signal { try ChangeSignal.attach(to: container) }
        return container
    }

    var storePath: String { (path as NSString).appendingPathComponent(Container.storeFileName) }
}

/// An entity with one attribute of every type, and a parent/child pair with each delete rule.
enum Fixtures {
    static let allTypes: Model = {
        do {
            return try Model([
                Entity(
                    "Thing",
                    attributes: [
                        Attribute("s", .string, optional: true),
                        Attribute("i", .integer, optional: true),
                        Attribute("d", .double, optional: true),
                        Attribute("b", .bool, default: true),
                        Attribute("t", .date, optional: true),
                        Attribute("bin", .data, optional: true),
                        Attribute("u", .uuid, optional: true),
                        Attribute("code", .string, optional: true, minLength: 2, maxLength: 4, pattern: "[A-Z]+"),
                        Attribute("score", .integer, optional: true, minValue: 0, maxValue: 10),
                    ]),
                Entity(
                    "Folder", attributes: [Attribute("name", .string)],
                    relationships: [
                        .toMany("notes", "Note", inverse: "folder", deleteRule: .cascade),
                        .toMany("pins", "Pin", inverse: "folder", deleteRule: .deny),
                    ]),
                Entity(
                    "Note", attributes: [Attribute("text", .string, preservedInHistory: true)],
                    relationships: [.toOne("folder", "Folder", inverse: "notes", deleteRule: .nullify)]),
                Entity(
                    "Pin", attributes: [Attribute("x", .integer)],
                    relationships: [.toOne("folder", "Folder", inverse: "pins", deleteRule: .nullify)]),
                Entity(
                    "Seat", attributes: [Attribute("row", .string), Attribute("number", .integer)],
                    uniquenessConstraints: [["row", "number"]]),
                Entity(
                    "Tag", attributes: [Attribute("name", .string), Attribute("color", .string, optional: true)],
                    relationships: [.toMany("cards", "Card", inverse: "tag")], uniquenessConstraints: [["name"]]),
                Entity(
                    "Card", attributes: [Attribute("title", .string), Attribute("done", .bool, default: false)],
                    relationships: [.toOne("tag", "Tag", inverse: "cards")]),
                // Many-to-many, with each delete rule.
                Entity(
                    "Post", attributes: [Attribute("title", .string)],
                    relationships: [.toMany("topics", "Topic", inverse: "posts", deleteRule: .nullify)]),
                Entity(
                    "Topic", attributes: [Attribute("name", .string)],
                    relationships: [.toMany("posts", "Post", inverse: "topics", deleteRule: .deny)]),
                Entity(
                    "Shelf", attributes: [Attribute("name", .string)],
                    relationships: [.toMany("books", "Book", inverse: "shelves", deleteRule: .cascade)]),
                Entity(
                    "Book", attributes: [Attribute("title", .string)],
                    relationships: [.toMany("shelves", "Shelf", inverse: "books", deleteRule: .nullify)]),
            ])
        } catch {
            preconditionFailure("fixture model: \(error)")
        }
    }()

    static func article(_ title: String, _ n: Int = 0) -> ReadLater.Article {
        ReadLater.Article(title: title, url: "https://example.com/\(n)")
    }

    /// Saves `count` articles, one save each; returns their tokens.
    @discardableResult
    static func saveArticles(_ context: ObjectContext, count: Int) throws -> [HistoryToken] {
        try (0..<count).map { i in
            try context.insert(article("\(i)", i))
            guard let token = try context.save().token else { throw StoreError(.storage, "a save recorded no history") }
            return token
        }
    }
}

/// A real child process running one of this package's executables, with its stdout read line by
/// line as it arrives, so that a test can wait for an event with a deadline.
final class Child: @unchecked Sendable {
    static var directory: URL {
        // Tests run from .build/<config>/; the executables sit beside the test bundle.
        var url = Bundle.main.bundleURL
        if url.pathExtension == "xctest" { url.deleteLastPathComponent() }
        return url
    }

    let process = Process()
    private let condition = NSCondition()
    private var buffer = Data()
    private var received: [String] = []
    /// The process exited, and its output was read to the end (or its pipe stayed open, held
    /// by a process it started, for 5 s after it exited).
    private var ended: Bool { exited && (outputClosed || Date() > exitTime.addingTimeInterval(5)) }
    private var exited = false
    private var exitTime = Date.distantFuture
    private var outputClosed = false

    init(
        _ name: String, _ arguments: [String], environment: [String: String] = [:], directory: String? = nil
    ) throws {
        process.executableURL = Self.directory.appendingPathComponent(name)
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.standardError
        // One thread reads the output to its end, in order: a reader and the termination
        // handler both reading the pipe raced, and an exit could be announced before the last
        // lines were appended (a test then saw a list with rows missing, under load).
        let reading = out.fileHandleForReading
        let reader = Thread { [weak self] in
            while true {
                let data = reading.availableData
                if data.isEmpty { break }
                self?.append(data)
            }
            self?.mark { $0.outputClosed = true }
        }
        process.terminationHandler = { [weak self] _ in
            self?.mark {
                $0.exited = true
                $0.exitTime = Date()
            }
        }
        try process.run()
        reader.start()
    }

    private func mark(_ change: (Child) -> Void) {
        condition.lock()
        change(self)
        condition.broadcast()
        condition.unlock()
    }

    private func append(_ data: Data) {
        guard !data.isEmpty else { return }
        condition.lock()
        buffer.append(data)
        while let nl = buffer.firstIndex(of: 10) {
            received.append(String(decoding: buffer[buffer.startIndex..<nl], as: UTF8.self))
            buffer.removeSubrange(buffer.startIndex...nl)
        }
        condition.broadcast()
        condition.unlock()
    }

    var lines: [String] {
        condition.lock()
        defer { condition.unlock() }
        return received
    }

    struct Timeout: Error, CustomStringConvertible {
        let what: String
        var description: String { "timed out waiting for \(what)" }
    }

    /// Waits until a line satisfies `predicate`; returns it.
    @discardableResult
    func waitForLine(timeout: TimeInterval = 30, _ what: String = "a line", where predicate: (String) -> Bool) throws
        -> String
    {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let line = received.first(where: predicate) { return line }
            if ended || !condition.wait(until: deadline) {
                if let line = received.first(where: predicate) { return line }
                throw Timeout(what: what)
            }
        }
    }

    /// Waits until `count` lines have arrived.
    func waitForLines(_ count: Int, timeout: TimeInterval = 30) throws {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while received.count < count {
            if ended || !condition.wait(until: deadline) {
                if received.count >= count { return }
                throw Timeout(what: "\(count) lines (got \(received.count))")
            }
        }
    }

    /// Waits for the process to end; returns its exit status.
    @discardableResult
    /// The child's exit status, once it exited and closed its output; at the deadline, it is
    /// sent SIGTERM (unless `terminating` is false: to look at it as it is) and this throws.
    func waitForExit(timeout: TimeInterval = 60, terminating: Bool = true) throws -> Int32 {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        while !ended {
            // After the exit, wake in time to stop waiting for a pipe a grandchild holds open.
            let until = exited ? min(deadline, exitTime.addingTimeInterval(5.1)) : deadline
            if !condition.wait(until: until), Date() >= deadline {
                let last = received.suffix(3)
                condition.unlock()
                if terminating { process.terminate() }
                let name = process.executableURL?.lastPathComponent ?? "?"
                let arguments = (process.arguments ?? []).prefix(4).joined(separator: " ")
                throw Timeout(what: "exit of \(name) \(arguments) (last lines: \(last))")
            }
        }
        condition.unlock()
        process.waitUntilExit()
        return process.terminationStatus
    }

    func kill9() {
        kill(process.processIdentifier, SIGKILL)
    }

    /// The child's process id.
    var pid: Int32 { process.processIdentifier }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

/// Parses a JSON line of a child.
/// Starts every (executable, arguments) at once, then expects each to exit 0 (processes writing
/// one store at the same moment).
func runAtOnce(_ commands: [(String, [String])], sourceLocation: SourceLocation = #_sourceLocation) throws {
    let children = try commands.map { try Child($0.0, $0.1) }
    for child in children { #expect(try child.waitForExit() == 0, sourceLocation: sourceLocation) }
}

func json(_ line: String) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] ?? [:]
}

/// The integer part of a printed token.
func tokenValue(_ text: String?) -> Int64 {
    Int64(text?.split(separator: ".").first ?? "") ?? -1
}

func expectStoreError(
    _ code: StoreError.Code, containing text: String? = nil, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> Void
) {
    do {
        try body()
        Issue.record("expected StoreError .\(code), nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as StoreError {
        #expect(error.code == code, "got .\(error.code): \(error.message)", sourceLocation: sourceLocation)
        if let text {
            #expect(
                error.message.contains(text), "the message does not say '\(text)': \(error.message)",
                sourceLocation: sourceLocation)
        }
    } catch {
        Issue.record("expected StoreError .\(code), got \(error)", sourceLocation: sourceLocation)
    }
}

/// Waits until `condition` holds, woken by Observation whenever something it reads changes (the
/// way a view waits), never by polling; the test's time limit is the deadline. The condition
/// is read inside the tracking, so a change between two reads is never missed.
@MainActor func waitObserving(_ condition: @escaping @MainActor () -> Bool) async {
    while true {
        let done: Bool = await withCheckedContinuation { continuation in
            let once = ResumeOnce(continuation)
            let holds = withObservationTracking {
                condition()
            } onChange: {
                once.resume(false)
            }
            if holds { once.resume(true) }
        }
        if done { return }
    }
}

/// Resumes a continuation once, whichever of two callers comes first.
final class ResumeOnce: Sendable {
    private let continuation: CheckedContinuation<Bool, Never>
    private let done = Protected(false)
    init(_ continuation: CheckedContinuation<Bool, Never>) { self.continuation = continuation }
    func resume(_ value: Bool) {
        let first = done.withLock { done in
            defer { done = true }
            return !done
        }
        if first { continuation.resume(returning: value) }
    }
}
