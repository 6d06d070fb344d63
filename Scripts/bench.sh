#!/usr/bin/env bash
# Runs storebench (release) and writes BENCHMARKS.md and bench/chart.svg.
#   Scripts/bench.sh            the full run (a few minutes)
#   Scripts/bench.sh --quick    about a minute
set -euo pipefail
cd "$(dirname "$0")/.."
. Scripts/lib/setup.sh
sharedstore_ensure_packages
command -v python3 >/dev/null || { echo "error: python3 is needed to write the report" >&2; exit 1; }

args=()
for a in "$@"; do
    case "$a" in
        --quick) args+=(--quick) ;;
        *) echo "error: unknown argument '$a' (use --quick)" >&2; exit 2 ;;
    esac
done
# The code measured, named in the report: the commit, and whether the sources differed from it.
code="commit $(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
[ -z "$(git status --porcelain -- Sources Package.swift 2>/dev/null)" ] || code="$code, with uncommitted changes to Sources"
export SHAREDSTORE_BENCH_CODE="$code"
echo "== building storebench and the targets it runs as processes (release)"
swift build -c release 2>&1 | tail -n 1
bin="$(swift build -c release --show-bin-path)"
echo "== PostgreSQL for the mirror cases (a real server in a temporary directory)"
. Scripts/lib/postgres.sh
SHAREDSTORE_PG_FSYNC=on sharedstore_postgres_start
trap sharedstore_postgres_stop EXIT
mkdir -p bench
echo "== running storebench ${args[*]:-}"
"$bin/storebench" --json "${args[@]}" | tee bench/results.jsonl
if [ ${#args[@]} -eq 0 ]; then
    # People compare quick runs: the report sets the quick ratios beside the full ones.
    echo "== running storebench --quick, to compare its ratios with the full run's"
    "$bin/storebench" --json --quick | tee bench/results-quick.jsonl
    # The saves again with every store in memory, where neither side waits for the disk: the
    # report sets these ratios beside the ones on the disk (why save ratios move between machines).
    rm -f bench/results-memory.jsonl
    memory="$(mktemp -d /dev/shm/storebench.XXXXXX 2>/dev/null || true)"
    if [ -n "$memory" ]; then
        echo "== running the save cases with the stores in memory ($memory)"
        TMPDIR="$memory" "$bin/storebench" --json --cases save-history,save-no-history,update-property \
            | tee bench/results-memory.jsonl
        rm -rf "$memory"
    fi
    # "save-history and update-property do not drop": their goals came from build 741c53e on
    # this machine at another speed. That build runs here beside this one, turn by turn, and the
    # report compares the two in the same run.
    reference=741c53e
    echo "== the save cases of build $reference beside this build's (Scripts/bench-against.sh)"
    if ! Scripts/bench-against.sh "$reference" --runs 10 --out bench/against.jsonl; then
        echo "warning: the reference build $reference could not be run: no same-run comparison" >&2
        rm -f bench/against.jsonl
    fi
fi
echo "== the failover window: Scripts/scenarios/18-failover.sh on the release build, the primary with fsync on"
if out="$(BIN="$bin" SHAREDSTORE_PG_FSYNC=on bash Scripts/scenarios/18-failover.sh 2>&1)"; then
    printf '%s\n' "$out" | sed -n 's/.*ok: failover window: //p' | head -n 1 >bench/failover.txt
    rm -f bench/failover-failed.log
else
    # The whole output is kept: its last lines alone do not say which checks failed.
    printf '%s\n' "$out" >bench/failover-failed.log
    printf '%s\n' "$out" | tail -n 5 >&2
    echo "the failover scenario failed (its output: bench/failover-failed.log): no window measured" >bench/failover.txt
fi
cat bench/failover.txt
python3 Scripts/lib/bench_report.py bench/results.jsonl BENCHMARKS.md bench/chart.svg
echo "== wrote BENCHMARKS.md, bench/chart.svg and bench/index.html (the same report as a page)"
