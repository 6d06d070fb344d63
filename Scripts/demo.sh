#!/usr/bin/env bash
# The tour: two processes with different transaction authors write one store in a private group
# directory, and a reader prints the history after its token.
set -euo pipefail
cd "$(dirname "$0")/.."
. Scripts/lib/setup.sh
sharedstore_ensure_packages

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "building in release"
swift build -c release --product sharedstore-helper 2>&1 | tail -n 1
bin="$(swift build -c release --show-bin-path)"

group="$(mktemp -d)/group"
trap 'rm -rf "$(dirname "$group")"' EXIT
say "group directory: $group"

say "the reader notes where history stands now (its token)"
"$bin/sharedstore-helper" write --group "$group" --author Setup --count 1
token=$("$bin/sharedstore-helper" history --group "$group" | tail -n 1 | sed 's/.*"token":"\([^"]*\)".*/\1/')
echo "token: $token"

say "ShareExtension and MainApp write at the same time, from two processes"
"$bin/sharedstore-helper" write --group "$group" --author ShareExtension --count 3 &
"$bin/sharedstore-helper" write --group "$group" --author MainApp --count 3 &
wait

say "the reader fetches the history after its token, skipping MainApp's own saves"
"$bin/sharedstore-helper" history --group "$group" --after "$token" --exclude-author MainApp

say "files of the group directory (private: 0700 / 0600)"
ls -la "$group"
if command -v sqlite3 >/dev/null 2>&1; then
    say "the same history, straight from SQLite"
    sqlite3 "$group/Store.sqlite" "SELECT token, author, context, executable FROM ss_history ORDER BY token"
fi
