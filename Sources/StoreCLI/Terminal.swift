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

    /// One line on stdout, written at once.
    public func line(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
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
        let cells = rows.map { row in columns.map { human(row[$0.key] ?? .null) } }
        var widths = columns.map(\.title.count)
        for r in cells { for (i, c) in r.enumerated() { widths[i] = max(widths[i], c.count) } }
        widths = widths.map { min($0, 60) }
        func fit(_ s: String, _ w: Int) -> String {
            s.count > w ? String(s.prefix(w - 1)) + "…" : s.padding(toLength: w, withPad: " ", startingAt: 0)
        }
        line(
            bold(
                zip(columns, widths).map { fit($0.0.title, $0.1) }.joined(separator: "  ").trimmingCharacters(
                    in: .whitespaces)))
        for r in cells {
            line(zip(r, widths).map { fit($0.0, $0.1) }.joined(separator: "  ").trimmingCharacters(in: .whitespaces))
        }
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

/// A progress line on stderr for work that runs longer than a second.
public final class Progress {
    private let label: String
    private let start = Date()
    private var lastPrint = Date.distantPast
    private var printed = false
    private let tty = isatty(2) == 1

    public init(_ label: String) { self.label = label }

    /// Reports `done` (of `total`) items; prints only after the first second, a few times a second.
    public func update(_ done: Int, of total: Int? = nil) {
        let amount = total.map { "\(done)/\($0)" } ?? "\(done)"
        update(text: amount)
    }

    /// Reports progress in the caller's words.
    public func update(text: @autoclosure () -> String) {
        let now = Date()
        guard now.timeIntervalSince(start) > 1, now.timeIntervalSince(lastPrint) > (tty ? 0.2 : 1) else { return }
        lastPrint = now
        printed = true
        let elapsed = String(format: "%.1fs", now.timeIntervalSince(start))
        let text = "\(label): \(text()) (\(elapsed))"
        FileHandle.standardError.write(Data((tty ? "\r\u{1B}[2K\(text)" : "\(text)\n").utf8))
    }

    /// Ends the progress line.
    public func finish() {
        if printed && tty { FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8)) }
    }
}
