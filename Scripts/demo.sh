#!/usr/bin/env bash
# The tour: a share extension, a main app and a widget share one store through a private group
# directory; the widget follows live, a cleaner deletes only what all of them have merged; an app
# update migrates the store; a second machine converges with the first through PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."
. Scripts/lib/setup.sh
sharedstore_ensure_packages

bold() { if [ -t 1 ]; then printf '\033[1m%s\033[0m\n' "$*"; else printf '%s\n' "$*"; fi; }
step() { echo; bold "== $*"; }
run() { printf '$'; printf ' %q' "$@"; echo; "$@"; }

step "Building the targets in release (first time: a few minutes)"
swift build -c release 2>&1 | tail -n 1
bin="$(swift build -c release --show-bin-path)"
export PATH="$bin:$PATH"

work="$(mktemp -d)"
export SHAREDSTORE_GROUP="$work/group"
widget_log="$work/widget.log"
cleanup() {
    [ -n "${watcher:-}" ] && kill "$watcher" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# Waits (up to 10 s) until the widget watcher has printed more than N lines, then shows the new ones.
follow() {
    local before="$1" deadline=$((SECONDS + 10))
    while [ "$(wc -l <"$widget_log")" -le "$before" ] && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.05; done
    tail -n +"$((before + 1))" "$widget_log" | sed 's/^/    [widget, live] /'
}

step "A private group directory, like an app-group container: $SHAREDSTORE_GROUP"
run main-app sync --json

step "The widget starts watching in the background (it prints a fresh summary after each merge)"
widget watch --json >"$widget_log" &
watcher=$!
follow 0

step "The share extension shares three links, in three processes, as author ShareExtension"
n=$(wc -l <"$widget_log")
run share-extension share --url https://www.swift.org/blog/ --title "Swift blog" --category Swift --json
run share-extension share --url https://sqlite.org/wal.html --title "Write-Ahead Logging" --category Databases --json
run share-extension share --url https://www.symas.com/lmdb --title "LMDB" --category Databases --json
follow "$n"

step "The main app syncs: it merges the share extension's history after its token"
run main-app sync --json

step "It marks one article read and deletes another, as author MainApp"
n=$(wc -l <"$widget_log")
run main-app mark-read Article/1 --json
run main-app delete Article/3 --json
follow "$n"

step "What the main app lists now"
run main-app list

step "The widget stops (SIGTERM: it saves its token and exits 0); two more links are shared meanwhile"
kill -TERM "$watcher"; wait "$watcher" && echo "widget exited 0"; watcher=""
run share-extension share --url https://www.kernel.org/doc/html/latest/filesystems/inotify.html --title "inotify" --json
run share-extension share --url https://en.wikipedia.org/wiki/Write-ahead_logging --title "WAL, the idea" --category Databases --json
run main-app sync --json

step "Where each consumer stands in the token registry (tokens.lmdb): the widget is behind"
run storectl tokens

step "The cleaner deletes only what every consumer has merged: it stops at the widget's token"
run history-cleaner --json
run storectl history

step "The widget comes back and merges what it missed; now the rest of the history can go"
run widget show --json
run history-cleaner --json

step "The store, the registry and their invariants"
run storectl stats
run storectl verify
ls -la "$SHAREDSTORE_GROUP"

step "An app update: version 1 of the targets shares into a new group; version 2 opens it and migrates it"
export SHAREDSTORE_GROUP="$work/update"
run share-extension share --model-version 1 --url https://www.swift.org/ --title "Swift" --category Swift --json
run main-app sync --model-version 1 --json
run storectl migrate --dry-run
run share-extension share --url https://sqlite.org/lang_altertable.html --title "ALTER TABLE" --category Swift --json
run storectl history --author Migration --json
echo "\$ widget show --model-version 1   # a widget process of the old version"
widget show --model-version 1 || echo "(exit $?: it must be updated)"
run main-app sync --json
run storectl schema
run storectl verify

step "A second machine: another group directory, mirrored with the first through PostgreSQL"
. Scripts/lib/postgres.sh
sharedstore_postgres_start
trap 'sharedstore_postgres_stop; cleanup' EXIT
echo "(a server of the demo's own, in a temporary directory; libpq's environment names it: PGHOST=$PGHOST)"
machine_a="$work/group"
machine_b="$work/laptop"
run storectl mirror --group "$machine_a" --json
run share-extension share --group "$machine_b" --url https://www.postgresql.org/docs/current/sql-notify.html \
    --title "NOTIFY" --category Databases --json
storectl mirror --follow --group "$machine_a" --json >"$work/mirror-a.log" &
mirror_a=$!
storectl mirror --follow --group "$machine_b" --json >"$work/mirror-b.log" &
mirror_b=$!
echo "(storectl mirror --follow runs for each machine: every save is pushed, every upload pulled, as they happen)"
run share-extension share --group "$machine_a" --url https://www.postgresql.org/docs/current/explicit-locking.html \
    --title "Advisory locks" --category Databases --json
# Waits (up to 10 s) until both machines list the same articles by global id.
listing() { main-app list --group "$1" --json | python3 -c 'import json,sys; print(sorted((j["gid"], j["title"], j["category"]) for j in map(json.loads, sys.stdin)))'; }
deadline=$((SECONDS + 10))
until [ "$(listing "$machine_a")" == "$(listing "$machine_b")" ] || [ "$SECONDS" -ge "$deadline" ]; do sleep 0.05; done
step "Both machines list the same articles, by global id (the category Databases, made on both, is one)"
run main-app list --group "$machine_b"
if [ "$(listing "$machine_a")" == "$(listing "$machine_b")" ]; then echo "machine A and machine B agree"; else echo "they differ"; exit 1; fi
run storectl tokens --group "$machine_b"
run storectl history --group "$machine_b" --author Mirror --limit 2 --json
kill -TERM "$mirror_a" "$mirror_b"; wait "$mirror_a" "$mirror_b" 2>/dev/null || true
