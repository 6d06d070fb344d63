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
expect_error 2 "a flag given twice" main-app add --url https://a.example --url https://b.example --title t
expect_error 2 "a flag whose value is missing before the next flag" main-app add --url --title t
err="$(main-app add --url --title t 2>&1 >/dev/null || true)"
case "$err" in *"'--url' needs a value"*) ok "it names --url" ;; *) fail "it does not name --url: $err" ;; esac
expect_error 2 "an argument that is not UTF-8" main-app add --url https://u.example --title $'bad\xff\xfe'
expect_error 2 "an id that is not UTF-8" main-app mark-read $'Article/\xff'
expect_error 2 "an id with a newline" main-app mark-read $'Article/1\nerror: fake'
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
expect_error 1 "a directory as the batch file" share-extension share-batch "$work"
printf 'https://u.example/1\tok\nhttps://u.example/2\t\xff\xfe\n' >"$work/notutf8.tsv"
expect_error 1 "a batch line that is not UTF-8" share-extension share-batch "$work/notutf8.tsv"
assert_eq "$(storectl stats --json | jq_ '[j["objects"], j["transactions"]]')" "$before" "the store is as it was"
verify_store

# CRLF and LF batch files give the same articles; a large transaction counts every change.
printf 'https://crlf.example/1\tone\r\nhttps://crlf.example/2\ttwo\tCRLF\r\n' >"$work/crlf.tsv"
printf 'https://lf.example/1\tone\nhttps://lf.example/2\ttwo\tLF\n' >"$work/lf.tsv"
share-extension share-batch "$work/crlf.tsv" --json >"$work/crlf.out"
share-extension share-batch "$work/lf.tsv" --json >/dev/null
assert_eq "$(jq_ 'j["inserted"]' <"$work/crlf.out")" 2 "a CRLF batch file gives two articles"
main-app list --json >"$work/crlf-list.out"
assert_eq "$(jq_ '[[l["title"], l["category"]] for l in lines if "crlf" in l["url"]]' <"$work/crlf-list.out")" \
          "$(jq_ '[[l["title"], l["category"]] for l in lines if "lf.example" in l["url"] and "crlf" not in l["url"]]' <"$work/crlf-list.out" | sed 's/LF/CRLF/')" \
          "with the same titles and categories as an LF file"
changes_before="$(storectl stats --json | jq_ 'j["changes"]')"
python3 -c "print('\n'.join('https://many.example/%d\tmany %d' % (i, i) for i in range(300)))" >"$work/many.tsv"
share-extension share-batch "$work/many.tsv" --json >/dev/null
assert_eq "$(storectl stats --json | jq_ 'j["changes"]')" "$((changes_before + 300))" "storectl stats counts all 300 changes of one transaction"

# A relative XDG_DATA_HOME is ignored (XDG spec); an invalid store id is named as such.
mkdir -p "$work/home" "$work/cwd"
( cd "$work/cwd" && env -u SHAREDSTORE_GROUP HOME="$work/home" XDG_DATA_HOME=relative "$BIN/share-extension" share --url https://x.example --title x --json >/dev/null )
[ -e "$work/cwd/relative" ] && fail "a relative XDG_DATA_HOME was used" || ok "a relative XDG_DATA_HOME is ignored"
[ -f "$work/home/.local/share/sharedstore/default/Store.sqlite" ] && ok "the default group under HOME is used" || fail "no default group under HOME"
bad="$work/badid"; mkdir -m 700 "$bad"; cp "$work/home/.local/share/sharedstore/default/Store.sqlite" "$bad/"
sqlite3 "$bad/Store.sqlite" "UPDATE ss_meta SET value = 'not-a-uuid' WHERE key = 'store_id'"
SHAREDSTORE_GROUP="$bad" expect_error 1 "an invalid store id" main-app list
err="$(SHAREDSTORE_GROUP="$bad" main-app list 2>&1 >/dev/null || true)"
case "$err" in *"invalid store id 'not-a-uuid'"*) ok "it is named as an invalid store id" ;; *) fail "not named: $err" ;; esac

# A store file that is not a database.
junk="$work/junk"; mkdir -m 700 "$junk"; head -c 8192 /dev/urandom >"$junk/Store.sqlite"; cp "$junk/Store.sqlite" "$work/junk.copy"
SHAREDSTORE_GROUP="$junk" expect_error 1 "store file that is not a database" main-app list
if cmp -s "$junk/Store.sqlite" "$work/junk.copy"; then ok "the junk file is untouched"; else fail "the junk file was changed"; fi

# A read-only group directory (as root, permissions only bind another user: run as nobody).
ro="$work/ro"
SHAREDSTORE_GROUP="$ro" share-extension share --url https://ro.example --title ro --json >/dev/null
SHAREDSTORE_GROUP="$ro" storectl stats --json >"$work/ro.before"
# storectl only reads, and a reader leaves SQLite's empty -wal and -shm as they were made; with
# them there the files could still be written. The last writer's close removes them.
SHAREDSTORE_GROUP="$ro" widget show --json >/dev/null
[ -e "$ro/Store.sqlite-wal" ] && fail "the widget's close left the WAL" || ok "no WAL is left: the directory alone decides"
# The other user runs copies of the binaries from a world-readable directory: the checkout itself
# may lie under a directory only its owner can enter (as CI's may).
bins="$(mktemp -d)"; chmod 755 "$bins"
cp "$BIN/share-extension" "$BIN/main-app" "$BIN/storectl" "$bins/"; chmod 755 "$bins"/*
if [ "$(id -u)" -eq 0 ]; then
    chmod 755 "$work"; chown -R 65534:65534 "$ro"; chmod 500 "$ro"
    as=(setpriv --reuid=65534 --regid=65534 --clear-groups env SHAREDSTORE_GROUP="$ro")
else
    chmod 500 "$ro"; as=(env SHAREDSTORE_GROUP="$ro")
fi
expect_error 1 "read-only group directory (write)" "${as[@]}" "$bins/share-extension" share --url https://x.example --title x
expect_error 1 "read-only group directory (read)" "${as[@]}" "$bins/main-app" list
# storectl only looks: a group it may only read is read as the file is (said), and nothing changes.
[ "$(id -u)" -eq 0 ] && chmod 400 "$ro"/*
sums="$(md5sum "$ro"/* | sort)"
status=0; "${as[@]}" "$bins/storectl" stats --json >"$work/ro.stats" 2>"$work/ro.err" || status=$?
assert_eq "$status" 0 "storectl stats reads a group it may not write"
grep -q "cannot be written by this user" "$work/ro.err" && ok "and says it reads the file as it is" \
    || fail "no warning: $(cat "$work/ro.err")"
"${as[@]}" "$bins/storectl" audit --json >"$work/ro.audit" 2>/dev/null || true
grep -q "repair-registry" "$work/ro.audit" && fail "audit advises a repair of a registry it may not read: $(cat "$work/ro.audit")" \
    || ok "audit advises no repair of a registry it may only read"
assert_eq "$(md5sum "$ro"/* | sort)" "$sums" "looking changed no file of the read-only group"
[ "$(id -u)" -eq 0 ] && chmod 600 "$ro"/*
rm -rf "$bins"
chmod 700 "$ro"; [ "$(id -u)" -eq 0 ] && chown -R 0:0 "$ro"
assert_eq "$(SHAREDSTORE_GROUP="$ro" storectl stats --json | jq_ 'j["objects"]')" "$(jq_ 'j["objects"]' <"$work/ro.before")" "the read-only store is as it was"

# A full disk (a 1 MiB tmpfs, where the machine allows mounting one).
full="$work/full"; mkdir -p "$full"
if [ "$(id -u)" -eq 0 ] && mount -t tmpfs -o size=1m,mode=700 tmpfs "$full" 2>/dev/null; then
    SHAREDSTORE_GROUP="$full" share-extension share --url https://f.example --title first --json >/dev/null
    head -c 2000000 /dev/zero >"$full/filler" 2>/dev/null || true
    python3 -c "print('\n'.join('https://f.example/%d\t%s' % (i, 'x' * 400) for i in range(3000)))" >"$work/big.tsv"
    expect_error 1 "full disk" env SHAREDSTORE_GROUP="$full" "$BIN/share-extension" share-batch "$work/big.tsv"
    # On the full disk, whatever each command answers, none dies by a signal or hangs.
    for cmd in "main-app add --url https://f.example/a --title a" "main-app sync" "widget show" "widget toggle-read Article/1" \
               "storectl tokens" "storectl verify" "history-cleaner" "share-extension share --url https://f.example/b --title b"; do
        status=0; SHAREDSTORE_GROUP="$full" timeout 30 $cmd --json >/dev/null 2>"$work/full.err" || status=$?
        [ "$status" -le 2 ] || fail "full disk: '$cmd' exited $status: $(cat "$work/full.err")"
    done
    ok "full disk: every target answers with a status, never a signal"
    rm -f "$full/filler"
    assert_eq "$(SHAREDSTORE_GROUP="$full" storectl stats --json | jq_ '[j["objects"]["Article"], j["transactions"]]')" "[1, 1]" "the full disk lost nothing"
    SHAREDSTORE_GROUP="$full" verify_store
    umount "$full"
else
    ok "full disk: skipped (cannot mount a tmpfs here)"
fi
finish
