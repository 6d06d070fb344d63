#!/usr/bin/env bash
# The long soak: writers, consumers and the cleaner as real processes, one killed with -9 every
# second, then every invariant checked. Defaults: 8 writers, 3 consumers, 10 minutes.
#   Scripts/stress.sh [storectl stress flags…]   e.g. --seconds 60 --seed 42
#   Scripts/stress.sh --mirror [SECONDS]            the mirror's randomized convergence test
#     (three machines, a real PostgreSQL server; 600 s by default; SHAREDSTORE_CHAOS_SEED
#     replays a seed, SHAREDSTORE_CHAOS_SKIP=rename,restore leaves kinds of step out)
set -euo pipefail
cd "$(dirname "$0")/.."
. Scripts/lib/setup.sh
sharedstore_ensure_packages
if [ "${1:-}" = "--mirror" ]; then
    swift build --build-tests 2>&1 | tail -n 1 >&2
    . Scripts/lib/postgres.sh
    sharedstore_postgres_start
    trap sharedstore_postgres_stop EXIT
    SHAREDSTORE_CHAOS_SECONDS="${2:-600}" swift test --skip-build --filter MirrorChaosTests
    exit
fi
swift build -c release 2>&1 | tail -n 1 >&2
bin="$(swift build -c release --show-bin-path)"
exec "$bin/storectl" stress --writers 8 --consumers 3 --seconds 600 --kill-every 1000 --clean-every 500 "$@"
