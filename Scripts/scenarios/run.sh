#!/usr/bin/env bash
# Runs every numbered scenario against the built executables; prints "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
export BIN="${BIN:-$(swift build --show-bin-path)}"
passed=0; failed=0
for scenario in Scripts/scenarios/[0-9][0-9]-*.sh; do
    name="$(basename "$scenario" .sh)"
    echo "-- $name"
    if bash "$scenario"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "-- $name FAILED"; fi
done
echo "scenarios: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
