#!/usr/bin/env bash
# The Swift tests under AddressSanitizer, then under ThreadSanitizer (each in its own build
# directory, so that the ordinary build stays as it is). Any sanitizer report fails the run.
#   Scripts/sanitize.sh [address|thread]...   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
. Scripts/lib/setup.sh
sharedstore_ensure_packages

kinds=("$@"); [ ${#kinds[@]} -eq 0 ] && kinds=(address thread)
for kind in "${kinds[@]}"; do
    case "$kind" in address|thread) ;; *) echo "error: unknown sanitizer '$kind' (address or thread)" >&2; exit 2 ;; esac
    scratch=".build/sanitize-$kind"
    log="${TMPDIR:-/tmp}/sharedstore-sanitize-$kind.log"
    echo "== $kind sanitizer: build"
    swift build --build-tests --sanitize="$kind" --scratch-path "$scratch" 2>&1 | grep -E 'error|warning: .*sanitiz' || true
    swift build --build-tests --sanitize="$kind" --scratch-path "$scratch" >/dev/null
    echo "== $kind sanitizer: swift tests (log: $log)"
    # halt_on_error: the first report ends the process that made it, and so fails its test.
    status=0
    ASAN_OPTIONS="halt_on_error=1:detect_leaks=0" TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" \
        swift test --skip-build --sanitize="$kind" --scratch-path "$scratch" >"$log" 2>&1 || status=$?
    tail -n 3 "$log"
    if grep -qE 'ERROR: (AddressSanitizer|ThreadSanitizer)|WARNING: ThreadSanitizer' "$log"; then
        echo "error: the $kind sanitizer reported problems; see $log" >&2
        grep -E -A12 'ERROR: (AddressSanitizer|ThreadSanitizer)|WARNING: ThreadSanitizer' "$log" | head -60 >&2
        exit 1
    fi
    [ "$status" -eq 0 ] || { echo "error: tests failed under the $kind sanitizer; see $log" >&2; exit 1; }
    echo "$kind sanitizer: 0 reports"
done
