# storectl audit plants nothing and finds each risk planted here: it names the risk, shows the
# evidence and the fix, one JSON object each with --json, and exits 1 (one error line) when it finds
# one, 0 when the group is healthy.
. "$(dirname "$0")/lib.sh"
setup
g="$SHAREDSTORE_GROUP"
for i in 1 2 3; do share-extension share --url "https://a.example/$i" --title "a$i" --json >/dev/null; done
main-app sync --json >/dev/null
widget show --json >/dev/null
history-cleaner --json >/dev/null

storectl audit >"$work/clean.out" 2>"$work/clean.err" && ok "a healthy group: exit 0" || fail "a healthy group: $(cat "$work/clean.err")"
grep -q "no risk found" "$work/clean.out" && ok "and says no risk was found" || fail "clean audit: $(cat "$work/clean.out")"

# audit RISK [OPTIONS]: the audit must name RISK (JSON lines with evidence and fix) and exit 1.
risks() { storectl audit --json "$@" >"$work/audit.out" 2>"$work/audit.err"; echo $?; }
expect_risk() {
    local risk="$1" what="$2"; shift 2
    local status; status="$(risks "$@")"
    if [ "$status" != 1 ]; then fail "$what: exit $status: $(cat "$work/audit.err")"; return; fi
    if ! python3 "$here/jsonq.py" --check <"$work/audit.out"; then fail "$what: not JSON lines"; return; fi
    local found
    found="$(jq_ "[l for l in lines if l['risk'] == '$risk' and l['evidence'] and l['fix']]" <"$work/audit.out")"
    if [ "$found" == "[]" ]; then fail "$what: $risk not named: $(cat "$work/audit.out")"; return; fi
    [ "$(wc -l <"$work/audit.err")" -eq 1 ] && grep -q "^error: audit found" "$work/audit.err" \
        || { fail "$what: stderr: $(cat "$work/audit.err")"; return; }
    ok "$what: $risk named ($(jq_ "[l['evidence'] for l in lines if l['risk'] == '$risk'][0]" <"$work/audit.out"))"
}

# History kept by nobody's cleaner, then piling up behind a consumer that stopped.
g2="$work/never"; mkdir -m 700 "$g2"
for i in 1 2 3 4; do share-extension share --group "$g2" --url "https://n.example/$i" --title "n$i" --json >/dev/null; done
expect_risk history-never-cleaned "history never cleaned" --group "$g2" --history-limit 3
for i in 4 5 6; do share-extension share --url "https://a.example/$i" --title "a$i" --json >/dev/null; done
main-app sync --json >/dev/null
history-cleaner --json >/dev/null
expect_risk history-piling-up "history growing behind the widget" --history-limit 2 --idle-after 0
grep -q "held back by consumer Widget" "$work/audit.out" && ok "the evidence names the consumer holding it" \
    || fail "no holder: $(cat "$work/audit.out")"
expect_risk consumer-idle "a consumer idle past the limit" --idle-after 0

# History made faster than it is cleaned: the widget merges each round before the next, the cleaner
# runs after every round, and each round is larger than the last. A rate, from the cleaner's runs.
g3="$work/growing"; mkdir -m 700 "$g3"
n=0
for round in 1 2 3 4 5; do
    widget show --group "$g3" --json >/dev/null
    for i in $(seq 1 $((round * 2))); do
        n=$((n + 1))
        share-extension share --group "$g3" --url "https://g.example/$n" --title "g$n" --json >/dev/null
    done
    history-cleaner --group "$g3" --json >/dev/null
done
expect_risk history-growing "history made faster than it is cleaned" --group "$g3" --history-limit 2
grep -q "transactions were made" "$work/audit.out" && grep -q "held back by consumer Widget" "$work/audit.out" \
    && ok "the evidence gives the rates and the consumer holding it" || fail "$(cat "$work/audit.out")"
# Cleaned as fast as it is made (every round merged before the cleaner runs): no trend.
g4="$work/steady"; mkdir -m 700 "$g4"
for round in 1 2 3 4; do
    share-extension share --group "$g4" --url "https://s.example/$round" --title "s$round" --json >/dev/null
    widget show --group "$g4" --json >/dev/null
    history-cleaner --group "$g4" --json >/dev/null
done
[ "$(risks --group "$g4" --history-limit 1)" = 0 ] && ok "history cleaned as fast as it is made: no finding" \
    || fail "a steady group: $(cat "$work/audit.out")"

# An evicted consumer that never came back.
history-cleaner --evict-after 0 --json >/dev/null
expect_risk consumer-evicted "an evicted consumer" --idle-after 100000
widget show --json >/dev/null

# Files other users can read.
chmod 644 "$g/Store.sqlite"
expect_risk files-not-private "a store file readable by others" --idle-after 100000
grep -q "Store.sqlite is 644" "$work/audit.out" && ok "naming the file and its mode" || fail "$(cat "$work/audit.out")"
chmod 600 "$g/Store.sqlite"

# A WAL past the limit, held by a long-held pin in another process.
background "$work/pin.out" "$BIN/sharedstore-helper" hold-pin --group "$g"
wait_for_line "$work/pin.out" pinned
share-extension share --url https://a.example/7 --title a7 --json >/dev/null
expect_risk wal-large "a WAL past the limit" --idle-after 100000 --wal-limit 0
grep -q "held by pid $last_pid (sharedstore-helper)" "$work/audit.out" && ok "the evidence names the pinning process" \
    || fail "no pin: $(cat "$work/audit.out")"
kill -9 "$last_pid"; wait "$last_pid" 2>/dev/null || true

# Kept counts out of step after a tool that does not keep them.
sqlite3 "$g/Store.sqlite" "UPDATE Article SET isRead = 1 WHERE Z_PK = 2"
expect_risk verify-kept-counts "a kept count out of step" --idle-after 100000
grep -q "storectl recount" "$work/audit.out" && ok "the fix names storectl recount" || fail "$(cat "$work/audit.out")"
storectl recount --json >/dev/null

# A store on an older model.
g3="$work/old"; mkdir -m 700 "$g3"
share-extension share --group "$g3" --model-version 1 --url https://o.example/1 --title o1 --json >/dev/null
expect_risk model-behind "a store on model 1" --group "$g3"

# Queries that scanned, from an SQL debug log.
SHAREDSTORE_SQL_DEBUG=1 main-app list --search "a" --json >/dev/null 2>"$work/sql.log"
expect_risk query-scanned "a scan in the SQL log" --idle-after 100000 --sql-log "$work/sql.log"

# Bad input: an unknown option value, a missing log, a directory without a store.
expect_error 2 "a negative --wal-limit" storectl audit --wal-limit -1
expect_error 1 "a missing SQL log" storectl audit --idle-after 100000 --sql-log "$work/nothing.log"
mkdir -m 700 "$work/empty"
expect_error 1 "a group without a store" storectl audit --group "$work/empty"
[ ! -e "$work/empty/Store.sqlite" ] && ok "and the audit made no store there" || fail "audit created a store"
storectl audit --idle-after 100000 --json >"$work/end.out" 2>"$work/end.err" \
    && ok "healthy again after the fixes: exit 0" || fail "after the fixes: $(cat "$work/end.out" "$work/end.err")"
finish
