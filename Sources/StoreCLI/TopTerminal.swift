import Foundation
import SharedStore

/// The terminal in raw mode for `storectl top` (keys arrive as typed, nothing echoes, Ctrl-C is
/// a key), on the alternate screen with the cursor hidden; ``restore()`` puts all of it back.
final class RawTerminal {
    private var saved = termios()
    private var active = false

    /// Enters raw mode and the alternate screen; throws when stdin or stdout is not a terminal.
    init() throws {
        guard isatty(0) == 1, isatty(1) == 1 else {
            throw UsageError("storectl top needs a terminal; use --json for one JSON line per interval")
        }
        guard tcgetattr(0, &saved) == 0 else {
            throw StoreError(.storage, "cannot read the terminal's settings: \(String(cString: strerror(errno)))")
        }
        var raw = saved
        raw.c_lflag &= ~tcflag_t(ICANON | ECHO | ISIG)
        guard tcsetattr(0, TCSANOW, &raw) == 0 else {
            throw StoreError(.storage, "cannot set the terminal's mode: \(String(cString: strerror(errno)))")
        }
        active = true
        write("\u{1B}[?1049h\u{1B}[?25l")
    }

    /// The terminal's size (columns, rows), 80 × 24 when it does not say.
    var size: (width: Int, height: Int) {
        var w = winsize()
        guard ioctl(1, UInt(TIOCGWINSZ), &w) == 0, w.ws_col > 0, w.ws_row > 0 else { return (80, 24) }
        return (Int(w.ws_col), Int(w.ws_row))
    }

    /// Draws `lines` from the top left, clearing what was below.
    func draw(_ lines: [String]) {
        write("\u{1B}[H" + lines.map { $0 + "\u{1B}[K" }.joined(separator: "\r\n") + "\u{1B}[J")
    }

    /// What ended a wait.
    enum Event { case tick, quit, resize }

    /// Waits up to `seconds` for a key or a signal (``SignalPipe``): `.quit` for `q`, `Q`,
    /// Ctrl-C, Ctrl-D, the terminal gone, or SIGINT, SIGQUIT, SIGTERM, SIGHUP from outside;
    /// `.resize` for SIGWINCH; `.tick` when the time is up.
    func wait(_ seconds: Double, signals: SignalPipe) -> Event {
        var fds = [
            pollfd(fd: 0, events: Int16(POLLIN), revents: 0), pollfd(fd: signals.fd, events: Int16(POLLIN), revents: 0),
        ]
        let ready = poll(&fds, 2, Int32(max(0, min(seconds * 1000, 3_600_000))))
        guard ready > 0 else { return .tick }
        if fds[1].revents != 0, let sig = signals.take() { return sig == SIGWINCH ? .resize : .quit }
        var bytes = [UInt8](repeating: 0, count: 64)
        let n = read(0, &bytes, bytes.count)
        // The terminal went away (EOF, an error): stop rather than spin.
        guard n > 0 else { return .quit }
        let quit = bytes[..<n].contains { $0 == UInt8(ascii: "q") || $0 == UInt8(ascii: "Q") || $0 == 3 || $0 == 4 }
        return quit ? .quit : .tick
    }

    /// Leaves the alternate screen, shows the cursor and puts the terminal's mode back.
    func restore() {
        guard active else { return }
        active = false
        write("\u{1B}[?25h\u{1B}[?1049l")
        tcsetattr(0, TCSANOW, &saved)
    }

    private func write(_ text: String) {
        Output.writeStandardOutput(Array(text.utf8))
    }

    deinit { restore() }
}

/// Signals as bytes on a pipe (the self-pipe way): a wait on the terminal's input wakes for them
/// at once, and the view ends, or redraws, as for a key, with the terminal put back.
final class SignalPipe: @unchecked Sendable {
    let fd: Int32
    private let writeEnd: Int32
    private var subscription: SignalSubscription?

    init(_ signals: [Int32]) throws {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else {
            throw StoreError(.storage, "cannot make a pipe: \(String(cString: strerror(errno)))")
        }
        fd = ends[0]
        writeEnd = ends[1]
        _ = fcntl(fd, F_SETFL, O_NONBLOCK)
        _ = fcntl(writeEnd, F_SETFL, O_NONBLOCK)
        let end = writeEnd
        subscription = try ProcessSignals.subscribe(signals) { sig in
            var byte = UInt8(truncatingIfNeeded: sig)
            _ = write(end, &byte, 1)
        }
    }

    /// The signal that arrived, if one did.
    func take() -> Int32? {
        var byte: UInt8 = 0
        return read(fd, &byte, 1) == 1 ? Int32(byte) : nil
    }

    deinit {
        subscription?.cancel()
        close(fd)
        close(writeEnd)
    }
}
