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
/// `/proc/locks` (or `fcntl(F_GETLK)`), which never wait; locks of this process are not reported.
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
        // Every holder of each read lock, from the kernel's list of locks (two readers may share
        // a slot, and F_GETLK reports one), and F_GETLK for a slot the list does not show (it
        // shows only the locks of this PID namespace).
        let held = (heldReadLocks(device: st.st_dev, inode: st.st_ino) ?? []).filter { $0.pid != getpid() }
        var readers = held.map {
            WALReader(slot: $0.slot, pid: $0.pid, frame: word(100 + 4 * $0.slot), walFrames: walFrames)
        }
        for slot in 0..<5 {
            var lock = flock()
            lock.l_type = Int16(F_WRLCK)
            lock.l_whence = Int16(SEEK_SET)
            lock.l_start = off_t(120 + 3 + slot)
            lock.l_len = 1
            guard fcntl(fd, F_GETLK, &lock) == 0, lock.l_type != Int16(F_UNLCK),
                !readers.contains(where: { $0.slot == slot })
            else { continue }
            readers.append(WALReader(slot: slot, pid: lock.l_pid, frame: word(100 + 4 * slot), walFrames: walFrames))
        }
        return readers.sorted { ($0.slot, $0.pid) < ($1.slot, $1.pid) }
    }

    /// The other process holding the store's write lock now (SQLite's WAL write lock, byte 120
    /// of the WAL index), as `fcntl(F_GETLK)` reports it without taking it; nil when it is free,
    /// or when there is no WAL index.
    public static func writer(storePath: String) -> Int32? {
        let fd = open(storePath + "-shm", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = 120
        lock.l_len = 1
        guard fcntl(fd, F_GETLK, &lock) == 0, lock.l_type != Int16(F_UNLCK) else { return nil }
        return lock.l_pid
    }

    /// Whether process `pid` is stopped (SIGSTOP, a debugger), from `/proc/PID/stat`; nil when
    /// that cannot be read.
    public static func isStopped(_ pid: Int32) -> Bool? {
        guard let text = readAll("/proc/\(pid)/stat"), let close = text.lastIndex(of: ")") else { return nil }
        let state = text[text.index(after: close)...].drop { $0 == " " }.first
        return state == "T" || state == "t"
    }

    /// The other processes that have the store at `storePath` open: every SQLite connection in
    /// WAL mode holds a lock on its WAL index (`-shm`), which `/proc/locks` lists (this process's
    /// own aside; those of another PID namespace are not listed). Sorted, each once.
    public static func holders(storePath: String) -> [Int32] {
        var st = stat()
        guard lstat(storePath + "-shm", &st) == 0, (st.st_mode & S_IFMT) == S_IFREG,
            let text = readAll("/proc/locks")
        else { return [] }
        let file = fileID(device: st.st_dev, inode: st.st_ino)
        var pids = Set<Int32>()
        for line in text.split(separator: "\n") {
            let f = line.split(separator: " ", omittingEmptySubsequences: true)
            guard f.count >= 8, f[1] == "POSIX", f[4] != "->", let pid = Int32(f[4]), pid != getpid(),
                normalized(f[5]) == file
            else { continue }
            pids.insert(pid)
        }
        return pids.sorted()
    }

    /// `/proc/locks`' name of a file: `major:minor:inode`, the numbers in hex without leading
    /// zeros but the inode.
    static func fileID(device: dev_t, inode: ino_t) -> String {
        let major = ((UInt64(device) >> 8) & 0xfff) | ((UInt64(device) >> 32) & ~UInt64(0xfff))
        let minor = (UInt64(device) & 0xff) | ((UInt64(device) >> 12) & ~UInt64(0xff))
        return String(major, radix: 16) + ":" + String(minor, radix: 16) + ":" + String(inode)
    }

    /// The POSIX locks on bytes 123…127 (the read locks) of the file `device`/`inode`, from
    /// `/proc/locks` (`1: POSIX ADVISORY READ 1234 08:01:5678 123 123`), other processes' and
    /// this one's; nil when the list cannot be read.
    static func heldReadLocks(device: dev_t, inode: ino_t) -> [(slot: Int, pid: Int32)]? {
        guard let text = readAll("/proc/locks") else { return nil }
        let file = fileID(device: device, inode: inode)
        var held: [(slot: Int, pid: Int32)] = []
        for line in text.split(separator: "\n") {
            let f = line.split(separator: " ", omittingEmptySubsequences: true)
            // A blocked request ("->") holds nothing.
            guard f.count >= 8, f[1] == "POSIX", f[4] != "->", let pid = Int32(f[4]) else { continue }
            guard normalized(f[5]) == file, let start = Int(f[6]), let end = Int(f[7])
            else { continue }
            for slot in 0..<5 where (start...end).contains(123 + slot) { held.append((slot, pid)) }
        }
        return held.sorted { ($0.slot, $0.pid) < ($1.slot, $1.pid) }
    }

    /// The whole of a file of /proc, read until its end (one read of such a file returns at most
    /// a page), at most 16 MiB.
    static func readAll(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while bytes.count < 16 << 20 {
            let n = read(fd, &chunk, chunk.count)
            if n < 0, errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { break }
            bytes += chunk[..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `08:01:5678` with its hex fields without leading zeros.
    private static func normalized(_ id: Substring) -> String {
        let parts = id.split(separator: ":")
        guard parts.count == 3, let a = UInt64(parts[0], radix: 16), let b = UInt64(parts[1], radix: 16) else {
            return String(id)
        }
        return String(a, radix: 16) + ":" + String(b, radix: 16) + ":" + parts[2]
    }

    /// The name of process `pid`'s executable (the file `/proc/<pid>/exe` names, else its
    /// `comm`, cut to 15 characters by the kernel), or nil.
    public static func executable(of pid: Int32) -> String? {
        guard pid > 0 else { return nil }
        if var exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe") {
            // The kernel marks an executable removed since it started.
            if exe.hasSuffix(" (deleted)") { exe.removeLast(" (deleted)".count) }
            return URL(fileURLWithPath: exe).lastPathComponent
        }
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8) else { return nil }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
