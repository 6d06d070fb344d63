# Sourced by the scripts: finds the Swift toolchain and installs the Debian packages SharedStore
# builds against when they are missing.

if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
    export PATH="/opt/swift/usr/bin:$PATH"
fi
if ! command -v swift >/dev/null 2>&1; then
    echo "error: no Swift toolchain on PATH; install Swift 6 (swift.org) and run again" >&2
    exit 1
fi

sharedstore_ensure_packages() {
    local missing=()
    [ -f /usr/include/sqlite3.h ] || missing+=(libsqlite3-dev)
    [ -f /usr/include/lmdb.h ] || missing+=(liblmdb-dev)
    [ -f /usr/include/postgresql/libpq-fe.h ] || missing+=(libpq-dev)   # the mirror's PostgreSQL client
    command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)       # finds libpq's headers for SwiftPM
    command -v sqlite3 >/dev/null 2>&1 || missing+=(sqlite3)
    command -v mdb_stat >/dev/null 2>&1 || missing+=(lmdb-utils)
    command -v python3 >/dev/null 2>&1 || missing+=(python3)   # the scenarios' JSON checks, the bench report
    command -v setpriv >/dev/null 2>&1 || missing+=(util-linux)
    # The power-loss tests' file system (Scripts/powerfs): FUSE 3, its headers and a C compiler.
    [ -f /usr/include/fuse3/fuse.h ] || missing+=(libfuse3-dev)
    command -v fusermount3 >/dev/null 2>&1 || missing+=(fuse3)
    command -v cc >/dev/null 2>&1 || missing+=(gcc)
    # The documentation site's check in a real browser (Scripts/docs.sh, Scripts/lib/docs_check.py).
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    # storectl top's test drives it as a person would, in a terminal (scenario 17).
    command -v tmux >/dev/null 2>&1 || missing+=(tmux)
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing ${missing[*]} (Debian packages)" >&2
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
    else
        echo "error: missing packages: ${missing[*]}; install them with: sudo apt-get install ${missing[*]}" >&2
        exit 1
    fi
}
