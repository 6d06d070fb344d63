# The token registry never kills a process and never hangs one: a damaged tokens.lmdb is
# reported (writers still save), storectl repair-registry starts anew and every consumer reloads;
# a process frozen inside a registry write makes the others wait at most the busy deadline.
. "$(dirname "$0")/lib.sh"
setup
g="$SHAREDSTORE_GROUP"
reg="$g/tokens.lmdb"
for i in 1 2 3; do share-extension share --url "https://g.example/$i" --title "g$i" --json >/dev/null; done
main-app sync --json >/dev/null
widget show --json >/dev/null
cp "$reg" "$work/good.lmdb"

# Never a signal: run every executable against a damaged registry, record the exit statuses.
no_signal() {
    local what="$1" status
    for cmd in "widget show" "main-app list" "main-app sync" "storectl tokens" "storectl verify" "history-cleaner" \
               "storectl reset-consumer Widget" "share-extension share --url https://g.example/s --title s"; do
        status=0; timeout 20 $cmd --json >/dev/null 2>"$work/err" || status=$?
        if [ "$status" -gt 2 ]; then fail "$what: '$cmd' exited $status: $(cat "$work/err")"; return; fi
    done
    ok "$what: no executable died by a signal or hung"
}

truncate -s 5000 "$reg"
no_signal "a truncated registry"
expect_error 1 "widget show on a truncated registry" widget show
err="$(storectl tokens 2>&1 >/dev/null || true)"
case "$err" in *"damaged"*"repair-registry"*) ok "the error names the damage and the repair" ;; *) fail "unclear error: $err" ;; esac
status=0; share-extension share --url https://g.example/4 --title g4 --json >"$work/share.out" 2>"$work/share.err" || status=$?
assert_eq "$status" 0 "a writer that does not need the registry still saves"
case "$(cat "$work/share.err")" in "warning: "*) ok "with a warning" ;; *) fail "no warning: $(cat "$work/share.err")" ;; esac
if storectl verify --json >"$work/verify.out" 2>/dev/null; then fail "verify passes on a damaged registry"; else ok "verify fails on a damaged registry"; fi
storectl repair-registry --json >"$work/repair.out"
moved="$(jq_ 'j["moved"]' <"$work/repair.out")"
case "$moved" in "$reg.damaged-"*) ok "repair-registry moved the damaged file aside" ;; *) fail "moved: $moved" ;; esac
[ -f "$moved" ] && ok "the damaged file is kept" || fail "the damaged file is gone"
main-app sync --json >"$work/sync.out"
assert_eq "$(jq_ '[j["expired"], j["reloaded"]]' <"$work/sync.out")" "[true, true]" "after the repair a consumer reloads in full, expired"
assert_eq "$(main-app list --json | jq_ 'len(lines)')" "$(sqlite3 "$g/Store.sqlite" 'SELECT count(*) FROM Article')" "with a view of every article"
storectl repair-registry --json >"$work/repair2.out"
assert_eq "$(jq_ 'j["moved"]' <"$work/repair2.out")" null "a healthy registry is left alone"
verify_store

# Damaged pages: the meta pages, the root pages, and random bytes anywhere.
python3 - "$work/good.lmdb" "$work" <<'PY'
import os, random, sys
good = open(sys.argv[1], "rb").read()
random.seed(7)
def write(name, data): open(os.path.join(sys.argv[2], name), "wb").write(data)
b = bytearray(good); b[16:20] = b"\0\0\0\0"; b[4096 + 16:4096 + 20] = b"\0\0\0\0"; write("magic.lmdb", b)
b = bytearray(good); b[16 + 120:16 + 128] = (10**6).to_bytes(8, "little"); b[4096 + 16 + 120:4096 + 16 + 128] = (10**6).to_bytes(8, "little"); write("lastpage.lmdb", b)
b = bytearray(good)
for page in range(2, len(good) // 4096): b[page * 4096 + 10] = 0x08; b[page * 4096 + 12] = 0xff
write("pages.lmdb", b)
for i in range(25):
    b = bytearray(good)
    for _ in range(random.choice([1, 4, 32])): b[random.randrange(len(b))] = random.randrange(256)
    write("random-%02d.lmdb" % i, b)
PY
for damaged in "$work"/magic.lmdb "$work"/lastpage.lmdb "$work"/pages.lmdb "$work"/random-*.lmdb; do
    cp "$damaged" "$reg"; rm -f "$reg-lock"
    no_signal "$(basename "$damaged")" >"$work/nosignal.out"; grep -q FAIL "$work/nosignal.out" 2>/dev/null && cat "$work/nosignal.out"
    failures=$((failures + $(grep -c "FAIL" "$work/nosignal.out" || true)))
done
ok "28 damaged registries: no signal, no hang"
storectl repair-registry --json >/dev/null
verify_store

# A process frozen inside a registry write: readers answer at once, writers fail or warn after
# the busy deadline, naming it; nobody waits forever.
background "$work/hold.out" "$BIN/sharedstore-helper" hold-write --group "$g"
holder=$last_pid
wait_for_line "$work/hold.out" holding
kill -STOP "$holder"
status=0; timeout 20 storectl tokens --json >/dev/null 2>"$work/tokens.err" || status=$?
assert_eq "$status" 0 "storectl tokens answers while a registry writer is frozen"
status=0; timeout 30 main-app add --url https://g.example/5 --title g5 --json >"$work/add.out" 2>"$work/add.err" || status=$?
assert_eq "$status" 0 "a save completes while a registry writer is frozen (exit 0)"
case "$(cat "$work/add.err")" in *"busy"*"process $holder"*) ok "with a warning naming the frozen process" ;; *) fail "warning: $(cat "$work/add.err")" ;; esac
status=0; timeout 30 history-cleaner --evict-after 0 --json >/dev/null 2>"$work/clean.err" || status=$?
assert_eq "$status" 1 "a registry write fails after the deadline"
case "$(cat "$work/clean.err")" in "error: "*"busy"*"process $holder"*) ok "with .busy naming the frozen process" ;; *) fail "error: $(cat "$work/clean.err")" ;; esac
kill -9 "$holder"; wait "$holder" 2>/dev/null || true
main-app sync --json >/dev/null
verify_store

# A process frozen inside a store write (another program's): verify, which only looks, names it
# once it held the write lock past the busy timeout.
background "$work/sqlhold.out" python3 -c "
import sqlite3, sys, time
c = sqlite3.connect('$g/Store.sqlite', isolation_level=None)
c.execute('BEGIN IMMEDIATE')
print('holding', flush=True)
time.sleep(60)"
writer=$last_pid
wait_for_line "$work/sqlhold.out" holding
status=0; timeout 30 storectl verify --json >"$work/lock.out" 2>/dev/null || status=$?
assert_eq "$status" 1 "verify fails while another process holds the write lock"
assert_eq "$(jq_ '[l["ok"] for l in lines if l["check"] == "store-lock"]' <"$work/lock.out")" "[false]" "its store-lock check fails"
grep -q "held by pid $writer" "$work/lock.out" && ok "naming the process" || fail "$(grep store-lock "$work/lock.out")"
kill -9 "$writer"; wait "$writer" 2>/dev/null || true
verify_store

# tokens.lmdb deleted after consumers synced: one repair starts a registry marked repaired, after
# which verify passes and every consumer reloads in full.
rm -f "$reg" "$reg-lock"
if storectl verify --json >/dev/null 2>&1; then fail "verify passes with tokens.lmdb deleted"; else ok "verify fails with tokens.lmdb deleted"; fi
storectl repair-registry --json >/dev/null 2>"$work/repair3.err"
grep -q "started a new token registry" "$work/repair3.err" && ok "repair-registry says it started a new one" \
    || fail "repair-registry: $(cat "$work/repair3.err")"
storectl verify --json >/dev/null 2>&1 && ok "one repair-registry puts a deleted registry right" \
    || fail "verify after one repair: $(storectl verify 2>&1 | tail -3)"
assert_eq "$(main-app sync --json | tail -1 | jq_ '[j["expired"], j["reloaded"]]')" "[true, true]" "main-app reloads in full"
finish
