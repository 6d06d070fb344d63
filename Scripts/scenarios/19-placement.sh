# Spaces placed on several servers (issue 25): two PostgreSQL servers on this machine, a space
# directory on the first, and three machines mirroring one space through the directory
# (`storectl mirror --space team --directory URL`) as a role without superuser. While every machine
# saves, the administrator moves the space between the servers four times
# (`storectl mirror-admin --move`). The mirrors follow each move on their own; at the end every
# machine holds every save once (nothing lost, nothing doubled), the log on the space's last server
# holds each upload once, and `storectl mirror --verify` is clean on every machine.
. "$(dirname "$0")/lib.sh"
. "$here/../lib/postgres.sh"
setup
sharedstore_postgres_start 2>/dev/null
one="$SHAREDSTORE_PG_DIR"
sharedstore_postgres_start 2>/dev/null
two="$SHAREDSTORE_PG_DIR"
stop_servers() {
    for dir in "$one" "$two"; do
        $SHAREDSTORE_PG_AS "$SHAREDSTORE_PG_BIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1
        rm -rf "$dir"
    done
}
trap 'stop_servers; teardown' EXIT
psql_() { "$SHAREDSTORE_PG_BIN/psql" -X -q -t -A -v ON_ERROR_STOP=1 "$@"; }
server_one="host=$one port=5432 dbname=postgres"
server_two="host=$two port=5432 dbname=postgres"
directory="$server_one"

# The machines' role exists on both servers (roles belong to a server); the administrator is the
# servers' superuser, from the environment.
for dir in "$one" "$two"; do psql_ -h "$dir" -c "CREATE ROLE team_machine LOGIN" >/dev/null; done
PGHOST="$one" storectl mirror-admin --create-space team --json >/dev/null
PGHOST="$one" storectl mirror-admin --grant team --role team_machine --json >/dev/null
storectl mirror-admin --place team --on "$server_one" --directory "$directory" --json >/dev/null
assert_eq "$(storectl mirror-admin --list --directory "$directory" --json | jq_ 'lines[0]["server"]')" "$server_one" \
    "the space directory places space team on the first server"

machines=("$work/a" "$work/b" "$work/c")
pids=()
for m in "${machines[@]}"; do
    share-extension share --group "$m" --url "https://placement.example/$(basename "$m")/0" --title "0" --json >/dev/null
    background "$m.mirror.out" env PGUSER=team_machine storectl mirror --follow --space team \
        --directory "$directory" --group "$m" --json
    pids+=("$last_pid")
done
for m in "${machines[@]}"; do wait_for_line "$m.mirror.out" '"lag":0' 30 || finish; done
ok "three machines mirror space team through the directory"

# Every machine saves while the space moves: first → second → first → second → first.
per=100
writers=()
for m in "${machines[@]}"; do
    ( for i in $(seq 1 "$per"); do
        share-extension share --group "$m" --url "https://placement.example/$(basename "$m")/$i" --title "$i" \
            --json >/dev/null || exit 1
    done ) &
    writers+=("$!")
done
# Each move waits for 10 more uploads on the space's server (an event with a deadline, not a pause).
rows_on() { psql_ -h "$1" -c "SELECT coalesce(max(sequence), 0) FROM sharedstore_space_team.transactions"; }
moves=0
current="$one"
for target in "$server_two" "$server_one" "$server_two" "$server_one"; do
    floor=$(( $(rows_on "$current") + 10 ))
    deadline=$((SECONDS + 60))
    until [ "$(rows_on "$current")" -ge "$floor" ]; do
        [ "$SECONDS" -lt "$deadline" ] || { fail "no 10 uploads on ${current} within 60 s"; break; }
        kill -0 "${writers[@]}" 2>/dev/null || { fail "the machines finished saving before move $((moves + 1))"; break; }
        sleep 0.02
    done
    if out="$(storectl mirror-admin --move team --to "$target" --directory "$directory" --json 2>&1)"; then
        moves=$((moves + 1))
        copied="$(printf '%s\n' "$out" | jq_ 'lines[0]["transactions"]')"
        echo "  moved to ${target%% *} with $copied rows"
        current="$(printf '%s\n' "$target" | sed 's/^host=\([^ ]*\) .*/\1/')"
    else
        fail "move to $target: $(printf '%s\n' "$out" | head -n 3)"
    fi
done
for w in "${writers[@]}"; do wait "$w" || fail "a machine's saves failed while the space moved"; done
assert_eq "$moves" 4 "the space moved four times while the machines saved"
assert_eq "$(storectl mirror-admin --list --directory "$directory" --json | jq_ 'lines[0]["server"]')" "$server_one" \
    "the directory names the space's last server"

# Every machine converges on every save, each once.
total=$(( (per + 1) * 3 ))
gids() { main-app list --group "$1" --json | jq_ 'sorted(l["gid"] for l in lines)'; }
urls() { main-app list --group "$1" --json | jq_ 'len(set(l["url"] for l in lines))'; }
deadline=$((SECONDS + 120))
until [ "$(urls "${machines[0]}")" -eq "$total" ] && [ "$(gids "${machines[0]}")" = "$(gids "${machines[1]}")" ] \
    && [ "$(gids "${machines[0]}")" = "$(gids "${machines[2]}")" ]; do
    [ "$SECONDS" -lt "$deadline" ] || { fail "the machines did not converge on $total articles"; break; }
    sleep 0.2
done
for m in "${machines[@]}"; do
    assert_eq "$(main-app list --group "$m" --json | wc -l) $(urls "$m")" "$total $total" \
        "$(basename "$m") holds every save once ($total articles, no url twice)"
done
grep -q '"the space moved' "${machines[0]}.mirror.out" "${machines[1]}.mirror.out" "${machines[2]}.mirror.out" \
    && ok "the followers saw the moves and looked the space up again"
rows="$(psql_ -h "$one" -c "SELECT count(*), count(DISTINCT (origin, token)) FROM sharedstore_space_team.transactions")"
assert_eq "${rows%%|*}" "${rows##*|}" "the log on the last server holds each upload once ($rows)"
moved="$(psql_ -h "$two" -c "SELECT count(*) FROM sharedstore_space_team.meta WHERE key = 'moved_to'")"
assert_eq "$moved" 1 "the copy left on the other server is marked moved (it takes no upload)"
for pid in "${pids[@]}"; do kill -TERM "$pid"; done
for pid in "${pids[@]}"; do wait_exit "$pid" 20 >/dev/null || true; done
for m in "${machines[@]}"; do
    if out="$(PGUSER=team_machine storectl mirror --verify --space team --directory "$directory" --group "$m" --json 2>&1)"; then
        ok "storectl mirror --verify is clean on $(basename "$m")"
    else
        fail "storectl mirror --verify on $(basename "$m"): $(printf '%s\n' "$out" | head -n 3)"
    fi
done
finish
