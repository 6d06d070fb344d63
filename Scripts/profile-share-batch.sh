#!/usr/bin/env bash
# Where the time of `share-extension share-batch` goes, in instructions a line: callgrind over a batch
# of LINES lines over 100 categories (the shape of storebench's share-batch-1m-categories) into a new
# store on the newest ReadLater model, grouped by step of a line and by kind of code.
#   Scripts/profile-share-batch.sh [--rev REV] [--lines N]
#     --rev    profile that revision instead of this checkout (built in a worktree under
#              ${TMPDIR:-/tmp}, removed after), e.g. the code before a change
#     --lines  lines in the batch (default 100000; callgrind runs about 50 times slower than the
#              process alone)
# Swift hashes with a seed per process; the profile runs with SWIFT_DETERMINISTIC_HASHING=1 so that
# two runs of one build give the same count.
set -euo pipefail
cd "$(dirname "$0")/.."
. Scripts/lib/setup.sh
sharedstore_ensure_packages

usage() { echo "usage: Scripts/profile-share-batch.sh [--rev REV] [--lines N]" >&2; exit 2; }
rev=""
lines=100000
while [ $# -gt 0 ]; do
    case "$1" in
        --rev) [ $# -ge 2 ] || usage; rev="$2"; shift 2 ;;
        --lines) [ $# -ge 2 ] || usage; lines="$2"; shift 2 ;;
        *) echo "error: unknown argument '$1'" >&2; usage ;;
    esac
done
[[ "$lines" =~ ^[1-9][0-9]{0,7}$ ]] || { echo "error: --lines takes 1 to 99999999, not '$lines'" >&2; exit 2; }
if ! command -v valgrind >/dev/null 2>&1 || ! command -v callgrind_annotate >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing valgrind (Debian package)" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >&2
    else
        echo "error: valgrind is needed; install it with: sudo apt-get install valgrind" >&2
        exit 1
    fi
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/profile-share-batch.XXXXXX")"
tree=""
cleanup() {
    rm -rf "$work"
    if [ -n "$tree" ]; then git worktree remove --force "$tree" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
source_dir="$PWD"
if [ -n "$rev" ]; then
    commit="$(git rev-parse --verify --quiet "$rev^{commit}")" || { echo "error: '$rev' names no commit here" >&2; exit 2; }
    tree="$work/tree"
    git worktree add --detach "$tree" "$commit" >/dev/null
    source_dir="$tree"
fi
echo "== building share-extension (release) of ${rev:-this checkout}"
(cd "$source_dir" && swift build -c release --product share-extension 2>&1 | tail -n 1)
bin="$(cd "$source_dir" && swift build -c release --show-bin-path)/share-extension"

python3 -c '
import sys
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        f.write(f"https://bench.example/{i}\tarticle number {i}\tcategory {i % 100}\n")
' "$work/batch.tsv" "$lines"
mkdir -m 700 "$work/group"
echo "== callgrind: share-extension share-batch of $lines lines over 100 categories"
SHAREDSTORE_GROUP="$work/group" SWIFT_DETERMINISTIC_HASHING=1 valgrind --tool=callgrind \
    --callgrind-out-file="$work/callgrind.out" "$bin" share-batch "$work/batch.tsv" >"$work/run.txt" 2>"$work/valgrind.txt" || {
    tail -n 20 "$work/run.txt" "$work/valgrind.txt" >&2
    echo "error: share-batch failed under callgrind" >&2
    exit 1
}
callgrind_annotate --auto=no --threshold=100 "$work/callgrind.out" >"$work/exclusive.txt"
callgrind_annotate --auto=no --inclusive=yes --threshold=100 "$work/callgrind.out" >"$work/inclusive.txt"
python3 Scripts/lib/callgrind_groups.py "$work/exclusive.txt" "$work/inclusive.txt" "$lines"
