# Coexistence: the targets open the group directory with the entity model, a helper process
# with the types-first model of the same schema (record types, typed keys). Both write, both
# see each other's saves, through one store and one history.
. "$(dirname "$0")/lib.sh"
setup
typed() { "$BIN/sharedstore-helper" "$@" --group "$SHAREDSTORE_GROUP"; }

# A live query of the types-first process, on records, from the start.
background "$work/follow.out" typed typed-follow --until-read 2
follower=$last_pid
wait_for_line "$work/follow.out" '"titles"' 30

share-extension share --url https://swift.org/blog --title "Swift 6.3 released" --category Swift --json >"$work/share.out"
shared="$(jq_ 'j["id"]' <"$work/share.out")"
typed typed-list >"$work/list1.out"
assert_json_lines "$work/list1.out" "typed-list"
assert_eq "$(jq_ '[l["title"] for l in lines if "title" in l]' <"$work/list1.out")" '["Swift 6.3 released"]' \
    "the types-first process reads the entity model's save"
assert_eq "$(jq_ 'lines[0]["category"]' <"$work/list1.out")" "Swift" "with its category, stored as label"
assert_eq "$(jq_ 'lines[0]["searchTitle"]' <"$work/list1.out")" "swift 6.3 released" "and the derived search title"

typed typed-share --title "Café LMDB" --url https://lmdb.tech --category Swift >"$work/typed.out"
assert_json_lines "$work/typed.out" "typed-share"
typed_id="$(jq_ 'j["id"]' <"$work/typed.out")"
widget show --json >"$work/show1.out"
assert_eq "$(jq_ 'j["total"]' <"$work/show1.out")" 2 "the widget (entity model) sees the record's save"
main-app list --search cafe --json >"$work/search.out"
assert_eq "$(jq_ '[l["id"] for l in lines]' <"$work/search.out")" "[\"$typed_id\"]" \
    "main-app finds it by its derived search title"
assert_eq "$(jq_ 'j["category"]' <"$work/search.out")" "Swift" "in the category both share"

main-app mark-read "$typed_id" --json >/dev/null
typed typed-list --unread >"$work/list2.out"
assert_eq "$(jq_ '[l["title"] for l in lines if "title" in l]' <"$work/list2.out")" '["Swift 6.3 released"]' \
    "a mark-read by the entity model reaches the typed query"
typed typed-mark-read --id "$shared" >/dev/null
widget show --json >"$work/show2.out"
assert_eq "$(jq_ 'j["unread"]' <"$work/show2.out")" 0 "an update(record) by the types-first process reaches the widget"

wait_exit "$follower" 60 || true
assert_eq "$(jq_ 'j["titles"]' <"$work/follow.out")" '["Swift 6.3 released", "Caf\u00e9 LMDB"]' \
    "the typed live query followed both processes' saves as records"
storectl history --json >"$work/history.out"
assert_eq "$(jq_ '[l["author"] for l in lines]' <"$work/history.out")" \
    '["ShareExtension", "TypedApp", "MainApp", "TypedApp"]' "one history holds both models' saves"
verify_store
finish
