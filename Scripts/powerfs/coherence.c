// coherence: checks that a file system shows a process, through its shared mapping, the page it
// has just written with pwrite, while other processes read the mapping and stat the file.
//
// LMDB works exactly so: a writer writes its pages (whole, and its meta pages in part) with pwrite and the next writer reads them
// back through its read-only map to copy them. A FUSE file system in write-through mode unlocks
// a fully written page before the daemon has stored it; if the kernel then drops the page (as
// libfuse's auto_inval_data does when a stat sees a new mtime) and a reader faults it in again,
// the daemon answers with the old bytes and the page cache keeps them. powerfs with
// auto_inval_data showed that stale page about 3 times a second here, and the registry damage of
// issue 20 (an LMDB page holding an entry of the page's previous use) came from it. powerfs must
// never show it; the power-loss scenario runs this check on powerfs before its seeds.
//
// It is a test tool (built by Scripts/lib/powerloss.py), never part of the library.
//
// Usage: coherence FILE SECONDS — exit 0 when every read-back was the page just written, 1 with
// the first stale pages named when one was not, 2 when the check cannot run.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGES 16
#define PAGE 4096
#define WORDS (PAGE / 8)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int fail(const char *what, const char *path) {
    fprintf(stderr, "error: %s %s: %s\n", what, path, strerror(errno));
    return 2;
}

// A helper process until `end`: reader != 0 faults every page of the mapping in, again and
// again; otherwise it stats the file in a loop (each stat fetches the attributes anew).
static void helper(const char *path, int reader, double end) {
    if (reader) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) _exit(2);
        const volatile uint64_t *map = mmap(NULL, PAGES * PAGE, PROT_READ, MAP_SHARED, fd, 0);
        if (map == MAP_FAILED) _exit(2);
        uint64_t sum = 0;
        while (now() < end)
            for (int p = 0; p < PAGES; p++) sum += map[p * WORDS];
        _exit(sum == 1 ? 3 : 0);  // uses sum, so the reads are not optimized away
    }
    struct stat st;
    while (now() < end) stat(path, &st);
    _exit(0);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: coherence FILE SECONDS\n");
        return 2;
    }
    const char *path = argv[1];
    char *rest = NULL;
    double seconds = strtod(argv[2], &rest);
    if (!*argv[2] || *rest || !(seconds > 0 && seconds <= 3600)) {
        fprintf(stderr, "error: SECONDS must be a number of seconds up to 3600, not '%s'\n", argv[2]);
        return 2;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return fail("cannot create", path);
    static uint64_t page[WORDS];
    for (int p = 0; p < PAGES; p++)
        if (pwrite(fd, page, PAGE, (off_t)p * PAGE) != PAGE) return fail("cannot write", path);
    if (fsync(fd) != 0) return fail("cannot sync", path);
    const volatile uint64_t *map = mmap(NULL, PAGES * PAGE, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) return fail("cannot map", path);

    double end = now() + seconds;
    pid_t helpers[2];
    for (int k = 0; k < 2; k++) {
        helpers[k] = fork();
        if (helpers[k] < 0) return fail("cannot fork a helper for", path);
        if (helpers[k] == 0) helper(path, k == 0, end);
    }
    uint64_t writes = 0, stale = 0;
    while (now() < end) {
        writes++;
        int p = (int)(writes % PAGES);
        for (int w = 0; w < WORDS; w++) page[w] = writes;
        // Whole pages, as LMDB writes its tree pages, and every third write a part of one, as it
        // writes a meta page (words 2 to 19 here).
        size_t length = writes % 3 ? PAGE : 18 * 8;
        off_t offset = (off_t)p * PAGE + (writes % 3 ? 0 : 2 * 8);
        if (pwrite(fd, page, length, offset) != (ssize_t)length) return fail("cannot write", path);
        uint64_t seen = map[p * WORDS + 2];
        if (seen != writes) {
            stale++;
            if (stale <= 5)
                fprintf(stderr, "stale: page %d read %llu through the mapping right after pwrite wrote %llu\n", p,
                        (unsigned long long)seen, (unsigned long long)writes);
        }
        // A sync now and then moves the file's mtime, as a registry commit does.
        if (writes % 8 == 0 && fdatasync(fd) != 0) return fail("cannot sync", path);
    }
    for (int k = 0; k < 2; k++) {
        int status = 0;
        waitpid(helpers[k], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "error: a helper of the check failed (status %d)\n", status);
            return 2;
        }
    }
    printf("coherence: %llu page writes, %llu read back stale through the mapping\n", (unsigned long long)writes,
           (unsigned long long)stale);
    return stale ? 1 : 0;
}
