# Eight share-extension processes at once, 50 links each, all in category "Swift": 400 articles,
# exactly one Category "Swift", 400 history transactions.
. "$(dirname "$0")/lib.sh"
setup

main-app list --json >/dev/null   # create the store before the race
pids=()
for p in $(seq 1 8); do
    ( for i in $(seq 1 50); do
        share-extension share --url "https://p$p.example/$i" --title "p$p link $i" --category Swift --json >/dev/null || exit 1
      done ) &
    pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
assert_eq "$status" 0 "every share succeeded"
storectl stats --json >"$work/stats.out"
assert_eq "$(jq_ 'j["objects"]["Article"]' <"$work/stats.out")" 400 "400 articles"
assert_eq "$(jq_ 'j["objects"]["Category"]' <"$work/stats.out")" 1 "exactly one Category"
assert_eq "$(jq_ 'j["transactions"]' <"$work/stats.out")" 400 "400 history transactions"
main-app list --json >"$work/list.out"
assert_eq "$(jq_ 'sorted(set(l["category"] for l in lines))' <"$work/list.out")" '["Swift"]' "all in category Swift"
verify_store
finish
