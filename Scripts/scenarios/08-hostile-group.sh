# Group files are opened only as what they are: a planted symlink is never followed, a FIFO never
# blocks, a directory others can write or another user's is refused, and files are 0600 whatever
# the umask. Data and arguments never drive the terminal.
. "$(dirname "$0")/lib.sh"
setup
g="$SHAREDSTORE_GROUP"
share-extension share --url https://h.example/1 --title first --json >/dev/null
main-app sync --json >/dev/null

# A symlink in place of each file: a clear error or (for the registry, which a writer does not
# need) a warning; the link's target is neither written nor created.
victim="$work/victim"; printf 'precious' >"$victim"
for f in changes.signal Store.sqlite Store.sqlite-wal Store.sqlite-shm; do
    mv "$g/$f" "$work/moved" 2>/dev/null || true
    ln -s "$victim" "$g/$f"
    expect_error 1 "$f as a symlink" timeout 20 share-extension share --url https://h.example/x --title x
    rm "$g/$f"; mv "$work/moved" "$g/$f" 2>/dev/null || true
done
assert_eq "$(cat "$victim")" "precious" "no commit wrote through a planted symlink"
rm -f "$g/Store.sqlite-wal" "$g/Store.sqlite-shm"   # SQLite makes them again
for f in tokens.lmdb tokens.lmdb-lock; do
    mv "$g/$f" "$work/moved"
    ln -s "$work/nowhere-$f" "$g/$f"
    expect_error 1 "$f as a symlink (a reader)" timeout 20 main-app list
    status=0; timeout 20 share-extension share --url https://h.example/y --title y --json >/dev/null 2>"$work/warn.err" || status=$?
    assert_eq "$status" 0 "$f as a symlink: the share extension still saves"
    case "$(cat "$work/warn.err")" in "warning: "*"symbolic link"*) ok "with a warning naming the symlink" ;; *) fail "no warning: $(cat "$work/warn.err")" ;; esac
    [ -e "$work/nowhere-$f" ] && fail "$f: the symlink's target was created" || ok "$f: nothing was created at the symlink's target"
    rm "$g/$f"; mv "$work/moved" "$g/$f"
done

# A FIFO where the change signal belongs: an error at once, never a hang.
mv "$g/changes.signal" "$work/moved"; mkfifo -m 600 "$g/changes.signal"
expect_error 1 "changes.signal as a FIFO" timeout 20 share-extension share --url https://h.example/f --title f
expect_error 1 "changes.signal as a FIFO (a reader)" timeout 20 widget show
rm "$g/changes.signal"; mv "$work/moved" "$g/changes.signal"

# A group directory others can write, or another user's.
chmod 777 "$g"
expect_error 1 "a world-writable group directory" main-app list
err="$(main-app list 2>&1 >/dev/null || true)"
case "$err" in *"chmod 700"*) ok "the error says how to fix it" ;; *) fail "no fix named: $err" ;; esac
chmod 770 "$g"
expect_error 1 "a group-writable group directory" widget show
chmod 700 "$g"
if [ "$(id -u)" -eq 0 ]; then
    chown 65534 "$g"
    expect_error 1 "another user's group directory" main-app list
    chown 0 "$g"
fi
verify_store

# Files are 0600 (the directory 0700) whatever the umask.
fresh="$work/umask/group"
( umask 0277; SHAREDSTORE_GROUP="$fresh" share-extension share --url https://h.example/u --title u --json >/dev/null
  umask 0; SHAREDSTORE_GROUP="$fresh" main-app sync --json >/dev/null )
modes="$(cd "$fresh" && stat -c '%n %a' . Store.sqlite tokens.lmdb tokens.lmdb-lock changes.signal | tr '\n' ' ')"
assert_eq "$modes" ". 700 Store.sqlite 600 tokens.lmdb 600 tokens.lmdb-lock 600 changes.signal 600 " "modes under umask 0277 and 0"

# Data never drives the terminal: control characters are shown escaped and never break a row.
expect_error 1 "a title with an escape sequence" share-extension share --url https://h.example/e --title $'evil\e]0;PWNED\a\e[2J'
expect_error 1 "a URL with ESC" share-extension share --url $'https://h.example/\e[2J' --title e
expect_error 1 "a category with a newline" share-extension share --url https://h.example/c --title c --category $'a\nb'
sqlite3 "$g/Store.sqlite" "UPDATE Article SET title = 'evil' || char(27) || ']0;PWNED' || char(7) || char(10) || 'Article/99  no  forged' WHERE Z_PK = 1"
main-app list >"$work/table.out"
if grep -q $'\e' "$work/table.out"; then fail "an escape reached the terminal"; else ok "no escape reaches the terminal"; fi
assert_eq "$(wc -l <"$work/table.out")" "$(($(sqlite3 "$g/Store.sqlite" 'SELECT count(*) FROM Article') + 1))" "one row per article, none forged"
main-app list --json | assert_json_lines /dev/stdin "main-app list --json" || true
main-app list --json >"$work/list.json"
assert_eq "$(jq_ '[l["title"] for l in lines if l["id"] == "Article/1"][0]' <"$work/list.json" | od -c | grep -c '033')" 1 "JSON keeps the exact value"
err="$(main-app mark-read $'Article/1\nerror: fake' 2>&1 >/dev/null || true)"
assert_eq "$(printf '%s\n' "$err" | wc -l)" 1 "an argument with a newline gives one error line"
finish
