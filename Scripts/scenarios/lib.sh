# Shared helpers of the scenarios: each scenario sources this file, calls `setup`, and uses the
# assert helpers. A scenario runs in its own temporary group directory and ends its processes.

set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
: "${BIN:?BIN must name the directory of the built executables}"
PATH="$BIN:$PATH"
failures=0
children=()

setup() {
    work="$(mktemp -d)"
    export SHAREDSTORE_GROUP="$work/group"
    trap teardown EXIT
}

teardown() {
    local pid
    for pid in "${children[@]:-}"; do
        [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    chmod -R u+rwx "$work" 2>/dev/null || true
    umount "$work"/* 2>/dev/null || true
    rm -rf "$work"
}

# Starts a command in the background, its stdout in FILE; remembers it for teardown.
background() {
    local out="$1"; shift
    "$@" >"$out" 2>"$out.err" &
    children+=("$!")
    last_pid=$!
}

fail() {
    echo "  FAIL: $*" >&2
    failures=$((failures + 1))
}

ok() { echo "  ok: $*"; }

assert_eq() {
    if [ "$1" == "$2" ]; then ok "$3"; else fail "$3: expected '$2', got '$1'"; fi
}

# Evaluates a Python expression over JSON lines on stdin: `j` is the last object, `lines` all.
jq_() { python3 "$here/jsonq.py" "$1"; }

# Every stdout line of a command run with --json is one JSON object.
assert_json_lines() {
    if python3 "$here/jsonq.py" --check <"$1"; then ok "$2: valid JSON lines"; else fail "$2: not JSON lines"; fi
}

# Runs a command expecting exit CODE and exactly one stderr line starting with "error:".
expect_error() {
    local code="$1" what="$2"; shift 2
    local err status=0
    err="$("$@" 2>&1 >/dev/null)" || status=$?
    if [ "$status" -ne "$code" ]; then fail "$what: exit $status, expected $code ($err)"; return; fi
    if [ "$(printf '%s\n' "$err" | wc -l)" -ne 1 ] || [[ "$err" != error:* ]]; then
        fail "$what: stderr is not one 'error:' line: $err"; return
    fi
    ok "$what: exit $code, $err"
}

# Waits until FILE has a line matching PATTERN, at most SECONDS (an event with a deadline).
wait_for_line() {
    local file="$1" pattern="$2" seconds="${3:-30}"
    local deadline=$((SECONDS + seconds))
    until grep -q -- "$pattern" "$file" 2>/dev/null; do
        if [ "$SECONDS" -ge "$deadline" ]; then fail "timed out waiting for '$pattern' in $(basename "$file")"; return 1; fi
        sleep 0.02
    done
}

# Waits until FILE has at least N lines, at most SECONDS.
wait_for_lines() {
    local file="$1" n="$2" seconds="${3:-30}"
    local deadline=$((SECONDS + seconds))
    until [ "$(wc -l <"$file" 2>/dev/null || echo 0)" -ge "$n" ]; do
        if [ "$SECONDS" -ge "$deadline" ]; then fail "timed out waiting for $n lines in $(basename "$file")"; return 1; fi
        sleep 0.02
    done
}

# Waits for a background process to exit, at most SECONDS; returns its status.
wait_exit() {
    local pid="$1" seconds="${2:-60}"
    local deadline=$((SECONDS + seconds))
    while kill -0 "$pid" 2>/dev/null; do
        if [ "$SECONDS" -ge "$deadline" ]; then fail "process $pid still running after ${seconds}s"; kill -9 "$pid"; return 1; fi
        sleep 0.02
    done
    wait "$pid"
}

verify_store() {
    local out
    if out="$(storectl verify --json)"; then ok "storectl verify passes"; else fail "storectl verify failed: $out"; fi
}

finish() {
    if [ "$failures" -eq 0 ]; then exit 0; else echo "  $failures failure(s)" >&2; exit 1; fi
}
