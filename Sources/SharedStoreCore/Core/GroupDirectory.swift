import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// The checks every group file passes before it is opened (invariant 8): the directory is the
/// current user's and nobody else can write it; each file is a regular file, never reached
/// through a symbolic link, and made private (0600) whatever the umask.
///
/// A planted symlink must not make a process write through it (as root: to any file), a FIFO
/// must not block an open forever, and a directory that others can write lets them plant both.
public enum GroupDirectory {
    /// Creates `path` (and missing parents) with mode 0700 when it does not exist, then checks it.
    ///
    /// - Throws: `.fileAccess` naming the directory and how to fix it.
    public static func prepare(_ path: String) throws {
        try makePrivateDirectory(path)
        try check(path)
    }

    /// Checks that `path` is a directory of the current user that group and others cannot write.
    ///
    /// - Throws: `.fileAccess` naming the directory and how to fix it.
    public static func check(_ path: String) throws {
        var st = stat()
        guard stat(path, &st) == 0 else {
            throw StoreError(
                .fileAccess, "cannot use group directory \(shown(path)): \(String(cString: strerror(errno)))")
        }
        guard st.st_mode & S_IFMT == S_IFDIR else {
            throw StoreError(.fileAccess, "group directory \(shown(path)) is not a directory")
        }
        guard st.st_uid == geteuid() else {
            throw StoreError(
                .fileAccess,
                "group directory \(shown(path)) belongs to user \(st.st_uid), not to the current user \(geteuid()); "
                    + "use a directory of your own (or chown it)")
        }
        guard st.st_mode & 0o022 == 0 else {
            throw StoreError(
                .fileAccess,
                "group directory \(shown(path)) can be written by other users (mode "
                    + "\(String(st.st_mode & 0o777, radix: 8))); make it private with: chmod 700 \(shown(path))")
        }
    }

    /// Makes sure `path` is a regular file, creating it empty with mode 0600 when it is missing.
    ///
    /// - Throws: `.fileAccess` naming the file and what it is instead.
    public static func prepareFile(_ path: String) throws {
        let fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0o600)
        if fd >= 0 {
            // The umask may have taken bits away from 0600; the owner needs both.
            _ = fchmod(fd, 0o600)
            close(fd)
            // A new file's name is durable only once its directory is synced (a power loss
            // would otherwise take the file away, with whatever was synced into it).
            syncDirectory(PathName.parent(of: path))
            return
        }
        guard errno == EEXIST else {
            throw StoreError(.fileAccess, "cannot create \(shown(path)): \(String(cString: strerror(errno)))")
        }
        try checkFile(path)
    }

    /// Checks that `path` is a regular file when it exists (not a symlink, FIFO, socket, device
    /// or directory).
    ///
    /// - Throws: `.fileAccess` naming the file and what it is.
    public static func checkFile(_ path: String) throws {
        var st = stat()
        guard lstat(path, &st) == 0 else {
            if errno == ENOENT { return }
            throw StoreError(.fileAccess, "cannot inspect \(shown(path)): \(String(cString: strerror(errno)))")
        }
        let kind = st.st_mode & S_IFMT
        guard kind == S_IFREG else {
            throw StoreError(
                .fileAccess,
                "\(shown(path)) is \(describe(kind)), not a regular file; refusing to open it "
                    + "(remove it if it should not be there)")
        }
    }

    package static func describe(_ kind: mode_t) -> String {
        switch kind {
        case S_IFLNK: return "a symbolic link"
        case S_IFIFO: return "a FIFO"
        case S_IFSOCK: return "a socket"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        case S_IFDIR: return "a directory"
        default: return "a special file"
        }
    }

    static func shown(_ path: String) -> String { TextSafety.visible(path) }

    static func makePrivateDirectory(_ path: String) throws {
        var st = stat()
        if stat(path, &st) == 0 { return }
        let parent = PathName.parent(of: path)
        if !parent.isEmpty, parent != path { try makePrivateDirectory(parent) }
        if mkdir(path, 0o700) != 0 {
            guard errno == EEXIST else {
                throw StoreError(
                    .fileAccess, "cannot create group directory \(shown(path)): \(String(cString: strerror(errno)))")
            }
            return
        }
        // mkdir's mode passes through the umask: make it exactly 0700.
        _ = chmod(path, 0o700)
        syncDirectory(parent.isEmpty ? "." : parent)
    }

    /// Makes the names in directory `path` durable (fsync of the directory) after a file in it
    /// was created, renamed or removed. Best effort: a file system that cannot sync a directory
    /// (EINVAL) has nothing more to offer, and the change itself has been made.
    public static func syncDirectory(_ path: String) {
        let fd = open(path.isEmpty ? "." : path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        close(fd)
    }
}
