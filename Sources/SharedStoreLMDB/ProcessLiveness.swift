import Foundation
import SharedStoreSupport

/// Which processes are alive, told by a lock each holds on a file of the group directory
/// (`live.lock`): a process that has ephemeral consumers holds an open-file-description lock on
/// the byte at its pid, released by the kernel when it dies, however it dies. Any process asks
/// whether that byte is locked.
///
/// Open-file-description locks (Linux's `F_OFD_*`), not POSIX record locks: closing another
/// descriptor of the file drops no lock of this process, and a process sees its own lock.
package enum ProcessLiveness {
    /// Linux's `F_OFD_GETLK` and `F_OFD_SETLK` (not imported by Glibc's module).
    private static let ofdGetLock: Int32 = 36
    private static let ofdSetLock: Int32 = 37

    /// The descriptor holding this process's lock, by lock file (kept open for the process's life).
    private static let held = Protected<[String: Int32]>([:])

    /// `live.lock` beside `registry` (a registry's `tokens.lmdb`).
    package static func lockPath(beside registry: String) -> String {
        PathName.directory(of: registry) + "/live.lock"
    }

    private static func request(_ type: Int32, pid: Int32) -> flock {
        var l = flock()
        l.l_type = Int16(type)
        l.l_whence = Int16(SEEK_SET)
        l.l_start = off_t(pid)
        l.l_len = 1
        l.l_pid = 0
        return l
    }

    /// Takes this process's lock in `path` (once per file per process).
    ///
    /// - Throws: ``LMDBError`` when the file cannot be opened or locked.
    package static func hold(_ path: String) throws {
        try held.withLock { held in
            guard held[path] == nil else { return }
            let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0o600)
            guard fd >= 0 else { throw LMDBError(code: errno, call: "open", path: path) }
            var l = request(Int32(F_WRLCK), pid: getpid())
            guard fcntl(fd, ofdSetLock, &l) == 0 else {
                let err = errno
                close(fd)
                throw LMDBError(code: err, call: "fcntl(F_OFD_SETLK)", path: path)
            }
            held[path] = fd
        }
    }

    /// Whether process `pid` holds its lock in `path` (nil: it cannot be told, the file cannot
    /// be read).
    package static func holdsLock(_ pid: Int32, in path: String) -> Bool? {
        guard pid > 0 else { return false }
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return errno == ENOENT ? false : nil }
        defer { close(fd) }
        var l = request(Int32(F_WRLCK), pid: pid)
        guard fcntl(fd, ofdGetLock, &l) == 0 else { return nil }
        return l.l_type != Int16(F_UNLCK)
    }

    /// When process `pid` started, in clock ticks after boot (`/proc/PID/stat`, field 22; nil
    /// when it cannot be read): with the pid, it names one process even after the pid is reused.
    package static func startTime(of pid: Int32) -> UInt64? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        // After the command (which may hold spaces and parentheses): state is field 3.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 19 ? UInt64(fields[19]) : nil
    }
}
