# A watcher in one process sees the saves of two others live, in order, none of its own.
. "$(dirname "$0")/lib.sh"
setup

main-app add --url https://first.example --title first --json >/dev/null   # the widget will toggle it
main-app sync --json >/dev/null   # MainApp's token: the watcher delivers everything after it
background "$work/watch.out" main-app watch --count 20 --for 120 --json
watcher=$last_pid
n=10
( for i in $(seq 1 $n); do share-extension share --url "https://a.example/$i" --title "share $i" --json >/dev/null; done ) &
( for i in $(seq 1 $n); do widget toggle-read Article/1 --json >/dev/null; done ) &
( for i in $(seq 1 5); do main-app add --url "https://own.example/$i" --title "own $i" --json >/dev/null; done ) &
wait %2 %3 %4 2>/dev/null || true
wait_exit "$watcher" 60 || true
assert_json_lines "$work/watch.out" "main-app watch"
storectl history --exclude-author MainApp --json >"$work/others.out"
expected="$(jq_ '[l["token"] for l in lines][:20]' <"$work/others.out")"
assert_eq "$(jq_ '[l["token"] for l in lines]' <"$work/watch.out")" "$expected" "the watcher got the others' transactions, in token order"
assert_eq "$(jq_ 'any(l["author"] == "MainApp" for l in lines)' <"$work/watch.out")" false "and none of its own"

# SIGTERM ends a watch with exit 0 and its token saved.
background "$work/watch2.out" widget watch --json
w=$last_pid
wait_for_lines "$work/watch2.out" 1
total="$(head -n 1 "$work/watch2.out" | jq_ 'j["total"]')"
share-extension share --url https://late.example --title late --json >/dev/null
wait_for_line "$work/watch2.out" "\"total\":$((total + 1))"
kill -TERM "$w"
status=0; wait_exit "$w" 10 || status=$?
assert_eq "$status" 0 "widget watch exits 0 on SIGTERM"
storectl tokens --json >"$work/tokens.out"
assert_eq "$(jq_ '[l["lag"] for l in lines if l["consumer"] == "Widget"][0]' <"$work/tokens.out")" 0 "having saved its token"
verify_store
finish
