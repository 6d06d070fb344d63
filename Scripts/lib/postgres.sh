# Sourced by the scripts: a real PostgreSQL server for the mirror's tests (issue 14), started
# in a temporary directory, listening only on a Unix socket there, stopped when the script ends.
# Installs Debian's postgresql and libpq-dev when they are missing and the script runs as root.
# Exports PGHOST (the socket directory), PGPORT, PGUSER and PGDATABASE: libpq's standard
# environment, so nothing secret ever goes on a command line. The tests run it with fsync off
# (a throwaway server); SHAREDSTORE_PG_FSYNC=on gives PostgreSQL's durable default (the benchmark).

sharedstore_postgres_bin() {
    local dir
    # The directory pg_ctl really is in (a symlink in /usr/local/bin leaves psql and pg_basebackup out).
    for dir in "$(dirname "$(readlink -f "$(command -v pg_ctl 2>/dev/null || echo /nonexistent/pg_ctl)")")" \
        /usr/lib/postgresql/*/bin; do
        if [ -x "$dir/pg_ctl" ] && [ -x "$dir/initdb" ]; then echo "$dir"; return 0; fi
    done
    return 1
}

sharedstore_postgres_start() {
    if ! sharedstore_postgres_bin >/dev/null || [ ! -f /usr/include/postgresql/libpq-fe.h ]; then
        if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
            echo "installing postgresql libpq-dev (Debian packages)" >&2
            DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql libpq-dev >&2
        else
            echo "error: PostgreSQL is missing; install it with: sudo apt-get install postgresql libpq-dev" >&2
            return 1
        fi
    fi
    local bin
    bin="$(sharedstore_postgres_bin)" || { echo "error: no initdb/pg_ctl found after installing postgresql" >&2; return 1; }
    SHAREDSTORE_PG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/sharedstore-pg.XXXXXX")"
    chmod 755 "$SHAREDSTORE_PG_DIR"
    # The server refuses to run as root: as root it runs as the postgres user.
    local as=()
    if [ "$(id -u)" -eq 0 ]; then
        id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
        chown postgres "$SHAREDSTORE_PG_DIR"
        as=(runuser -u postgres --)
    fi
    local user
    user="$([ "$(id -u)" -eq 0 ] && echo postgres || id -un)"
    "${as[@]}" "$bin/initdb" -D "$SHAREDSTORE_PG_DIR/data" -U "$user" -A trust --no-sync >"$SHAREDSTORE_PG_DIR/initdb.log" 2>&1 \
        || { cat "$SHAREDSTORE_PG_DIR/initdb.log" >&2; return 1; }
    "${as[@]}" "$bin/pg_ctl" -D "$SHAREDSTORE_PG_DIR/data" -l "$SHAREDSTORE_PG_DIR/server.log" -w -t 60 \
        -o "-c listen_addresses='' -k $SHAREDSTORE_PG_DIR -c fsync=${SHAREDSTORE_PG_FSYNC:-off}" start >/dev/null \
        || { cat "$SHAREDSTORE_PG_DIR/server.log" >&2; return 1; }
    SHAREDSTORE_PG_BIN="$bin"
    SHAREDSTORE_PG_AS="${as[*]}"
    export PGHOST="$SHAREDSTORE_PG_DIR" PGPORT=5432 PGUSER="$user" PGDATABASE=postgres
    # For tests that stop and start the server (the mirror's randomized convergence test).
    export SHAREDSTORE_PG_BIN SHAREDSTORE_PG_AS SHAREDSTORE_PG_DIR
    echo "PostgreSQL $("$bin/pg_ctl" --version | awk '{print $3}') on $PGHOST" >&2
}

sharedstore_postgres_stop() {
    [ -n "${SHAREDSTORE_PG_DIR:-}" ] || return 0
    # shellcheck disable=SC2086 # the runuser prefix is several words or none
    $SHAREDSTORE_PG_AS "$SHAREDSTORE_PG_BIN/pg_ctl" -D "$SHAREDSTORE_PG_DIR/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$SHAREDSTORE_PG_DIR"
    SHAREDSTORE_PG_DIR=""
}
