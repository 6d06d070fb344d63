# A token names one transaction forever, also after Store.sqlite is put back to an older copy:
# no number is handed out twice, consumers that merged lost transactions reload in full, the
# cleaner deletes nothing they did not merge, and verify says so until they have.
. "$(dirname "$0")/lib.sh"
setup
store="$SHAREDSTORE_GROUP/Store.sqlite"
tokens_of() { jq_ '[int(l["token"].split(".")[0]) for l in lines]'; }

for i in 1 2 3; do share-extension share --url "https://r.example/$i" --title "r$i" --json; done >"$work/first.out"
main-app sync --json >/dev/null
widget show --json >/dev/null
sqlite3 "$store" ".backup '$work/old.sqlite'"
for i in 4 5 6 7 8; do share-extension share --url "https://r.example/$i" --title "r$i" --json; done >"$work/lost.out"
main-app sync --json >/dev/null
widget show --json >/dev/null
assert_eq "$(storectl tokens --json | jq_ 'sorted(int(l["token"].split(".")[0]) for l in lines)')" "[8, 8]" "both consumers are at token 8"

# The restore: the -wal and -shm go, the old copy comes back.
rm -f "$store-wal" "$store-shm"
cp "$work/old.sqlite" "$store"
for i in 9 10 11 12 13 14 15; do share-extension share --url "https://r.example/$i" --title "r$i" --json; done >"$work/new.out"
lost="$(tokens_of <"$work/lost.out")"
new="$(tokens_of <"$work/new.out")"
assert_eq "$(python3 -c "print(sorted(set($lost) & set($new)))")" "[]" "no token of a lost transaction is handed out again (lost $lost, new $new)"
storectl history --json >"$work/history.out"
assert_eq "$(jq_ '[l["author"] for l in lines if l["context"] == "store.restored"]' <"$work/history.out")" '["SharedStore"]' "the restore shows in history as one transaction"

if storectl verify --json >"$work/verify.out" 2>/dev/null; then fail "verify passes while consumers hold lost tokens"; else
    ok "verify fails while consumers hold lost tokens"
fi
assert_eq "$(jq_ '[l["check"] for l in lines if not l["ok"]]' <"$work/verify.out")" '["registry"]' "the failing check is the registry's"
case "$(cat "$work/verify.out")" in *"reloads in full at its next sync"*) ok "verify says what repairs it" ;; *) fail "verify does not say what repairs it" ;; esac

history-cleaner --json >"$work/clean.out"
assert_eq "$(jq_ 'j["deleted"]' <"$work/clean.out")" 0 "the cleaner deletes nothing the consumers did not merge"
assert_eq "$(storectl history --json | tokens_of)" "$(jq_ '[int(l["token"].split(".")[0]) for l in lines]' <"$work/history.out")" "all history is still there"

main-app sync --json >"$work/sync.out"
assert_eq "$(jq_ '[j["expired"], j["reloaded"]]' <"$work/sync.out")" "[true, true]" "main-app is told expired and reloads in full"
main-app list --json >"$work/list.out"
fresh="$(sqlite3 "$store" "SELECT count(*) FROM Article")"
assert_eq "$(jq_ 'len(lines)' <"$work/list.out")" "$fresh" "its view equals a fresh fetch ($fresh articles)"
widget show --json >"$work/widget.out"
assert_eq "$(jq_ 'j["total"]' <"$work/widget.out")" "$fresh" "the widget reloads too"
verify_store
history-cleaner --json >"$work/clean2.out"
assert_eq "$(jq_ 'j["remaining"]' <"$work/clean2.out")" 0 "once both merged, the cleaner deletes everything"

# A damaged store holding the largest token: saving is a clear error, never a random token.
sqlite3 "$store" "INSERT INTO ss_history(token, timestamp, author, context, process, executable, entities, changes)
                  VALUES (9223372036854775807, 0, 'x', NULL, 0, 'x', 0, x'0100')"
before="$(sqlite3 "$store" "SELECT count(*) FROM Article")"
expect_error 1 "a save when the token space is exhausted" share-extension share --url https://r.example/max --title max
assert_eq "$(sqlite3 "$store" "SELECT count(*) FROM Article")" "$before" "and nothing was saved"
finish
