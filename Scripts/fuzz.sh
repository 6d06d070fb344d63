#!/usr/bin/env bash
# Fuzzes the parsers of outside input with libFuzzer (in the Swift toolchain) under
# AddressSanitizer: the history-blob decoder, the token and object-id parsers, the share-batch
# parser, the argument parser and the mirror's payload decoder. Each starts from its seed corpus
# in Tests/FuzzCorpus/TARGET (copied: the committed corpus is never changed) and runs SECONDS
# (default 60) seconds.
# A crash, a hang (over 10 s for one input) or an allocation over 512 MB fails the run and keeps
# the input that did it.
#   Scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
. Scripts/lib/setup.sh
sharedstore_ensure_packages

seconds="${1:-60}"
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "error: SECONDS must be a whole number, not '$seconds'" >&2; exit 2; }
shift || true
targets=("$@"); [ ${#targets[@]} -eq 0 ] && targets=(history-blob token object-id share-batch arguments mirror-payload json)

echo "== fuzz: build (libFuzzer + AddressSanitizer)"
flags=(--product sharedstore-fuzz --scratch-path .build/fuzz -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING
       -Xlinker --export-dynamic-symbol=LLVMFuzzerRunDriver)
swift build "${flags[@]}" 2>&1 | grep -E 'error:' || true
swift build "${flags[@]}" >/dev/null
fuzzer="$(swift build "${flags[@]}" --show-bin-path)/sharedstore-fuzz"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failed=0
for target in "${targets[@]}"; do
    seeds="Tests/FuzzCorpus/$target"
    [ -d "$seeds" ] || { echo "error: no seed corpus $seeds" >&2; exit 2; }
    mkdir -p "$work/$target/corpus" "$work/$target/artifacts"
    cp "$seeds"/* "$work/$target/corpus/"
    status=0
    SHAREDSTORE_FUZZ_TARGET="$target" ASAN_OPTIONS="detect_leaks=0" "$fuzzer" "$work/$target/corpus" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512 -print_final_stats=1 \
        -artifact_prefix="$work/$target/artifacts/" >"$work/$target/log" 2>&1 || status=$?
    runs="$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$work/$target/log" | grep -oE '[0-9]+$' || echo 0)"
    if [ "$status" -ne 0 ] || ls "$work/$target/artifacts"/* >/dev/null 2>&1; then
        keep="${TMPDIR:-/tmp}/sharedstore-fuzz-$target-$(date +%s)"
        mkdir -p "$keep"; cp -r "$work/$target/artifacts" "$work/$target/log" "$keep/"
        echo "fuzz $target: FAILED after $runs runs (exit $status); input and log kept in $keep"
        grep -E 'ERROR|SUMMARY|Fatal|deadly|timeout|out-of-memory' "$work/$target/log" | head -5
        failed=$((failed + 1))
    else
        echo "fuzz $target: $runs runs in ${seconds}s, no crash, no hang, no allocation over 512 MB"
    fi
done
[ "$failed" -eq 0 ]
