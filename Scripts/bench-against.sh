#!/usr/bin/env bash
# Runs storebench cases of this checkout and of an earlier revision on this machine, turn by turn,
# and prints each one's ratios and throughputs: what "a ratio does not drop below the last
# report's" means when the report was measured on another machine, or on this one at another speed
# (ratios follow the machine; a build against a build, run together, does not). Each build measures
# with its own storebench, whose C baseline may run faster since (SharedStore now turns SQLite's
# memory statistics off for its whole process): SharedStore's throughput of the two builds, turn by
# turn, is what tells whether the library lost ground.
#   Scripts/bench-against.sh REV [--cases a,b] [--runs N] [--memory]
#     REV       the revision to compare with (a commit, a tag)
#     --cases   storebench cases (default: save-history,update-property)
#     --runs    turns of each build (default 3), each a storebench run of 7 rounds
#     --memory  stores in memory (tmpfs): the code's cost alone, no wait for the disk
#     --out F   also write each result as a JSON line to F ({"build", "turn", "case", "ratio", "cpu_ratio",
#               "ours", "baseline": SharedStore's and the C API's throughput}):
#               what Scripts/bench.sh reads for its "does not drop" goals
# REV is built once in a worktree under ${TMPDIR:-/tmp} and kept there for the next comparison.
set -euo pipefail
caller="$PWD"
cd "$(dirname "$0")/.."
. Scripts/lib/setup.sh
sharedstore_ensure_packages

usage() { echo "usage: Scripts/bench-against.sh REV [--cases a,b] [--runs N] [--memory] [--out FILE]" >&2; exit 2; }
[ $# -ge 1 ] || usage
rev="$1"
shift
cases="save-history,update-property"
runs=3
memory=""
out=""
while [ $# -gt 0 ]; do
    case "$1" in
        --cases) [ $# -ge 2 ] || usage; cases="$2"; shift 2 ;;
        --runs) [ $# -ge 2 ] || usage; runs="$2"; shift 2 ;;
        --memory) memory=1; shift ;;
        --out) [ $# -ge 2 ] || usage; out="$2"; [[ "$out" = /* ]] || out="$caller/$out"; shift 2 ;;
        *) echo "error: unknown argument '$1'" >&2; usage ;;
    esac
done
[[ "$runs" =~ ^[1-9][0-9]?$ ]] || { echo "error: --runs takes 1 to 99, not '$runs'" >&2; exit 2; }
[[ "$cases" =~ ^[a-z0-9,-]+$ ]] || { echo "error: --cases takes names like save-history,update-property" >&2; exit 2; }
commit="$(git rev-parse --verify --quiet "$rev^{commit}")" || { echo "error: '$rev' names no commit here" >&2; exit 2; }

tree="${TMPDIR:-/tmp}/sharedstore-bench-${commit:0:12}"
if [ ! -d "$tree" ]; then
    echo "== a worktree of ${commit:0:12} at $tree"
    git worktree add --detach "$tree" "$commit" >/dev/null
fi
# Every product: storebench looks for the targets it runs as processes beside it.
echo "== building ${commit:0:12} and this checkout (release)"
(cd "$tree" && swift build -c release 2>&1 | tail -n 1)
swift build -c release 2>&1 | tail -n 1
theirs="$(cd "$tree" && swift build -c release --show-bin-path)/storebench"
ours="$(swift build -c release --show-bin-path)/storebench"

scratch=""
if [ -n "$memory" ]; then
    scratch="$(mktemp -d /dev/shm/bench-against.XXXXXX)"
    trap 'rm -rf "$scratch"' EXIT
fi
echo "== $runs turns of each build, cases $cases${memory:+, stores in memory}"
if [ -n "$out" ]; then : >"$out"; fi
for turn in $(seq 1 "$runs"); do
    # Each build first in alternate turns: a machine that slows (or speeds up) through the
    # comparison does not favour the build that always runs first.
    order=("${commit:0:12}" this)
    [ $((turn % 2)) -eq 0 ] && order=(this "${commit:0:12}")
    for build in "${order[@]}"; do
        bin="$ours"
        [ "$build" = this ] || bin="$theirs"
        # Each line: the build, then the case's name, ratio and CPU ratio (older builds have none).
        TMPDIR="${scratch:-${TMPDIR:-/tmp}}" "$bin" --json --cases "$cases" | python3 -c '
import json, sys
build, cases, turn, out = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), sys.argv[4]
for line in sys.stdin:
    r = json.loads(line)
    if "ratio" in r and r.get("case") in cases:
        case, ratio, cpu = r["case"], r["ratio"], r.get("cpu_ratio", float("nan"))
        ours, base, unit = r.get("ours", 0), r.get("baseline", 0), r.get("unit", "")
        print(f"{build:>12}  {case:<26} ratio {ratio:.3f}  cpu {cpu:.3f}  SharedStore {ours:,.0f} {unit}"
              f"  C API {base:,.0f}")
        if out:
            with open(out, "a") as f:
                f.write(json.dumps({"build": build, "turn": turn, "case": case, "ratio": ratio,
                                    "cpu_ratio": r.get("cpu_ratio"), "ours": ours, "baseline": base}) + "\n")
' "$build" "$cases" "$turn" "$out"
    done
done
