#!/usr/bin/env bash
# The structure issues 10 and 21 set, checked: formatting (swift-format); lines of at most 120
# characters in Sources and Tests; bodies of at most 60 lines in Sources (functions, computed
# properties, closures outside functions, a file's top-level code: Scripts/lib/function_lengths.py);
# no SQL text outside the SQL owners (SharedStoreCore/SQL for SQLite, SharedStorePostgres for the
# mirror's server; the SQLite wrapper's transaction control and storebench's raw baseline aside);
# no sqlite3_/mdb_ call outside the C wrappers (and the raw baseline); doc comments on at least 90%
# of the public declarations `import SharedStore` brings (Scripts/lib/doc_coverage.py).
set -euo pipefail
cd "$(dirname "$0")/.."
. Scripts/lib/setup.sh
status=0
fail() { echo "lint: $*" >&2; status=1; }

bash Scripts/format.sh --check || fail "files are not formatted: run Scripts/format.sh"
swift_files=$(find Sources Tests -name '*.swift')
long_lines=$(awk 'length > 120 { print FILENAME ":" FNR ": " length " characters" }' $swift_files)
[ -z "$long_lines" ] || fail "lines over 120 characters:"$'\n'"$long_lines"
python3 Scripts/lib/function_lengths.py 60 $(find Sources -name '*.swift') || fail "functions, closures or top-level code over 60 lines (above)"
# The public declarations of the modules `import SharedStore` re-exports carry doc comments: at
# least 90% of them, the issue says; every one is, so lint holds it at 100% (a comment removed, or a
# public declaration added without one, fails; `python3 Scripts/lib/doc_coverage.py --list` names them).
coverage=$(python3 Scripts/lib/doc_coverage.py 100 2>&1) || fail "doc coverage below 100%:"$'\n'"$coverage"
sql=$(python3 Scripts/lib/sql_outside.py $(find Sources -name '*.swift') || true)
[ -z "$sql" ] || fail "SQL outside SharedStoreCore/SQL:"$'\n'"$sql"
calls=$( (grep -rnE '\b(sqlite3|mdb)_[a-z0-9_]+\s*\(' Sources --include=*.swift \
        | grep -v -e '^Sources/SharedStoreSQLite/' -e '^Sources/SharedStoreLMDB/' -e '^Sources/storebench/Baseline'
        grep -rnE '\bPQ[a-zA-Z0-9]+\b' Sources --include=*.swift | grep -v -e '^Sources/SharedStorePostgres/') || true)
[ -z "$calls" ] || fail "C calls outside the wrappers:"$'\n'"$calls"
# Every Swift block of README.md is compiled and run by Tests/SharedStoreTests/ReadmeTests.swift:
# each must be there line for line (indented 8 spaces), so the README cannot drift from the code.
readme=$(python3 - <<'PY'
import re
readme = open("README.md").read()
test = open("Tests/SharedStoreTests/ReadmeTests.swift").read().split("\n")
for n, block in enumerate(re.findall(r"```swift\n(.*?)```", readme, re.S), 1):
    want = [("        " + l) if l.strip() else "" for l in block.rstrip("\n").split("\n")]
    if not any(test[i:i + len(want)] == want for i in range(len(test))):
        print("README.md Swift block %d (%s) is not in ReadmeTests.swift word for word" % (n, want[0].strip()))
PY
)
[ -z "$readme" ] || fail "$readme"
# A compiler warning is a defect: the sources build with warnings as errors (a build of their
# own, so that the everyday build is not rebuilt with other flags).
if ! warnings=$(swift build --build-tests --build-path .build/lint -Xswiftc -warnings-as-errors 2>&1); then
    fail "the sources do not build without warnings:"$'\n'"$(grep -E 'error:|warning:' <<<"$warnings" | sort -u | head -20)"
fi
[ "$status" -eq 0 ] && echo "lint: no compiler warning; formatted; no line over 120, no function, closure or top-level code over 60 lines; $(tail -1 <<<"$coverage" | sed "s/^in all: //"); SQL and C calls in their layers; README blocks tested"
exit "$status"
