#!/usr/bin/env bash
# Runs every test: the Swift tests (unit, invariants, real multi-process), then the scripted
# scenarios when there are any. Installs missing Debian packages itself when run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
. Scripts/lib/setup.sh
sharedstore_ensure_packages

echo "== build (debug, with tests)"
swift build --build-tests 2>&1 | grep -vE '^\[[0-9]+/[0-9]+\]' || true
swift build --build-tests >/dev/null

echo "== swift tests"
swift test --skip-build

if [ -x Scripts/scenarios/run.sh ]; then
    echo "== scenarios"
    Scripts/scenarios/run.sh
fi
