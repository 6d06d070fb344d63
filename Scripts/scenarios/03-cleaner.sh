# The cleaner deletes only what every consumer has merged; a consumer registered but never synced
# holds everything back; eviction, then an expired-and-reloaded sync.
. "$(dirname "$0")/lib.sh"
setup

for i in 1 2 3; do share-extension share --url "https://c.example/$i" --title "c$i" --json >/dev/null; done
widget show --json >/dev/null                       # Widget at 3
for i in 4 5; do share-extension share --url "https://c.example/$i" --title "c$i" --json >/dev/null; done
main-app sync --json >/dev/null                     # MainApp at 5

history-cleaner --dry-run --json >"$work/dry.out"
assert_json_lines "$work/dry.out" "history-cleaner --dry-run"
assert_eq "$(jq_ '[j["deleted"], j["oldest_consumer"], j["remaining"]]' <"$work/dry.out")" '[3, "Widget", 2]' "a dry run reports 3 deletable, held by Widget, 2 to remain"
history-cleaner --json >"$work/clean.out"
assert_eq "$(jq_ '[j["deleted"], j["remaining"]]' <"$work/clean.out")" '[3, 2]' "the cleaner deletes through the oldest consumer"
assert_eq "$(storectl history --json | jq_ '[l["token"].split(".")[0] for l in lines]')" '["4", "5"]' "the history after Widget's token is kept"

# A consumer that registered but never synced holds everything back.
for i in 6 7; do share-extension share --url "https://c.example/$i" --title "c$i" --json >/dev/null; done
"$BIN/sharedstore-helper" register --group "$SHAREDSTORE_GROUP" --consumer Lazy >/dev/null
widget show --json >/dev/null; main-app sync --json >/dev/null
history-cleaner --json >"$work/lazy.out"
assert_eq "$(jq_ '[j["deleted"], j["through"], j["oldest_consumer"]]' <"$work/lazy.out")" '[0, null, "Lazy"]' "a never-synced consumer holds all history back"

# Eviction takes only consumers that are behind and stale: Lazy (never synced) and MainApp (one
# transaction behind); the widget is up to date and keeps its place however long ago it synced.
share-extension share --url https://c.example/7b --title c7b --json >/dev/null
widget show --json >/dev/null
history-cleaner --evict-after 0 --json >"$work/evict.out"
assert_eq "$(jq_ 'sorted(j["evicted"])' <"$work/evict.out")" '["Lazy", "MainApp"]' "stale consumers that are behind are evicted, the up-to-date one is not"
storectl tokens --json >"$work/tokens.out"
assert_eq "$(jq_ '[l["lag"] for l in lines if l["consumer"] == "MainApp"][0]' <"$work/tokens.out")" evicted "an evicted consumer's lag shows as evicted"
main-app sync --json >"$work/expired.out"
assert_eq "$(jq_ '[j["expired"], j["reloaded"]]' <"$work/expired.out")" '[true, true]' "an evicted consumer's next sync reports expired and reloaded"
main-app list --json >"$work/list.out"
assert_eq "$(jq_ 'len(lines)' <"$work/list.out")" 8 "and reloads in full with a correct view"
storectl reset-consumer Lazy --json >/dev/null
widget show --json >"$work/widget.out"
assert_eq "$(jq_ 'j["total"]' <"$work/widget.out")" 8 "the widget sees everything"
history-cleaner --json >"$work/after.out"
assert_eq "$(jq_ 'j["remaining"]' <"$work/after.out")" 0 "with every live consumer up to date, all history goes"
share-extension share --url https://c.example/8 --title c8 --json >/dev/null
main-app sync --json >"$work/next.out"
assert_eq "$(jq_ '[j["synced"], j["expired"], j["reloaded"]]' <"$work/next.out")" '[1, false, false]' "syncing goes on normally after"
verify_store
finish
