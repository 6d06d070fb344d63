# share → the widget sees it → main-app marks it read → the widget's unread count drops.
. "$(dirname "$0")/lib.sh"
setup

share-extension share --url https://swift.org/blog --title "Swift 6.3 released" --category Swift --json >"$work/share.out"
assert_json_lines "$work/share.out" "share"
id="$(jq_ 'j["id"]' <"$work/share.out")"
widget show --json >"$work/show1.out"
assert_json_lines "$work/show1.out" "widget show"
assert_eq "$(jq_ 'j["unread"]' <"$work/show1.out")" 1 "widget sees the shared article as unread"
assert_eq "$(jq_ 'j["latest"][0]["id"]' <"$work/show1.out")" "$id" "and lists it first"

main-app list --json >"$work/list.out"
assert_json_lines "$work/list.out" "main-app list"
assert_eq "$(jq_ 'j["category"]' <"$work/list.out")" "Swift" "main-app lists it with its category"
main-app mark-read "$id" --json >"$work/read.out"
assert_json_lines "$work/read.out" "mark-read"
widget show --json >"$work/show2.out"
assert_eq "$(jq_ 'j["unread"]' <"$work/show2.out")" 0 "widget's unread count drops to 0"
assert_eq "$(jq_ 'j["total"]' <"$work/show2.out")" 1 "total stays 1"

main-app sync --json >"$work/sync.out"
assert_json_lines "$work/sync.out" "main-app sync"
assert_eq "$(jq_ 'j["expired"]' <"$work/sync.out")" false "main-app sync is not expired"
widget toggle-read "$id" --json >"$work/toggle.out"
assert_eq "$(jq_ 'j["isRead"]' <"$work/toggle.out")" false "widget toggles it back to unread"
main-app list --unread --json >"$work/unread.out"
assert_eq "$(jq_ 'len(lines)' <"$work/unread.out")" 1 "main-app list --unread shows it again"
main-app delete "$id" --json >/dev/null
widget show --json >"$work/show3.out"
assert_eq "$(jq_ 'j["total"]' <"$work/show3.out")" 0 "a delete reaches the widget"
storectl history --json >"$work/history.out"
assert_json_lines "$work/history.out" "storectl history"
assert_eq "$(jq_ '[l["author"] for l in lines]' <"$work/history.out")" '["ShareExtension", "MainApp", "Widget", "MainApp"]' "history names every author in order"
storectl tokens --json >"$work/tokens.out"
assert_json_lines "$work/tokens.out" "storectl tokens"
storectl stats --json >"$work/stats.out"
assert_json_lines "$work/stats.out" "storectl stats"
verify_store
finish
