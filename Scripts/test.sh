#!/usr/bin/env bash
# Runs every test: the Swift tests (unit, invariants, real multi-process), the documentation
# site's build and browser check, a storebench smoke run, a short fuzz run of every parser, then
# the scripted scenarios. Installs missing Debian packages itself when run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
. Scripts/lib/setup.sh
sharedstore_ensure_packages

echo "== build (debug, with tests)"
# One build; its progress lines are left out, its errors and warnings shown, its status kept.
set +e
swift build --build-tests 2>&1 | grep -vE '^\[[0-9]+/[0-9]+\]'
build_status=${PIPESTATUS[0]}
set -e
[ "$build_status" -eq 0 ] || { echo "error: the build failed" >&2; exit 1; }

echo "== lint (formatting, line and function lengths, doc coverage, SQL and C calls in their layers)"
bash Scripts/lint.sh

echo "== docs (the DocC site: broken links fail the build; headless chromium renders its pages)"
bash Scripts/docs.sh

echo "== PostgreSQL for the mirror's tests (a real server in a temporary directory)"
. Scripts/lib/postgres.sh
sharedstore_postgres_start
trap sharedstore_postgres_stop EXIT

echo "== swift tests"
env -u SHAREDSTORE_CHAOS_SECONDS swift test --skip-build

# It stops and starts the server: alone, after the others. A short run of every kind of step
# (Scripts/stress.sh --mirror runs them for 10 minutes; see README, "Beyond one machine").
echo "== the mirror's randomized convergence test (${SHAREDSTORE_CHAOS_SECONDS:-15} s; it prints its seed)"
SHAREDSTORE_CHAOS_SECONDS="${SHAREDSTORE_CHAOS_SECONDS:-15}" SHAREDSTORE_CHAOS_SKIP="${SHAREDSTORE_CHAOS_SKIP-}" \
    swift test --skip-build --filter MirrorChaosTests

echo "== storebench smoke run (a few hundred operations; no timing is asserted)"
bin="$(swift build --show-bin-path)"
"$bin/storebench" --smoke --json >"${TMPDIR:-/tmp}/storebench-smoke.jsonl"
python3 - "${TMPDIR:-/tmp}/storebench-smoke.jsonl" <<'PY'
import json, sys
cases = [json.loads(l)["case"] for l in open(sys.argv[1]) if l.strip()]
want = ["save-history", "save-no-history", "save-history-durable", "batch-insert", "update-property",
        "history-fetch-1k", "history-fetch-1m",
        "latency", "cleaner", "catch-up-memory", "writers-1", "writers-2", "writers-4", "writers-8",
        "query-indexed", "share-batch-1m", "share-batch-1m-newest", "list-1m", "widget-show-1m", "live-query-latency",
        "migrate-add-attribute-1m", "mirror-latency", "mirror-throughput", "save-history-mirrored",
        "save-history-watched", "query-range", "query-prefix", "record-fetch", "batch-insert-full-model",
        "share-batch-1m-categories", "mirror-space-throughput", "mirror-bootstrap-1m",
        "mirror-spaces-server"]
missing = [c for c in want if c not in cases]
if missing:
    sys.exit("storebench smoke run lacks cases: %s" % missing)
print("storebench: every case ran")
PY

echo "== release build: the executables as Scripts/demo.sh builds them (the tests run a debug build)"
# A bug only a release build has once crashed every open (a task-local bound across modules).
swift build -c release 2>&1 | grep -vE '^\[[0-9]+/[0-9]+\]' | tail -n 3
rel="$(swift build -c release --show-bin-path)"
smoke="$(mktemp -d)"
mkdir -m 700 "$smoke/g"
release_group=(--group "$smoke/g" --json)
"$rel/share-extension" share --url https://release.example/1 --title one --model-version 1 "${release_group[@]}" >/dev/null
"$rel/main-app" sync "${release_group[@]}" >/dev/null   # migrates the store to the newest model
"$rel/widget" show "${release_group[@]}" >/dev/null
"$rel/main-app" list "${release_group[@]}" | grep -q release.example
"$rel/storectl" verify "${release_group[@]}" >/dev/null
"$rel/history-cleaner" "${release_group[@]}" >/dev/null
rm -rf "$smoke"
echo "release: share, a migrating sync, show, list, verify and clean ran"

echo "== fuzz: a short run of every target (Scripts/fuzz.sh SECONDS for longer)"
bash Scripts/fuzz.sh "${SHAREDSTORE_FUZZ_SECONDS:-5}"

if [ -x Scripts/scenarios/run.sh ]; then
    echo "== scenarios"
    Scripts/scenarios/run.sh
fi
