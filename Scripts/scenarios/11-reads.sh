# Reads through queries: main-app list streams a window (--limit, --offset), widget show and
# widget watch read counts and three rows, and widget watch prints only when its summary changed.
. "$(dirname "$0")/lib.sh"
setup

python3 -c "print('\n'.join('https://r.example/%d\tarticle %02d\t%s' % (i, i, 'Even' if i % 2 == 0 else 'Odd') for i in range(30)))" >"$work/batch.tsv"
share-extension share-batch "$work/batch.tsv" --json >/dev/null
main-app list --json >"$work/all.out"
assert_eq "$(jq_ 'len(lines)' <"$work/all.out")" 30 "main-app list lists every article"
main-app list --json --limit 5 --offset 10 >"$work/window.out"
assert_eq "$(jq_ '[l["id"] for l in lines]' <"$work/window.out")" "$(jq_ '[l["id"] for l in lines][10:15]' <"$work/all.out")" \
    "--limit 5 --offset 10 gives the 11th to 15th articles of the full list"
main-app list --json --offset 28 >"$work/tail.out"
assert_eq "$(jq_ 'len(lines)' <"$work/tail.out")" 2 "--offset alone skips"
main-app list --json --limit 0 >"$work/none.out"
assert_eq "$(wc -l <"$work/none.out")" 0 "--limit 0 lists nothing"
expect_error 2 "a negative limit" main-app list --limit -1
main-app mark-read Article/3 --json >/dev/null
main-app list --unread --json --limit 3 >"$work/unread.out"
assert_eq "$(jq_ '[l["id"] for l in lines]' <"$work/unread.out")" '["Article/1", "Article/2", "Article/4"]' "--unread with --limit"
main-app list >"$work/table.out"
assert_eq "$(head -n 1 "$work/table.out" | awk '{print $1, $2, $3}')" "ID READ TITLE" "people get an aligned table"
assert_eq "$(wc -l <"$work/table.out")" 31 "with a header and one row per article"

widget show --json >"$work/show.out"
assert_eq "$(jq_ '[j["unread"], j["total"], [l["id"] for l in j["latest"]]]' <"$work/show.out")" \
    '[29, 30, ["Article/30", "Article/29", "Article/28"]]' "widget show: two counts and the three newest"

# widget watch prints a line only when the summary changed.
background "$work/watch.out" widget watch --json --for 60
watcher=$last_pid
wait_for_lines "$work/watch.out" 1
share-extension share --url https://r.example/new --title new --category Even --json >/dev/null
wait_for_line "$work/watch.out" '"total": *31\|"total":31'
main-app mark-read Article/30 --json >/dev/null     # changes the unread count: a line
wait_for_line "$work/watch.out" '"unread":29'
main-app mark-read Article/1 --json >/dev/null
wait_for_line "$work/watch.out" '"unread":28'
# Saves that leave the summary as it is print nothing: an older article's title, a category.
before="$(wc -l <"$work/watch.out")"
"$BIN/sharedstore-helper" set-title --group "$SHAREDSTORE_GROUP" --id Article/5 --title renamed >/dev/null
"$BIN/sharedstore-helper" add-category --group "$SHAREDSTORE_GROUP" --name Lonely >/dev/null
main-app mark-read Article/2 --json >/dev/null       # then one that changes it
wait_for_line "$work/watch.out" '"unread":27'
assert_eq "$(($(wc -l <"$work/watch.out") - before))" 1 "two saves that leave the summary alone print nothing"
kill -TERM "$watcher"; wait_exit "$watcher" 10 || true
python3 - "$work/watch.out" <<'PY' && ok "every line differs from the one before it" || fail "widget watch printed an unchanged summary"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
sys.exit(0 if all(a != b for a, b in zip(lines, lines[1:])) else 1)
PY
# The widget's counts are kept by every save; a tool that does not keep them (sqlite3 here) makes
# verify name the count, and storectl recount puts it right.
sqlite3 "$SHAREDSTORE_GROUP/Store.sqlite" "UPDATE Article SET isRead = 0 WHERE Z_PK = 30"
storectl verify --json >"$work/verify.out" 2>/dev/null && fail "verify passed with a wrong kept count" || true
grep -q '"check":"kept-counts","ok":false.*Article.unread is 27, counting gives 28' "$work/verify.out" \
    && ok "verify names the wrong count and both numbers" || fail "verify: $(cat "$work/verify.out")"
storectl recount --json >"$work/recount.out"
assert_eq "$(jq_ '[l["fixed"] for l in lines]' <"$work/recount.out")" \
    '[[{"count": "Article.unread", "was": 27, "now": 28}]]' "recount fixes exactly that count"
widget show --json >"$work/show.out"
assert_eq "$(jq_ 'j["unread"]' <"$work/show.out")" 28 "widget show reads the recounted number"
# main-app watch prints a merged transaction only when it changes what the list shows.
main-app sync --json >/dev/null
background "$work/mainwatch.out" main-app watch --json --for 60
mainwatcher=$last_pid
"$BIN/sharedstore-helper" add-category --group "$SHAREDSTORE_GROUP" --name "Empty shelf" >/dev/null
share-extension share --url https://r.example/after --title after --json >"$work/after.out"
wait_for_line "$work/mainwatch.out" '"ShareExtension"'
kill -TERM "$mainwatcher"; wait_exit "$mainwatcher" 10 || true
assert_eq "$(jq_ '[l["token"] for l in lines if "token" in l and "changes" in l]' <"$work/mainwatch.out")" \
    "$(jq_ '[j["token"]]' <"$work/after.out")" "main-app watch: the share, not the empty category"

verify_store
finish
