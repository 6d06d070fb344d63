import Foundation
import SharedStore

/// Where a command writes: JSON lines, or aligned text for people (colour only on a terminal).
public final class Output {
    public let json: Bool
    let colour: Bool

    init(json: Bool) {
        self.json = json
        colour =
            isatty(1) == 1 && ProcessInfo.processInfo.environment["NO_COLOR"] == nil
            && ProcessInfo.processInfo.environment["TERM"] != "dumb"
    }

    /// Lines of a stream, written in blocks (a million lines are not a million writes).
    private var pending: [UInt8] = []

    /// One line on stdout, written at once (after any pending streamed lines).
    public func line(_ text: String) {
        pending.append(contentsOf: text.utf8)
        pending.append(0x0A)
        flush()
    }

    /// One line of a long stream: buffered, written in blocks of 64 KiB and by ``flush()``.
    public func streamed(_ text: String) {
        pending.append(contentsOf: text.utf8)
        pending.append(0x0A)
        if pending.count >= 1 << 16 { flush() }
    }

    /// One JSON line of a long stream, written straight into the buffer.
    public func streamed(json value: JSONValue) {
        value.write(to: &pending)
        pending.append(0x0A)
        if pending.count >= 1 << 16 { flush() }
    }

    /// One JSON object of a long stream, its fields written by `body` straight into the buffer
    /// (nothing of it when `body` throws).
    public func streamedObject(_ body: (inout JSONObjectWriter) throws -> Void) rethrows {
        try JSONObjectWriter.append(to: &pending, body)
        pending.append(0x0A)
        if pending.count >= 1 << 16 { flush() }
    }

    /// Writes what is buffered.
    public func flush() {
        guard !pending.isEmpty else { return }
        Self.writeStandardOutput(pending)
        pending.removeAll(keepingCapacity: true)
    }

    /// Writes `bytes` to standard output whole. A reader that went away (`| head`) ends the
    /// process with one error line and status 1, never with SIGPIPE (ignored: see ``Tool/run(_:)``)
    /// or a trap.
    public static func writeStandardOutput(_ bytes: [UInt8]) {
        // A progress line on the same terminal is cleared first: the output starts on a line
        // of its own (the progress line comes back at its next update).
        Progress.clearLine()
        var done = 0
        while done < bytes.count {
            let n = bytes[done...].withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else {
                let reason =
                    n < 0 && errno == EPIPE ? "the reader went away (broken pipe)" : String(cString: strerror(errno))
                let line = "error: cannot write standard output: \(reason)\n"
                _ = line.utf8CString.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count - 1) }
                exit(1)
            }
            done += n
        }
    }

    /// A table whose rows arrive one at a time (``TableStream``).
    public func tableStream(columns: [(key: String, title: String)]) -> TableStream {
        TableStream(output: self, columns: columns)
    }

    /// A JSON object (with `--json`) or its fields as `key: value` lines.
    public func record(_ value: JSONValue) {
        if json {
            line(value.serialized)
            return
        }
        guard case .object(let pairs) = value else {
            line(value.serialized)
            return
        }
        let width = pairs.map(\.0.count).max() ?? 0
        for (k, v) in pairs {
            line(bold(TextSafety.visible(k).padding(toLength: width, withPad: " ", startingAt: 0)) + "  " + human(v))
        }
    }

    /// Rows as an aligned table for people; as JSON objects with `--json`.
    public func table(_ rows: [JSONValue], columns: [(key: String, title: String)]) {
        if json {
            rows.forEach { line($0.serialized) }
            return
        }
        let stream = tableStream(columns: columns)
        for row in rows { stream.add(row) }
        stream.finish()
    }

    /// The cells of a row for people, fitted to `widths` (a long value ends with "…").
    func formatRow(_ cells: [String], widths: [Int]) -> String {
        func fit(_ s: String, _ w: Int) -> String {
            s.count > w ? String(s.prefix(w - 1)) + "…" : s.padding(toLength: w, withPad: " ", startingAt: 0)
        }
        return zip(cells, widths).map { fit($0.0, $0.1) }.joined(separator: "  ").trimmingCharacters(in: .whitespaces)
    }

    func human(_ v: JSONValue) -> String {
        switch v {
        case .null: return "-"
        // Stored values and arguments: control characters shown escaped, so that data can
        // neither drive the terminal nor break a row (JSON output escapes them itself).
        case .string(let s): return TextSafety.visible(s)
        case .bool(let b): return b ? "yes" : "no"
        case .array(let items): return items.map(human).joined(separator: ", ")
        default: return v.serialized
        }
    }

    func bold(_ s: String) -> String { colour ? "\u{1B}[1m\(s)\u{1B}[0m" : s }
}

/// A progress line on stderr for work that runs longer than a second: what is done (and of how
/// much), the rate, and the time left when the total is known, redrawn in place a few times a
/// second. Only when stderr is a terminal: otherwise (a pipe, a file, a script's log) it shows
/// nothing, and an update costs one test of a Bool.
public final class Progress {
    private let label: String
    private let start = Date()
    private var lastPrint = Date.distantPast
    private var printed = false
    private let tty: Bool
    /// Updates since the clock was last read, and the count then: a caller may update per item
    /// (the clock is read every 64) or per batch (read when 64 more are done).
    private var calls = 0
    private var checkedAt = 0
    /// Whether a progress line of this process is on the terminal now.
    private static let shown = Protected(false)

    public init(_ label: String) {
        self.label = label
        // A dumb terminal cannot clear a line: no progress there either.
        tty = isatty(2) == 1 && ProcessInfo.processInfo.environment["TERM"] != "dumb"
    }

    /// Clears the progress line, if one shows (before output or an error takes the terminal).
    public static func clearLine() {
        let was = shown.withLock { was in
            defer { was = false }
            return was
        }
        if was { FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8)) }
    }

    /// Whether it shows anything (stderr is a terminal): work that only a progress line needs
    /// (counting a total) can be skipped when not.
    public var isShown: Bool { tty }

    /// Reports `done` (of `total`) items: with a total, the share done and the time left.
    public func update(_ done: Int, of total: Int? = nil) {
        guard tty else { return }
        calls += 1
        guard calls >= 64 || done - checkedAt >= 64 || done == total else { return }
        calls = 0
        checkedAt = done
        let now = Date()
        let elapsed = now.timeIntervalSince(start)
        guard elapsed > 1, now.timeIntervalSince(lastPrint) > 0.2 else { return }
        let rate = Double(done) / max(elapsed, 0.001)
        var text = total.map { "\(done)/\($0)" } ?? "\(done)"
        if let total, total > 0 {
            text += String(format: " (%.0f%%)", min(100, Double(done) * 100 / Double(total)))
        }
        text += ", \(Self.rate(rate))/s"
        if let total, rate > 0, done < total { text += ", about \(Self.duration(Double(total - done) / rate)) left" }
        draw(text, now: now, elapsed: elapsed)
    }

    /// Reports progress in the caller's words (`left`: the seconds still to go, when known).
    public func update(text: @autoclosure () -> String, left: Double? = nil) {
        guard tty else { return }
        let now = Date()
        let elapsed = now.timeIntervalSince(start)
        guard elapsed > 1, now.timeIntervalSince(lastPrint) > 0.2 else { return }
        draw(text() + (left.map { ", about \(Self.duration($0)) left" } ?? ""), now: now, elapsed: elapsed)
    }

    private func draw(_ text: String, now: Date, elapsed: Double) {
        lastPrint = now
        printed = true
        Self.shown.withLock { $0 = true }
        let line = "\(label): \(text) (\(Self.duration(elapsed)))"
        FileHandle.standardError.write(Data("\r\u{1B}[2K\(TextSafety.visible(line))".utf8))
    }

    /// Ends the progress line (the line is cleared: what stays is the command's output).
    public func finish() {
        if printed && tty { Self.clearLine() }
    }

    static func rate(_ r: Double) -> String {
        r >= 10_000 ? String(format: "%.0fk", r / 1000) : String(format: r >= 100 ? "%.0f" : "%.1f", r)
    }

    static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite, seconds >= 0 else { return "?" }
        if seconds < 60 { return String(format: "%.1fs", seconds) }
        let s = Int(seconds)
        return s < 3600
            ? "\(s / 60)m\(String(format: "%02d", s % 60))s" : "\(s / 3600)h\(String(format: "%02d", s / 60 % 60))m"
    }
}

/// A table written as its rows arrive: JSON lines at once; for people, the first rows set the
/// column widths (up to 60 characters), then every row streams at those widths.
public final class TableStream {
    private let output: Output
    private let columns: [(key: String, title: String)]
    private var head: [[String]] = []
    private var widths: [Int]?
    /// How many rows size the columns before the rest streams.
    private static let sizingRows = 200

    init(output: Output, columns: [(key: String, title: String)]) {
        self.output = output
        self.columns = columns
    }

    public func add(_ row: JSONValue) {
        if output.json {
            output.streamed(json: row)
            return
        }
        let cells = columns.map { output.human(row[$0.key] ?? .null) }
        if let widths {
            output.streamed(output.formatRow(cells, widths: widths))
            return
        }
        head.append(cells)
        if head.count >= Self.sizingRows { startBody() }
    }

    private func startBody() {
        var w = columns.map(\.title.count)
        for r in head { for (i, c) in r.enumerated() { w[i] = max(w[i], c.count) } }
        let widths = w.map { min($0, 60) }
        self.widths = widths
        output.streamed(output.bold(output.formatRow(columns.map(\.title), widths: widths)))
        for r in head { output.streamed(output.formatRow(r, widths: widths)) }
        head = []
    }

    /// Writes what is left (a table of fewer rows than the sizing count is written here).
    public func finish() {
        if !output.json && widths == nil { startBody() }
        output.flush()
    }
}
