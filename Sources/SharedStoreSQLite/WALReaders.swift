import Foundation

/// A read transaction another process holds open on a store in WAL mode: the WAL cannot be
/// checkpointed past the frame it reads, so a long one (a pinned context) keeps the WAL growing.
public struct WALReader: Sendable, Hashable {
    /// The read slot (SQLite's WAL read lock) it holds, 0 to 4; slot 0 reads the database file
    /// alone.
    public let slot: Int
    /// The process holding it (as `fcntl` reports the lock's owner; 0 when in another PID namespace).
    public let pid: Int32
    /// The last WAL frame it reads: it sees the store as it was when that frame was written.
    public let frame: UInt32
    /// The WAL's last frame now: `walFrames - frame` frames were written after its snapshot.
    public let walFrames: UInt32
}

/// Read transactions of other processes on a store, from its WAL index (`-shm`): the read locks
/// held and the frame each slot reads, as SQLite lays them out (a header of 48 bytes twice, then
/// the checkpoint information: backfill count, five read marks, the lock bytes from 120). Only
/// `fcntl(F_GETLK)`, which never waits; locks of this process are not reported.
public enum WALReaders {
    /// The readers of the store at `storePath`; none when it has no WAL index (not in WAL mode,
    /// never opened) or when the index is not a regular file.
    public static func of(storePath: String) -> [WALReader] {
        let fd = open(storePath + "-shm", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return [] }
        var bytes = [UInt8](repeating: 0, count: 136)
        guard pread(fd, &bytes, bytes.count, 0) == bytes.count else { return [] }
        func word(_ offset: Int) -> UInt32 {
            bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self) }
        }
        let walFrames = word(16)
        var readers: [WALReader] = []
        for slot in 0..<5 {
            var lock = flock()
            lock.l_type = Int16(F_WRLCK)
            lock.l_whence = Int16(SEEK_SET)
            lock.l_start = off_t(120 + 3 + slot)
            lock.l_len = 1
            guard fcntl(fd, F_GETLK, &lock) == 0, lock.l_type != Int16(F_UNLCK) else { continue }
            readers.append(WALReader(slot: slot, pid: lock.l_pid, frame: word(100 + 4 * slot), walFrames: walFrames))
        }
        return readers
    }

    /// The name of process `pid`'s executable (`/proc/<pid>/comm`), or nil.
    public static func executable(of pid: Int32) -> String? {
        guard pid > 0, let text = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8) else { return nil }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
