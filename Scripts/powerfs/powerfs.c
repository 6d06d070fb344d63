// powerfs: a FUSE file system for tests that forgets what was never synced, as a power loss does.
//
// It passes every operation through to a backing directory, except that it keeps in memory what a
// disk with a volatile cache has not made durable yet:
//   - file data written since the file's last fsync/fdatasync (as 4 KiB pages, with the file's size);
//   - creations, unlinks, renames, mkdir and rmdir since the last fsync of the directory they change.
// Reads see everything, as they would on a running machine. On SIGUSR1 it "loses power": every
// unsynced page and every unsynced directory change is dropped, and from then on every operation
// fails with EIO. On SIGUSR2 it loses a random subset instead, as a cache that wrote back some of
// its blocks in an arbitrary order: each dirty page survives or not, a size change survives or
// not, and the directory changes keep a random prefix (a journal commits in order). Either way it
// prints one line on stdout, `lost pages=N kept=N dirops_lost=N dirops_kept=N`, once the backing
// directory holds the state after the loss. A clean unmount syncs everything, as a shutdown does.
// After the loss, a descriptor opened before it may still read pages the kernel had cached (and a
// mapped page it had not cached is SIGBUS): the power-loss runs kill every process at once.
//
// It is a test tool (Scripts/powerfs.sh builds it), never part of the library. Locks are left to
// the kernel (local to the mount); mmap works through the page cache (no direct_io).
//
// Usage: powerfs BACKING MOUNTPOINT SEED [fuse options, e.g. -f]

#define FUSE_USE_VERSION 31
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>

#define PAGE 4096
#define GRAVEYARD ".powerfs-graveyard"

static int backing = -1;  // the backing directory
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int dead;  // power lost: every operation fails
static uint64_t rng;
static uint64_t graveyard_serial;

static uint64_t next_random(void) {
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 2685821657736338717ULL;
}

// MARK: - Files: unsynced pages by inode

struct page {
    off_t index;
    struct page *next;
    unsigned char bytes[PAGE];
};

#define BUCKETS 1024

struct file {
    ino_t ino;
    int fd;          // a backing descriptor kept for fsync and for the loss
    off_t size;      // the size a reader sees
    off_t synced;    // the backing file's size (as of the last sync)
    off_t floor;     // the smallest size since the last sync: backing bytes past it read as zeros
    struct page *pages[BUCKETS];  // unsynced pages by index % BUCKETS
    long dirty;
    int opens;
    struct file *next;
};

static struct file *files;

static struct file *file_for(ino_t ino) {
    for (struct file *f = files; f; f = f->next)
        if (f->ino == ino) return f;
    return NULL;
}

static void drop_pages(struct file *f) {
    for (int b = 0; b < BUCKETS; b++) {
        while (f->pages[b]) {
            struct page *p = f->pages[b];
            f->pages[b] = p->next;
            free(p);
        }
    }
    f->dirty = 0;
}

static void forget_file(ino_t ino) {
    for (struct file **at = &files; *at; at = &(*at)->next) {
        if ((*at)->ino == ino) {
            struct file *f = *at;
            *at = f->next;
            drop_pages(f);
            close(f->fd);
            free(f);
            return;
        }
    }
}

// The state of the file behind `fd`, created on first use from the backing file.
static struct file *track(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) return NULL;
    struct file *f = file_for(st.st_ino);
    if (f) return f;
    f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->fd = dup(fd);
    if (f->fd < 0) {
        free(f);
        return NULL;
    }
    f->ino = st.st_ino;
    f->size = f->synced = f->floor = st.st_size;
    f->next = files;
    files = f;
    return f;
}

static struct page *page_at(struct file *f, off_t index) {
    for (struct page *p = f->pages[index % BUCKETS]; p; p = p->next)
        if (p->index == index) return p;
    return NULL;
}

// Reads page `index` as of the last sync (zeros past the floor).
static int read_synced(struct file *f, off_t index, unsigned char *out) {
    memset(out, 0, PAGE);
    off_t start = index * PAGE;
    off_t limit = f->floor < f->synced ? f->floor : f->synced;
    if (start >= limit) return 0;
    size_t want = (size_t)(limit - start < PAGE ? limit - start : PAGE);
    ssize_t n = pread(f->fd, out, want, start);
    return n < 0 ? -errno : 0;
}

static struct page *dirty_page(struct file *f, off_t index, int *error) {
    struct page *p = page_at(f, index);
    if (p) return p;
    p = malloc(sizeof *p);
    if (!p) {
        *error = -ENOMEM;
        return NULL;
    }
    *error = read_synced(f, index, p->bytes);
    if (*error) {
        free(p);
        return NULL;
    }
    // Bytes past the visible size are zeros (a shrink hid them).
    off_t start = index * PAGE;
    if (f->size < start + PAGE) {
        off_t keep = f->size > start ? f->size - start : 0;
        memset(p->bytes + keep, 0, (size_t)(PAGE - keep));
    }
    p->index = index;
    p->next = f->pages[index % BUCKETS];
    f->pages[index % BUCKETS] = p;
    f->dirty++;
    return p;
}

static int file_read(struct file *f, char *buf, size_t len, off_t off) {
    if (off >= f->size) return 0;
    if ((off_t)len > f->size - off) len = (size_t)(f->size - off);
    size_t done = 0;
    unsigned char scratch[PAGE];
    while (done < len) {
        off_t at = off + (off_t)done;
        off_t index = at / PAGE;
        size_t in = (size_t)(at % PAGE);
        size_t n = PAGE - in < len - done ? PAGE - in : len - done;
        struct page *p = page_at(f, index);
        if (p) {
            memcpy(buf + done, p->bytes + in, n);
        } else {
            int error = read_synced(f, index, scratch);
            if (error) return error;
            memcpy(buf + done, scratch + in, n);
        }
        done += n;
    }
    return (int)done;
}

static int file_write(struct file *f, const char *buf, size_t len, off_t off) {
    size_t done = 0;
    while (done < len) {
        off_t at = off + (off_t)done;
        size_t in = (size_t)(at % PAGE);
        size_t n = PAGE - in < len - done ? PAGE - in : len - done;
        int error = 0;
        struct page *p = dirty_page(f, at / PAGE, &error);
        if (!p) return error;
        memcpy(p->bytes + in, buf + done, n);
        done += n;
    }
    if (off + (off_t)len > f->size) f->size = off + (off_t)len;
    return (int)len;
}

static int file_truncate(struct file *f, off_t size) {
    if (size < f->size) {
        // Pages wholly past the new end go; the one that straddles it is cut.
        for (int b = 0; b < BUCKETS; b++) {
            for (struct page **at = &f->pages[b]; *at;) {
                if ((*at)->index * PAGE >= size) {
                    struct page *gone = *at;
                    *at = gone->next;
                    free(gone);
                    f->dirty--;
                } else {
                    at = &(*at)->next;
                }
            }
        }
        if (size % PAGE) {
            int error = 0;
            struct page *p = dirty_page(f, size / PAGE, &error);
            if (!p) return error;
            memset(p->bytes + size % PAGE, 0, (size_t)(PAGE - size % PAGE));
        }
        if (size < f->floor) f->floor = size;
    }
    f->size = size;
    return 0;
}

// Writes the pages `keep` chooses (all when NULL) and the size (when `keep_size`) to the backing
// file. Returns the number of pages written, or -errno.
static long file_flush(struct file *f, int (*keep)(void), int keep_size) {
    off_t size = keep_size ? f->size : f->synced;
    if (keep_size) {
        if (ftruncate(f->fd, f->floor < f->synced ? f->floor : f->synced) != 0) return -errno;
        if (ftruncate(f->fd, size) != 0) return -errno;
    }
    long written = 0;
    for (int b = 0; b < BUCKETS; b++) {
        for (struct page *p = f->pages[b]; p; p = p->next) {
            off_t start = p->index * PAGE;
            if (start >= size || (keep && !keep())) continue;
            size_t n = (size_t)(size - start < PAGE ? size - start : PAGE);
            if (pwrite(f->fd, p->bytes, n, start) != (ssize_t)n) return -errno;
            written++;
        }
    }
    drop_pages(f);
    f->size = f->synced = f->floor = size;
    return written;
}

static int file_sync(struct file *f) {
    long written = file_flush(f, NULL, 1);
    if (written < 0) return (int)written;
    return fsync(f->fd) == 0 ? 0 : -errno;
}

// MARK: - Directory changes not yet synced

enum kind { CREATE, UNLINK, RENAME, MKDIR, RMDIR };

struct dirop {
    enum kind kind;
    char *path;     // the name created, removed, or renamed to
    char *from;     // RENAME: the old name
    char *buried;   // UNLINK, RENAME over a file: where the old file waits in the graveyard
    ino_t ino;      // CREATE: the new file
    mode_t mode;    // RMDIR: the directory's mode
    struct dirop *next;
};

static struct dirop *dirops, **dirops_tail = &dirops;

static char *dup_path(const char *p) {
    while (*p == '/') p++;
    return strdup(*p ? p : ".");
}

static void parent_of(const char *path, char *out) {
    const char *slash = strrchr(path, '/');
    if (!slash) {
        strcpy(out, ".");
        return;
    }
    size_t n = (size_t)(slash - path);
    memcpy(out, path, n);
    out[n] = 0;
}

static int record(enum kind kind, const char *path, const char *from, const char *buried, ino_t ino, mode_t mode) {
    struct dirop *op = calloc(1, sizeof *op);
    if (!op) return -ENOMEM;
    op->kind = kind;
    op->path = dup_path(path);
    op->from = from ? dup_path(from) : NULL;
    op->buried = buried ? strdup(buried) : NULL;
    op->ino = ino;
    op->mode = mode;
    *dirops_tail = op;
    dirops_tail = &op->next;
    return 0;
}

static void free_op(struct dirop *op) {
    free(op->path);
    free(op->from);
    free(op->buried);
    free(op);
}

// Moves the file at `rel` into the graveyard; its name there goes to `out`.
static int bury(const char *rel, char *out, size_t size) {
    snprintf(out, size, GRAVEYARD "/%" PRIu64, ++graveyard_serial);
    return renameat(backing, rel, backing, out) == 0 ? 0 : -errno;
}

static void forget_buried(const char *buried) {
    struct stat st;
    if (fstatat(backing, buried, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        struct file *f = file_for(st.st_ino);
        if (f && f->opens == 0) forget_file(st.st_ino);
        if (S_ISDIR(st.st_mode)) unlinkat(backing, buried, AT_REMOVEDIR);
        else unlinkat(backing, buried, 0);
    }
}

// A directory's fsync makes durable the changes of names in it, and those before them in the
// journal (a journal commits in order).
static void commit_dir(const char *dir) {
    char want[PATH_MAX];
    snprintf(want, sizeof want, "%s", dir);
    char *rel = dup_path(want);
    struct dirop *last = NULL;
    for (struct dirop *op = dirops; op; op = op->next) {
        char parent[PATH_MAX];
        parent_of(op->path, parent);
        if (strcmp(parent, rel) == 0) last = op;
        if (op->from) {
            parent_of(op->from, parent);
            if (strcmp(parent, rel) == 0) last = op;
        }
    }
    free(rel);
    if (!last) return;
    struct dirop *op = dirops;
    for (;;) {
        struct dirop *next = op->next;
        if (op->buried) forget_buried(op->buried);
        int end = op == last;
        free_op(op);
        op = next;
        if (end) break;
    }
    dirops = op;
    if (!dirops) dirops_tail = &dirops;
}

// Undoes one directory change on the backing directory.
static void undo(struct dirop *op) {
    switch (op->kind) {
    case CREATE: {
        struct stat st;
        if (fstatat(backing, op->path, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_ino == op->ino)
            unlinkat(backing, op->path, 0);
        break;
    }
    case UNLINK:
        renameat(backing, op->buried, backing, op->path);
        break;
    case RENAME:
        renameat(backing, op->path, backing, op->from);
        if (op->buried) renameat(backing, op->buried, backing, op->path);
        break;
    case MKDIR:
        unlinkat(backing, op->path, AT_REMOVEDIR);
        break;
    case RMDIR:
        mkdirat(backing, op->path, op->mode);
        break;
    }
}

static int keep_half(void) { return (int)(next_random() >> 63); }

// MARK: - Losing power

static void lose_power(int partial) {
    pthread_mutex_lock(&lock);
    dead = 1;
    long pages = 0, kept = 0;
    for (struct file *f = files; f; f = f->next) {
        pages += f->dirty;
        if (partial) {
            long written = file_flush(f, keep_half, keep_half());
            if (written > 0) kept += written;
        }
        drop_pages(f);
    }
    long total = 0;
    for (struct dirop *op = dirops; op; op = op->next) total++;
    long prefix = partial && total ? (long)(next_random() % (uint64_t)(total + 1)) : 0;
    // Undo the lost suffix, newest first.
    struct dirop **lost = calloc((size_t)(total - prefix + 1), sizeof *lost);
    long n = 0, index = 0;
    for (struct dirop *op = dirops; op && lost; op = op->next, index++)
        if (index >= prefix) lost[n++] = op;
    for (long i = n - 1; i >= 0; i--) undo(lost[i]);
    free(lost);
    syncfs(backing);
    printf("lost pages=%ld kept=%ld dirops_lost=%ld dirops_kept=%ld\n", pages - kept, kept, total - prefix, prefix);
    fflush(stdout);
    pthread_mutex_unlock(&lock);
}

static void *control(void *unused) {
    (void)unused;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0) continue;
        lose_power(sig == SIGUSR2);
    }
    return NULL;
}

// MARK: - Operations

#define ENTER                          \
    pthread_mutex_lock(&lock);         \
    if (dead) {                        \
        pthread_mutex_unlock(&lock);   \
        return -EIO;                   \
    }
#define LEAVE(value)                   \
    do {                               \
        int result_ = (value);         \
        pthread_mutex_unlock(&lock);   \
        return result_;                \
    } while (0)

// The backing path of a path in the mount ("." for the root). The graveyard is not reachable.
static int rel(const char *path, char *out) {
    while (*path == '/') path++;
    if (strncmp(path, GRAVEYARD, strlen(GRAVEYARD)) == 0) return -ENOENT;
    snprintf(out, PATH_MAX, "%s", *path ? path : ".");
    return 0;
}

#define REL(name, path)              \
    char name[PATH_MAX];             \
    {                                \
        int e_ = rel(path, name);    \
        if (e_) LEAVE(e_);           \
    }

static void fix_size(struct stat *st) {
    struct file *f = file_for(st->st_ino);
    if (f && S_ISREG(st->st_mode)) {
        st->st_size = f->size;
        st->st_blocks = (f->size + 511) / 512;
    }
}

static int op_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
    ENTER
    if (fi && fi->fh) {
        if (fstat((int)fi->fh, st) != 0) LEAVE(-errno);
    } else {
        if (!path) LEAVE(-ESTALE);
        REL(r, path);
        if (fstatat(backing, r, st, AT_SYMLINK_NOFOLLOW) != 0) LEAVE(-errno);
    }
    fix_size(st);
    LEAVE(0);
}

static int op_readlink(const char *path, char *buf, size_t size) {
    ENTER
    REL(r, path);
    ssize_t n = readlinkat(backing, r, buf, size - 1);
    if (n < 0) LEAVE(-errno);
    buf[n] = 0;
    LEAVE(0);
}

static int op_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off, struct fuse_file_info *fi,
                      enum fuse_readdir_flags flags) {
    (void)off;
    (void)fi;
    (void)flags;
    ENTER
    REL(r, path);
    int fd = openat(backing, r, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) LEAVE(-errno);
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        LEAVE(-errno);
    }
    int root = strcmp(r, ".") == 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (root && strcmp(e->d_name, GRAVEYARD) == 0) continue;
        struct stat st;
        memset(&st, 0, sizeof st);
        st.st_ino = e->d_ino;
        st.st_mode = (mode_t)e->d_type << 12;
        if (fill(buf, e->d_name, &st, 0, 0)) break;
    }
    closedir(d);
    LEAVE(0);
}

static int op_mknod(const char *path, mode_t mode, dev_t dev) {
    ENTER
    REL(r, path);
    if (mknodat(backing, r, mode, dev) != 0) LEAVE(-errno);
    struct stat st;
    if (fstatat(backing, r, &st, AT_SYMLINK_NOFOLLOW) != 0) LEAVE(-errno);
    LEAVE(record(CREATE, r, NULL, NULL, st.st_ino, 0));
}

static int op_mkdir(const char *path, mode_t mode) {
    ENTER
    REL(r, path);
    if (mkdirat(backing, r, mode) != 0) LEAVE(-errno);
    LEAVE(record(MKDIR, r, NULL, NULL, 0, mode));
}

static int op_unlink(const char *path) {
    ENTER
    REL(r, path);
    char buried[PATH_MAX];
    int error = bury(r, buried, sizeof buried);
    if (error) LEAVE(error);
    LEAVE(record(UNLINK, r, NULL, buried, 0, 0));
}

static int op_rmdir(const char *path) {
    ENTER
    REL(r, path);
    struct stat st;
    if (fstatat(backing, r, &st, AT_SYMLINK_NOFOLLOW) != 0) LEAVE(-errno);
    if (unlinkat(backing, r, AT_REMOVEDIR) != 0) LEAVE(-errno);
    LEAVE(record(RMDIR, r, NULL, NULL, 0, st.st_mode & 07777));
}

static int op_symlink(const char *target, const char *path) {
    ENTER
    REL(r, path);
    if (symlinkat(target, backing, r) != 0) LEAVE(-errno);
    struct stat st;
    if (fstatat(backing, r, &st, AT_SYMLINK_NOFOLLOW) != 0) LEAVE(-errno);
    LEAVE(record(CREATE, r, NULL, NULL, st.st_ino, 0));
}

static int op_rename(const char *from, const char *to, unsigned int flags) {
    ENTER
    if (flags) LEAVE(-EINVAL);
    REL(rf, from);
    REL(rt, to);
    struct stat st, target;
    if (fstatat(backing, rf, &st, AT_SYMLINK_NOFOLLOW) != 0) LEAVE(-errno);
    char buried[PATH_MAX];
    int replaces = fstatat(backing, rt, &target, AT_SYMLINK_NOFOLLOW) == 0;
    if (replaces && target.st_ino == st.st_ino) LEAVE(0);
    if (replaces && S_ISDIR(target.st_mode) != S_ISDIR(st.st_mode)) LEAVE(S_ISDIR(target.st_mode) ? -EISDIR : -ENOTDIR);
    if (replaces) {
        int error = bury(rt, buried, sizeof buried);
        if (error) LEAVE(error);
    }
    if (renameat(backing, rf, backing, rt) != 0) {
        int error = -errno;
        if (replaces) renameat(backing, buried, backing, rt);
        LEAVE(error);
    }
    LEAVE(record(RENAME, rt, rf, replaces ? buried : NULL, 0, 0));
}

static int op_link(const char *from, const char *to) {
    (void)from;
    (void)to;
    return -EPERM;
}

static int op_chmod(const char *path, mode_t mode, struct fuse_file_info *fi) {
    ENTER
    if (fi && fi->fh) LEAVE(fchmod((int)fi->fh, mode) == 0 ? 0 : -errno);
    if (!path) LEAVE(-ESTALE);
    REL(r, path);
    LEAVE(fchmodat(backing, r, mode, 0) == 0 ? 0 : -errno);
}

static int op_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi) {
    ENTER
    if (fi && fi->fh) LEAVE(fchown((int)fi->fh, uid, gid) == 0 ? 0 : -errno);
    if (!path) LEAVE(-ESTALE);
    REL(r, path);
    LEAVE(fchownat(backing, r, uid, gid, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno);
}

static int op_truncate(const char *path, off_t size, struct fuse_file_info *fi) {
    ENTER
    int fd = -1, own = 0;
    if (fi && fi->fh) {
        fd = (int)fi->fh;
    } else {
        if (!path) LEAVE(-ESTALE);
        REL(r, path);
        fd = openat(backing, r, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) LEAVE(-errno);
        own = 1;
    }
    struct file *f = track(fd);
    int error = f ? file_truncate(f, size) : -ENOMEM;
    if (own) close(fd);
    LEAVE(error);
}

static int op_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi) {
    ENTER
    if (fi && fi->fh) LEAVE(futimens((int)fi->fh, tv) == 0 ? 0 : -errno);
    if (!path) LEAVE(-ESTALE);
    REL(r, path);
    LEAVE(utimensat(backing, r, tv, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno);
}

static int open_common(const char *r, struct fuse_file_info *fi, int flags, mode_t mode, int create) {
    // Always readable and writable underneath: pages are read back to fill partial writes.
    int access = flags & O_ACCMODE;
    int base = (flags & ~(O_ACCMODE | O_TRUNC | O_APPEND | O_DIRECT)) | O_CLOEXEC | O_NOFOLLOW;
    int fd = openat(backing, r, base | O_RDWR, mode);
    if (fd < 0 && errno == EACCES && access == O_RDONLY) fd = openat(backing, r, base | O_RDONLY, mode);
    if (fd < 0) return -errno;
    struct file *f = track(fd);
    if (!f) {
        close(fd);
        return -ENOMEM;
    }
    if (create) {
        struct stat st;
        if (fstat(fd, &st) == 0 && st.st_size == 0) {
            int error = record(CREATE, r, NULL, NULL, st.st_ino, 0);
            if (error) {
                close(fd);
                return error;
            }
        }
    }
    if (flags & O_TRUNC) file_truncate(f, 0);
    f->opens++;
    fi->fh = (uint64_t)fd;
    fi->direct_io = 0;
    // As on a local file system, an open keeps the cached pages: every change goes through this
    // mount's page cache, and dropping it at each open raced with processes that map the file
    // (LMDB's lock file and map, SQLite's -shm).
    fi->keep_cache = 1;
    return 0;
}

static int op_open(const char *path, struct fuse_file_info *fi) {
    ENTER
    REL(r, path);
    LEAVE(open_common(r, fi, fi->flags, 0, 0));
}

static int op_create(const char *path, mode_t mode, struct fuse_file_info *fi) {
    ENTER
    REL(r, path);
    struct stat st;
    int existed = fstatat(backing, r, &st, AT_SYMLINK_NOFOLLOW) == 0;
    LEAVE(open_common(r, fi, fi->flags | O_CREAT, mode, !existed));
}

static struct file *handle(struct fuse_file_info *fi) {
    struct stat st;
    if (fstat((int)fi->fh, &st) != 0) return NULL;
    return file_for(st.st_ino);
}

static int op_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)path;
    ENTER
    struct file *f = handle(fi);
    if (!f) LEAVE(-EIO);
    LEAVE(file_read(f, buf, size, off));
}

static int op_write(const char *path, const char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)path;
    ENTER
    struct file *f = handle(fi);
    if (!f) LEAVE(-EIO);
    if (size > INT_MAX) size = INT_MAX;
    LEAVE(file_write(f, buf, size, off));
}

static int op_statfs(const char *path, struct statvfs *st) {
    (void)path;
    ENTER
    LEAVE(fstatvfs(backing, st) == 0 ? 0 : -errno);
}

static int op_release(const char *path, struct fuse_file_info *fi) {
    (void)path;
    pthread_mutex_lock(&lock);
    struct file *f = handle(fi);
    if (f && f->opens > 0) f->opens--;
    close((int)fi->fh);
    pthread_mutex_unlock(&lock);
    return 0;
}

static int op_fsync(const char *path, int datasync, struct fuse_file_info *fi) {
    (void)path;
    (void)datasync;
    ENTER
    struct file *f = handle(fi);
    if (!f) LEAVE(-EIO);
    LEAVE(file_sync(f));
}

static int op_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi) {
    (void)datasync;
    (void)fi;
    ENTER
    if (!path) LEAVE(0);
    REL(r, path);
    commit_dir(r);
    LEAVE(0);
}

static int op_fallocate(const char *path, int mode, off_t off, off_t len, struct fuse_file_info *fi) {
    (void)path;
    ENTER
    if (mode) LEAVE(-EOPNOTSUPP);
    struct file *f = handle(fi);
    if (!f) LEAVE(-EIO);
    if (off + len > f->size) f->size = off + len;
    LEAVE(0);
}

static int op_access(const char *path, int mask) {
    ENTER
    REL(r, path);
    LEAVE(faccessat(backing, r, mask, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno);
}

static void *op_init(struct fuse_conn_info *conn, struct fuse_config *cfg) {
    // Nothing changes the backing files behind this mount's back, so the kernel's page cache is
    // always right and need never be dropped while the mount lives (a power loss ends the mount).
    // libfuse asks by default to drop a file's cached pages whenever an attribute fetch sees a new
    // mtime, which with attr_timeout 0 is any stat after a write. A dropped page is wrong when it
    // is faulted in again while a write of it is still on its way here (the kernel unlocks a
    // fully written page before sending it): it then holds the old bytes for good, and LMDB's next
    // writer copies them (registry damage in 5 of 39 seeds when opens dropped pages, about 1 in
    // 160-317 with this). coherence.c shows it; a disk never drops pages, so neither does powerfs.
    conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
    if (conn->capable & FUSE_CAP_EXPLICIT_INVAL_DATA) conn->want |= FUSE_CAP_EXPLICIT_INVAL_DATA;
    cfg->use_ino = 1;
    cfg->hard_remove = 1;
    // Not nullpath_ok: with it, the power-loss runs crashed powerfs and lost synced data (not
    // analyzed). So fstat of an open file that was unlinked or renamed over fails with ESTALE
    // here, where a disk answers: nothing in the runs does that to a group file.
    cfg->entry_timeout = 0;
    cfg->attr_timeout = 0;
    cfg->negative_timeout = 0;
    cfg->direct_io = 0;
    cfg->kernel_cache = 1;
    return NULL;
}

// A clean unmount is a shutdown: everything becomes durable.
static void op_destroy(void *unused) {
    (void)unused;
    pthread_mutex_lock(&lock);
    if (!dead) {
        for (struct file *f = files; f; f = f->next) file_sync(f);
        while (dirops) {
            struct dirop *op = dirops;
            dirops = op->next;
            if (op->buried) forget_buried(op->buried);
            free_op(op);
        }
        syncfs(backing);
    }
    pthread_mutex_unlock(&lock);
}

static const struct fuse_operations ops = {
    .getattr = op_getattr,
    .readlink = op_readlink,
    .mknod = op_mknod,
    .mkdir = op_mkdir,
    .unlink = op_unlink,
    .rmdir = op_rmdir,
    .symlink = op_symlink,
    .rename = op_rename,
    .link = op_link,
    .chmod = op_chmod,
    .chown = op_chown,
    .truncate = op_truncate,
    .open = op_open,
    .read = op_read,
    .write = op_write,
    .statfs = op_statfs,
    .release = op_release,
    .fsync = op_fsync,
    .readdir = op_readdir,
    .fsyncdir = op_fsyncdir,
    .init = op_init,
    .destroy = op_destroy,
    .access = op_access,
    .create = op_create,
    .utimens = op_utimens,
    .fallocate = op_fallocate,
};

int main(int argc, char *argv[]) {
    if (argc < 4) {
        fprintf(stderr, "usage: powerfs BACKING MOUNTPOINT SEED [fuse options]\n");
        return 2;
    }
    backing = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (backing < 0) {
        fprintf(stderr, "error: cannot open the backing directory %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    char *end = NULL;
    rng = strtoull(argv[3], &end, 10) * 0x9E3779B97F4A7C15ULL + 1;
    if (!*argv[3] || !end || *end) {
        fprintf(stderr, "error: the seed must be a number, not '%s'\n", argv[3]);
        return 2;
    }
    // Graves left by a run that lost power were undone or are durable deletions: empty it.
    mkdirat(backing, GRAVEYARD, 0700);
    int grave = openat(backing, GRAVEYARD, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (grave >= 0) {
        DIR *d = fdopendir(grave);
        struct dirent *e;
        while (d && (e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlinkat(grave, e->d_name, 0);
        if (d) closedir(d);
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    pthread_t thread;
    pthread_create(&thread, NULL, control, NULL);
    // fuse_main(argv without BACKING and SEED): program MOUNTPOINT options...
    char **args = calloc((size_t)argc, sizeof *args);
    if (!args) return 1;
    int n = 0;
    args[n++] = argv[0];
    args[n++] = argv[2];
    for (int i = 4; i < argc; i++) args[n++] = argv[i];
    return fuse_main(n, args, &ops, NULL);
}
