# The sync contract as an outside suite sees it: a full load is said (reloaded), a target that
# only writes holds nothing back, processes of one consumer each merge every transaction, a
# watcher evicted while stopped says it reloaded, a brand-new group opened by eight processes at
# once works for all of them.
. "$(dirname "$0")/lib.sh"
setup

# A consumer registered without a token (main-app add) loads in full at its first sync: reloaded.
main-app add --url https://s.example/0 --title zero --json >/dev/null
main-app sync --json >"$work/first.out"
assert_eq "$(jq_ '[j["synced"], j["expired"], j["reloaded"]]' <"$work/first.out")" "[0, false, true]" "a first sync says reloaded"
main-app sync --json >"$work/second.out"
assert_eq "$(jq_ '[j["expired"], j["reloaded"]]' <"$work/second.out")" "[false, false]" "a later one does not"

# The share extension only writes: never a consumer, it never holds history back.
share-extension share --url https://s.example/1 --title one --json >/dev/null
assert_eq "$(storectl tokens --json | jq_ '[l["consumer"] for l in lines]')" '["MainApp"]' "share-extension is not a consumer"
main-app sync --json >/dev/null
assert_eq "$(history-cleaner --json | jq_ 'j["remaining"]')" 0 "with MainApp up to date, nothing is held back"

# Four processes of one consumer: each merges every transaction after its start, with no gap
# (before, each started every sync from the registry's token, which the others advanced).
for w in 1 2 3 4; do
    background "$work/watch$w.out" main-app watch --for 120 --json
    eval "watcher$w=$last_pid"
done
# A watcher sets up its inotify watch just before its first sync: wait for that, then share.
for w in 1 2 3 4; do
    eval "pid=\$watcher$w"
    deadline=$((SECONDS + 30))
    until ls -l /proc/"$pid"/fd 2>/dev/null | grep -q inotify; do
        [ "$SECONDS" -ge "$deadline" ] && { fail "watcher $w never started watching"; break; }
        sleep 0.02
    done
done
for i in $(seq 1 30); do share-extension share --url "https://s.example/w$i" --title "w$i" --json; done >"$work/shares.out"
last="$(jq_ 'j["token"]' <"$work/shares.out")"
for w in 1 2 3 4; do
    eval "pid=\$watcher$w"
    wait_for_line "$work/watch$w.out" "\"$last\"" 30 || true
    kill -TERM "$pid"; wait_exit "$pid" 10 || true
    verdict="$(python3 - "$work/shares.out" "$work/watch$w.out" <<'PY'
import json, sys
expected = [json.loads(l)["token"] for l in open(sys.argv[1]) if l.strip()]
lines = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
if any(l.get("reloaded") for l in lines):
    print("ok reloaded"); sys.exit()
got = [l["token"] for l in lines if "author" in l]
k = expected.index(got[0]) if got and got[0] in expected else len(expected)
print("ok from %d" % k if got == expected[k:] and got else "missed: got %s" % got)
PY
)"
    case "$verdict" in ok*) ok "watcher $w merged every transaction after its start, none twice ($verdict)" ;; *) fail "watcher $w: $verdict" ;; esac
done

# A watcher stopped while it is evicted and its history cleaned says so when it wakes.
widget show --json >/dev/null
background "$work/stopped.out" main-app watch --for 120 --json
stopped=$last_pid
share-extension share --url https://s.example/before --title before --json >/dev/null
wait_for_line "$work/stopped.out" '"author"'
kill -STOP "$stopped"
# The watcher records that it is alive at every poll, in a write transaction of the registry: a
# stop that lands inside one holds the registry's lock (other processes wait, then fail busy). It
# is let go and stopped again until another consumer's write goes through.
for attempt in 1 2 3 4; do
    widget show --json >/dev/null 2>&1 && break
    kill -CONT "$stopped"; kill -STOP "$stopped"
done
for i in 1 2 3; do share-extension share --url "https://s.example/gap$i" --title "gap$i" --json >/dev/null; done
widget show --json >/dev/null
history-cleaner --evict-after 0 --json >"$work/evict.out"
assert_eq "$(jq_ 'j["evicted"]' <"$work/evict.out")" '["MainApp"]' "the stopped watcher is evicted (the widget is up to date)"
kill -CONT "$stopped"
share-extension share --url https://s.example/after --title after --json >/dev/null
wait_for_line "$work/stopped.out" '"reloaded"' 30
assert_eq "$(jq_ '[[l["expired"], l["reloaded"]] for l in lines if "reloaded" in l]' <"$work/stopped.out")" "[[true, true]]" \
    "it prints one expired-and-reloaded line"
kill -TERM "$stopped"; wait_exit "$stopped" 10 || true

# Eight share-extension processes open a brand-new group at the same moment, five times over.
for round in 1 2 3 4 5; do
    fresh="$work/fresh$round/group"
    for p in $(seq 1 8); do
        ( SHAREDSTORE_GROUP="$fresh" share-extension share --url "https://n.example/$p" --title "n$p" --json >/dev/null 2>>"$work/fresh.err" \
          || echo "round $round process $p failed" >>"$work/fresh.err" ) &
    done
    wait
done
assert_eq "$(cat "$work/fresh.err" 2>/dev/null)" "" "40 first opens of new groups: every one saved, no error, no warning"
verify_store
finish
