# Two "machines" (group directories) mirrored through a PostgreSQL server of this scenario's own:
# they converge while both write; with the server stopped the targets go on and the mirrors say
# so and retry; started again, the mirrors catch up and the machines converge (issue 14).
. "$(dirname "$0")/lib.sh"
. "$here/../lib/postgres.sh"
setup
sharedstore_postgres_start 2>/dev/null
trap 'sharedstore_postgres_stop; teardown' EXIT
A="$work/machine-a"; B="$work/machine-b"

# The machines' lists by global id, without local ids: equal when they converged.
listing() { main-app list --group "$1" --json | jq_ 'sorted((l["gid"], l["title"], l["url"], l["isRead"], l["category"], l["createdAt"]) for l in lines)'; }
# Waits until both machines list the same N articles, at most SECONDS.
wait_converged() {
    local n="$1" seconds="${2:-60}" a b
    local deadline=$((SECONDS + seconds))
    while true; do
        a="$(listing "$A")"; b="$(listing "$B")"
        if [ "$a" == "$b" ] && [ "$(main-app list --group "$A" --json | wc -l)" -eq "$n" ]; then return 0; fi
        if [ "$SECONDS" -ge "$deadline" ]; then fail "machines did not converge on $n articles"; return 1; fi
        sleep 0.05
    done
}
pg_ctl_() { $SHAREDSTORE_PG_AS "$SHAREDSTORE_PG_BIN/pg_ctl" -D "$SHAREDSTORE_PG_DIR/data" "$@" >/dev/null; }

share-extension share --group "$A" --url https://a.example/0 --title "a 0" --category Swift --json >/dev/null
share-extension share --group "$B" --url https://b.example/0 --title "b 0" --category Swift --json >/dev/null
background "$work/mirror-a.out" storectl mirror --follow --group "$A" --json
mirror_a=$last_pid
background "$work/mirror-b.out" storectl mirror --follow --group "$B" --json
mirror_b=$last_pid
( for i in $(seq 1 10); do share-extension share --group "$A" --url "https://a.example/$i" --title "a $i" --category Go --json >/dev/null; done ) &
( for i in $(seq 1 10); do share-extension share --group "$B" --url "https://b.example/$i" --title "b $i" --category Go --json >/dev/null; done ) &
wait %3 %4 2>/dev/null || true
wait_converged 22 && ok "both machines list the same 22 articles by global id, while both write"
assert_eq "$(storectl stats --group "$A" --json | jq_ 'j["objects"]["Category"]')" 2 "colliding categories became one each (Swift, Go)"
storectl tokens --group "$A" --json >"$work/tokens.out"
assert_eq "$(jq_ 'any(l["consumer"] == "Mirror" for l in lines)' <"$work/tokens.out")" true "storectl tokens shows the mirror as a consumer"

# The server goes away: the targets are not affected; the mirrors say so and retry.
pg_ctl_ -m fast stop
for i in 11 12 13; do
    if share-extension share --group "$A" --url "https://a.example/$i" --title "a $i" --json >/dev/null; then :; else fail "a share failed with the server down"; fi
done
main-app mark-read --group "$B" "$(main-app list --group "$B" --json | head -n 1 | jq_ 'j["id"]')" --json >/dev/null \
    && ok "the targets work with the server down"
wait_for_line "$work/mirror-a.out" '"error"' 30 && ok "the mirror reports the server unreachable"
pg_ctl_ -l "$SHAREDSTORE_PG_DIR/server.log" -w -t 60 -o "-c listen_addresses='' -k $SHAREDSTORE_PG_DIR -c fsync=off" start
wait_converged 25 && ok "after the server came back the mirrors caught up: 25 articles, equal"
assert_eq "$(main-app list --group "$A" --json | jq_ 'sum(1 for l in lines if l["isRead"])')" 1 "the update made while the server was down arrived"

kill -TERM "$mirror_a" "$mirror_b"
status=0; wait_exit "$mirror_a" 10 || status=$?
assert_eq "$status" 0 "storectl mirror --follow exits 0 on SIGTERM"
wait_exit "$mirror_b" 10 || true
assert_json_lines "$work/mirror-a.out" "storectl mirror --follow"
once="$(storectl mirror --group "$B" --json)"
assert_eq "$(printf '%s\n' "$once" | jq_ 'sorted(j.keys())')" '["lag", "pulled", "pushed", "server"]' "storectl mirror --once prints pushed, pulled, lag, server"
expect_error 2 "a password on the command line is refused" storectl mirror --group "$B" --postgres "postgresql://u:secret@localhost/db"
if storectl mirror --group "$B" --postgres "postgresql://$PGUSER@:$PGPORT/$PGDATABASE?host=$PGHOST" --json >/dev/null; then
    ok "--postgres takes a URL without a password (user, port, database, socket directory)"
else
    fail "--postgres with a URL without a password failed"
fi
SHAREDSTORE_GROUP="$A" verify_store
finish
