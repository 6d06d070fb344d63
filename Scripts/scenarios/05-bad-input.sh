# Bad input gets the documented exit code and one clear line, and leaves the store as it was.
. "$(dirname "$0")/lib.sh"
setup

share-extension share --url https://keep.example --title keep --category Keep --json >/dev/null
main-app sync --json >/dev/null
before="$(storectl stats --json | jq_ '[j["objects"], j["transactions"]]')"

expect_error 2 "malformed token" storectl history --after not-a-token
expect_error 2 "malformed id" main-app mark-read Article/abc
expect_error 2 "unknown flag" main-app list --colour
expect_error 2 "missing value" main-app add --title
expect_error 2 "unknown command" widget frobnicate
expect_error 2 "non-numeric limit" storectl history --limit many
other="$work/other"
SHAREDSTORE_GROUP="$other" share-extension share --url https://o.example --title o --json >"$work/other.out"
foreign="$(jq_ 'j["token"]' <"$work/other.out")"
expect_error 1 "foreign token" storectl history --after "$foreign"
expect_error 1 "unknown id" main-app mark-read Article/999
expect_error 1 "unknown id (widget)" widget toggle-read Article/999
expect_error 1 "empty title" main-app add --title "" --url https://x.example
expect_error 1 "non-http URL" share-extension share --title x --url ftp://x.example
expect_error 1 "unknown consumer" storectl reset-consumer Nobody
printf 'https://ok.example\tgood\nnot a url\tbad\n' >"$work/batch.tsv"
expect_error 1 "bad batch line" share-extension share-batch "$work/batch.tsv"
err="$(share-extension share-batch "$work/batch.tsv" 2>&1 >/dev/null || true)"
case "$err" in *"line 2"*) ok "the batch error names line 2" ;; *) fail "batch error does not name line 2: $err" ;; esac
expect_error 1 "missing batch file" share-extension share-batch "$work/nope.tsv"
assert_eq "$(storectl stats --json | jq_ '[j["objects"], j["transactions"]]')" "$before" "the store is as it was"
verify_store

# A store file that is not a database.
junk="$work/junk"; mkdir -m 700 "$junk"; head -c 8192 /dev/urandom >"$junk/Store.sqlite"; cp "$junk/Store.sqlite" "$work/junk.copy"
SHAREDSTORE_GROUP="$junk" expect_error 1 "store file that is not a database" main-app list
if cmp -s "$junk/Store.sqlite" "$work/junk.copy"; then ok "the junk file is untouched"; else fail "the junk file was changed"; fi

# A read-only group directory (as root, permissions only bind another user: run as nobody).
ro="$work/ro"
SHAREDSTORE_GROUP="$ro" share-extension share --url https://ro.example --title ro --json >/dev/null
SHAREDSTORE_GROUP="$ro" storectl stats --json >"$work/ro.before"
if [ "$(id -u)" -eq 0 ]; then
    chmod 755 "$work"; chown -R 65534:65534 "$ro"; chmod 500 "$ro"
    as=(setpriv --reuid=65534 --regid=65534 --clear-groups env SHAREDSTORE_GROUP="$ro")
else
    chmod 500 "$ro"; as=(env SHAREDSTORE_GROUP="$ro")
fi
expect_error 1 "read-only group directory (write)" "${as[@]}" "$BIN/share-extension" share --url https://x.example --title x
expect_error 1 "read-only group directory (read)" "${as[@]}" "$BIN/main-app" list
chmod 700 "$ro"; [ "$(id -u)" -eq 0 ] && chown -R 0:0 "$ro"
assert_eq "$(SHAREDSTORE_GROUP="$ro" storectl stats --json | jq_ 'j["objects"]')" "$(jq_ 'j["objects"]' <"$work/ro.before")" "the read-only store is as it was"

# A full disk (a 1 MiB tmpfs, where the machine allows mounting one).
full="$work/full"; mkdir -p "$full"
if [ "$(id -u)" -eq 0 ] && mount -t tmpfs -o size=1m,mode=700 tmpfs "$full" 2>/dev/null; then
    SHAREDSTORE_GROUP="$full" share-extension share --url https://f.example --title first --json >/dev/null
    head -c 2000000 /dev/zero >"$full/filler" 2>/dev/null || true
    python3 -c "print('\n'.join('https://f.example/%d\t%s' % (i, 'x' * 400) for i in range(3000)))" >"$work/big.tsv"
    expect_error 1 "full disk" env SHAREDSTORE_GROUP="$full" "$BIN/share-extension" share-batch "$work/big.tsv"
    rm -f "$full/filler"
    assert_eq "$(SHAREDSTORE_GROUP="$full" storectl stats --json | jq_ '[j["objects"]["Article"], j["transactions"]]')" "[1, 1]" "the full disk lost nothing"
    SHAREDSTORE_GROUP="$full" verify_store
    umount "$full"
else
    ok "full disk: skipped (cannot mount a tmpfs here)"
fi
finish
