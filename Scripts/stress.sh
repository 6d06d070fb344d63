#!/usr/bin/env bash
# The long soak: writers, consumers and the cleaner as real processes, one killed with -9 every
# second, then every invariant checked. Defaults: 8 writers, 3 consumers, 10 minutes.
#   Scripts/stress.sh [storectl stress flags…]   e.g. --seconds 60 --seed 42
#   Scripts/stress.sh --mirror [SECONDS]            the mirror's randomized convergence test
#     (three machines, a real PostgreSQL server; 600 s by default; SHAREDSTORE_CHAOS_SEED
#     replays a seed, SHAREDSTORE_CHAOS_SKIP=rename,restore leaves kinds of step out), then
#     1,000 spaces of three machines each on one server (SHAREDSTORE_SPACES sets how many)
#   Scripts/stress.sh --power-loss [SECONDS]        power losses on a file system that forgets what
#     was not synced (Scripts/powerfs), seed after seed for 600 s by default, a fifth of them
#     durable; each seed is printed (root and /dev/fuse needed)
set -euo pipefail
cd "$(dirname "$0")/.."
. Scripts/lib/setup.sh
sharedstore_ensure_packages
if [ "${1:-}" = "--power-loss" ]; then
    swift build 2>&1 | tail -n 1 >&2
    . Scripts/lib/postgres.sh
    sharedstore_postgres_start
    trap sharedstore_postgres_stop EXIT
    seconds="${2:-600}"
    out="${TMPDIR:-/tmp}/sharedstore-powerloss-$$.jsonl"
    status=0
    # First: powerfs shows a writer the pages it wrote through its mapping (see Scripts/powerfs/coherence.c).
    python3 Scripts/lib/powerloss.py --coherence 10 || status=1
    python3 Scripts/lib/powerloss.py --bin "$(swift build --show-bin-path)" --mirror \
        --seconds "$((seconds * 4 / 5))" >"$out" || status=1
    python3 Scripts/lib/powerloss.py --bin "$(swift build --show-bin-path)" --mirror --durable \
        --seconds "$((seconds / 5))" >>"$out" || status=1
    python3 Scripts/lib/powerloss_report.py "$out"
    exit "$status"
fi
if [ "${1:-}" = "--mirror" ]; then
    swift build --build-tests 2>&1 | tail -n 1 >&2
    . Scripts/lib/postgres.sh
    sharedstore_postgres_start
    trap sharedstore_postgres_stop EXIT
    status=0
    SHAREDSTORE_CHAOS_SECONDS="${2:-600}" swift test --skip-build --filter MirrorChaosTests || status=1
    # One server holding 1,000 spaces of three machines each, each converging (issue 25).
    SHAREDSTORE_SPACES="${SHAREDSTORE_SPACES:-1000}" swift test --skip-build \
        --filter MirrorSpacesTests.manySpacesOfThreeMachinesEachConverge || status=1
    exit "$status"
fi
swift build -c release 2>&1 | tail -n 1 >&2
bin="$(swift build -c release --show-bin-path)"
report="${SHAREDSTORE_STRESS_REPORT:-stress-report}"
echo "the report page: $report/index.html" >&2
exec "$bin/storectl" stress --writers 8 --consumers 3 --seconds 600 --kill-every 1000 --clean-every 500 --report "$report" "$@"
