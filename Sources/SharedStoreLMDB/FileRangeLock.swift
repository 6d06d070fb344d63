import Foundation
import SharedStoreSupport

/// An exclusive lock between processes on one byte of a file (a POSIX record lock), taken with a
/// deadline and released by the kernel when its process dies.
///
/// POSIX record locks belong to the process: closing any descriptor of the file drops them. The
/// descriptor is kept open for the lock's lifetime and the file is never closed elsewhere in a
/// way that matters (LMDB keeps its own descriptor open while the environment is open).
package final class FileRangeLock: @unchecked Sendable {
    private let fd: Int32
    let path: String
    private static let offset: off_t = 0

    /// Opens `path` (created 0600 when missing, never through a symlink); `readOnly`: opened
    /// for reading only, never made (an environment that only reads takes no writer lock).
    package init(path: String, readOnly: Bool = false) throws {
        let mode = readOnly ? O_RDONLY : O_RDWR | O_CREAT
        let fd = open(path, mode | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0o600)
        guard fd >= 0 else { throw LMDBError(code: errno, call: "open", path: path) }
        self.fd = fd
        self.path = path
    }

    deinit { close(fd) }

    private func request(_ type: Int32) -> flock {
        var l = flock()
        l.l_type = Int16(type)
        l.l_whence = Int16(SEEK_SET)
        l.l_start = Self.offset
        l.l_len = 1
        return l
    }

    /// Takes the lock, waiting in short, growing steps (100 µs doubling to 2 ms, as SQLite's
    /// busy wait here) up to `timeout` seconds.
    ///
    /// - Throws: ``LockBusy`` naming the process that holds the lock; ``LMDBError`` when the
    ///   lock cannot be asked for.
    package func acquire(timeout: Double) throws {
        let start = Monotonic.seconds()
        var attempt = 0
        while true {
            var l = request(Int32(F_WRLCK))
            if fcntl(fd, F_SETLK, &l) == 0 { return }
            let err = errno
            guard err == EAGAIN || err == EACCES || err == EINTR else {
                throw LMDBError(code: err, call: "fcntl(F_SETLK)", path: path)
            }
            if Monotonic.seconds() - start >= timeout { throw LockBusy(path: path, holder: holder(), timeout: timeout) }
            usleep(UInt32(min(100 << min(attempt, 6), 2000)))
            attempt += 1
        }
    }

    package func release() {
        var l = request(Int32(F_UNLCK))
        _ = fcntl(fd, F_SETLK, &l)
    }

    /// "process 1234 (widget)", or "another process" when the holder cannot be named.
    private func holder() -> String {
        var l = request(Int32(F_WRLCK))
        guard fcntl(fd, F_GETLK, &l) == 0, l.l_type != Int16(F_UNLCK), l.l_pid > 0 else { return "another process" }
        let name = (try? String(contentsOfFile: "/proc/\(l.l_pid)/comm", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines)
        return "process \(l.l_pid)" + (name.map { " (\(TextSafety.visible($0)))" } ?? "")
    }

}

/// Another process held a ``FileRangeLock`` past the deadline.
package struct LockBusy: Error, CustomStringConvertible {
    package let path: String
    /// "process 1234 (widget)", or "another process".
    package let holder: String
    package let timeout: Double

    package var description: String {
        let seconds = timeout == timeout.rounded() ? String(Int(timeout)) : String(timeout)
        return "\(holder) has held its write lock for more than \(seconds) s"
    }
}
