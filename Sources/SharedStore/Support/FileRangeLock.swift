import Foundation

/// An exclusive lock between processes on one byte of a file (a POSIX record lock), taken with a
/// deadline and released by the kernel when its process dies.
///
/// POSIX record locks belong to the process: closing any descriptor of the file drops them. The
/// descriptor is kept open for the lock's lifetime and the file is never closed elsewhere in a
/// way that matters (LMDB keeps its own descriptor open while the environment is open).
final class FileRangeLock: @unchecked Sendable {
    private let fd: Int32
    let path: String
    private static let offset: off_t = 0

    /// Opens `path` (created 0600 when missing, never through a symlink).
    init(path: String) throws {
        let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0o600)
        guard fd >= 0 else {
            throw StoreError(.fileAccess, "cannot open \(path): \(String(cString: strerror(errno)))")
        }
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
    /// - Throws: `.busy` naming the process that holds the lock and `what` it guards.
    func acquire(timeout: Double, what: String) throws {
        let start = Monotonic.seconds()
        var attempt = 0
        while true {
            var l = request(Int32(F_WRLCK))
            if fcntl(fd, F_SETLK, &l) == 0 { return }
            let err = errno
            guard err == EAGAIN || err == EACCES || err == EINTR else {
                throw StoreError(.fileAccess, "cannot lock \(path): \(String(cString: strerror(err)))")
            }
            if Monotonic.seconds() - start >= timeout {
                throw StoreError(.busy, "\(what) busy: \(holder()) has held its write lock for more than \(Self.format(timeout)) s")
            }
            usleep(UInt32(min(100 << min(attempt, 6), 2000)))
            attempt += 1
        }
    }

    func release() {
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

    private static func format(_ seconds: Double) -> String {
        seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
    }
}

/// The monotonic clock, in seconds.
enum Monotonic {
    static func seconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
