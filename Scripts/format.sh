#!/usr/bin/env bash
# Formats Sources, Tests and Package.swift with the toolchain's swift-format (.swift-format:
# 4 spaces, lines of at most 120 characters).
#   Scripts/format.sh           rewrite the files in place
#   Scripts/format.sh --check   change nothing; fail on any file that is not formatted
set -euo pipefail
cd "$(dirname "$0")/.."
. Scripts/lib/setup.sh
case "${1:-}" in
    "") swift format format -i -r --configuration .swift-format Sources Tests Package.swift ;;
    --check) swift format lint -r --strict --configuration .swift-format Sources Tests Package.swift ;;
    *) echo "error: unknown argument '$1' (use --check)" >&2; exit 2 ;;
esac
