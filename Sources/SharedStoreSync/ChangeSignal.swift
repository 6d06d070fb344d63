import Foundation
import Glibc
import SharedStoreCore
import SharedStoreLMDB
import SharedStoreSupport

#if canImport(Glibc)
#endif

/// The change signal between processes: a small file in the group directory that writers touch
/// after each commit, and that observers watch with inotify.
///
/// The store knows nothing of it: ``attach(to:)`` installs it as a commit hook of a container
/// (every target does, and `ViewContext` needs no writer's help otherwise: observers also poll).
///
/// Writers: `post(_:)` writes the new token into the file (an 8-byte `pwrite`, never blocking
/// on a regular file). Observers: ``ChangeObserver`` wakes on the resulting `IN_MODIFY`.
/// Lost events (`IN_Q_OVERFLOW`, a file system without inotify) are caught by the observers'
/// slow poll of the current token.
public final class ChangeSignal: Sendable {
    /// The signal file's name in the group directory.
    public static let fileName = "changes.signal"
    /// The signal file's path.
    public let path: String
    private let fd: Int32

    /// Touches the change-signal file of `container`'s group directory after each of its commits,
    /// so that observers in every process wake at once. Nothing for an in-memory store.
    ///
    /// - Throws: `.fileAccess` when the file is a symlink, a FIFO or cannot be made.
    public static func attach(to container: Container) throws {
        guard let path = path(of: container) else { return }
        let signal = try ChangeSignal(path: path)
        container.addCommitHook { token in signal.post(token?.value ?? 0) }
    }

    /// The change-signal file of `container`'s group directory (nil for an in-memory store).
    package static func path(of container: Container) -> String? {
        container.options.inMemory ? nil : (container.directory as NSString).appendingPathComponent(fileName)
    }

    private init(path: String) throws {
        self.path = path
        // Never through a symlink (a planted one would make every commit write into its target),
        // never blocking (a FIFO without a reader would block open(2) forever): O_NOFOLLOW and
        // O_NONBLOCK, then it must be a regular file.
        try GroupDirectory.prepareFile(path)
        let fd = open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            let err = errno
            if err == ELOOP || err == ENXIO { try GroupDirectory.checkFile(path) }
            throw StoreError(.fileAccess, "cannot open change signal \(path): \(String(cString: strerror(err)))")
        }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            throw StoreError(
                .fileAccess,
                "\(TextSafety.visible(path)) is \(GroupDirectory.describe(st.st_mode & S_IFMT)), not a regular file; "
                    + "refusing to open it (remove it if it should not be there)")
        }
        self.fd = fd
    }

    deinit { close(fd) }

    /// Tells every observer that the store changed. Failures are ignored: the poll catches up.
    func post(_ token: Int64) {
        var value = token.littleEndian
        _ = withUnsafeBytes(of: &value) { pwrite(fd, $0.baseAddress, 8, 0) }
    }
}

/// An inotify watch on the change-signal file, with a way to interrupt a wait from another thread.
package final class ChangeSignalWatch: @unchecked Sendable {
    enum Wake { case signal, timeout, stopped }

    private let inotify: Int32
    package var usesInotify: Bool { inotify >= 0 }
    /// The inotify descriptor, for a caller that polls it with others (-1: none, poll instead);
    /// ``drainEvents()`` after it became readable.
    package var descriptor: Int32 { inotify }
    private let stopRead: Int32, stopWrite: Int32
    let path: String

    /// Watches `path` (nil: no inotify, waits only time out: the observer polls).
    package init(path: String?) throws {
        self.path = path ?? ""
        var fd: Int32 = -1
        if let path {
            fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
            if fd >= 0, inotify_add_watch(fd, path, UInt32(IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DONT_FOLLOW)) < 0
            {
                // No inotify here (or no watch slots left): fall back to the poll alone.
                close(fd)
                fd = -1
            }
        }
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else {
            if fd >= 0 { close(fd) }
            throw StoreError(.fileAccess, "pipe failed: \(String(cString: strerror(errno)))")
        }
        for p in pipeFDs {
            _ = fcntl(p, F_SETFD, FD_CLOEXEC)
            _ = fcntl(p, F_SETFL, O_NONBLOCK)
        }
        inotify = fd
        stopRead = pipeFDs[0]
        stopWrite = pipeFDs[1]
    }

    deinit {
        if inotify >= 0 { close(inotify) }
        close(stopRead)
        close(stopWrite)
    }

    /// Interrupts the current and every later ``wait(timeout:)``.
    func stop() {
        var one: UInt8 = 1
        _ = write(stopWrite, &one, 1)
    }

    /// Waits until the file changes, `timeout` passes, or ``stop()`` is called. A burst of
    /// events is drained and reported as one wake-up (coalescing).
    func wait(timeout: TimeInterval) -> Wake {
        let deadline = Monotonic.nanoseconds() + UInt64(max(0, timeout) * 1e9)
        var fds = [
            pollfd(fd: inotify, events: Int16(POLLIN), revents: 0),
            pollfd(fd: stopRead, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            let now = Monotonic.nanoseconds()
            let remaining = now >= deadline ? 0 : Int32(min((deadline - now) / 1_000_000 + 1, UInt64(Int32.max)))
            let rc = poll(&fds, 2, remaining)
            if rc < 0 {
                if errno == EINTR { continue }
                return .timeout  // treat as a poll tick: the token check still runs
            }
            if rc == 0 { return .timeout }
            if fds[1].revents != 0 { return .stopped }
            drain()
            return .signal
        }
    }

    private func drain() { drainEvents() }

    /// Reads away the events that arrived (a burst is one wake-up).
    package func drainEvents() {
        guard inotify >= 0 else { return }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while read(inotify, &buffer, buffer.count) > 0 {}
    }
}
