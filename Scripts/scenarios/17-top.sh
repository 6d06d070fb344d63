# storectl top as a person uses it: in a terminal (tmux), redrawn in place while other processes
# save, fitted to the terminal's size, quit with q or Ctrl-C with the terminal put back; --json
# gives the same numbers as one line per interval.
. "$(dirname "$0")/lib.sh"
setup
g="$SHAREDSTORE_GROUP"
for i in 1 2 3; do share-extension share --url "https://t.example/$i" --title "t$i" --json >/dev/null; done
main-app sync --json >/dev/null
widget show --json >/dev/null
sessions=0
sock="$work/tmux-0.sock"
tm() { tmux -S "$sock" "$@"; }
# The pane's text until it shows PATTERN (or 20 s pass).
screen_until() {
    local pattern="$1" deadline=$((SECONDS + 20))
    while [ $SECONDS -lt $deadline ]; do
        tm capture-pane -p -t top >"$work/screen" 2>/dev/null
        grep -q -- "$pattern" "$work/screen" && return 0
        sleep 0.1
    done
    return 1
}
# A pane of 100 × 30 running top, kept open after it ends so that its end can be read.
start_top() {
    tm kill-server 2>/dev/null || true
    sessions=$((sessions + 1)); sock="$work/tmux-$sessions.sock"   # a server of its own each time
    tm -f /dev/null new-session -d -s top -x "${1:-100}" -y "${2:-30}" \
        "PATH='$PATH' SHAREDSTORE_GROUP='$g' storectl top --interval 0.2; echo \"top exited \$?\"; sleep 600"
}
trap 'tm kill-server 2>/dev/null || true; teardown' EXIT

start_top
screen_until "SharedStore top" && ok "top draws its screen in the terminal" || fail "no screen: $(cat "$work/screen")"
screen_until "MainApp" && ok "it lists the consumers" || fail "no consumers: $(cat "$work/screen")"
for i in 4 5 6 7 8; do share-extension share --url "https://t.example/$i" --title "t$i" --json >/dev/null; done
screen_until "ShareExtension" && ok "another process's saves show as saves per second by author" \
    || fail "no author: $(cat "$work/screen")"
screen_until "Widget *5 " && ok "the widget's lag shows 5 transactions" || fail "no lag: $(cat "$work/screen")"
lines="$(grep -c "SharedStore top" "$work/screen")"
assert_eq "$lines" 1 "the screen is redrawn in place (one header, not a scroll of frames)"
background "$work/pin.out" "$BIN/sharedstore-helper" hold-pin --group "$g"
wait_for_line "$work/pin.out" pinned
screen_until "sharedstore-helper" && ok "the processes holding the store include the pinning helper" \
    || fail "no helper: $(cat "$work/screen")"
kill -9 "$last_pid"; wait "$last_pid" 2>/dev/null || true
tm send-keys -t top q
screen_until "top exited 0" && ok "q quits with status 0" || fail "q: $(cat "$work/screen")"
grep -q "SharedStore top" "$work/screen" && fail "the dashboard stayed on the screen" \
    || ok "the terminal is put back (the alternate screen is gone)"
[ "$(tm display -p -t top '#{cursor_flag}')" == 1 ] && ok "the cursor shows again" || fail "the cursor stays hidden"

# A small terminal: every line fits its width, and the screen its height.
start_top 50 8
screen_until "SharedStore top" || fail "no screen in a small terminal"
too_wide="$(python3 -c 'import sys; print(sum(len(l.rstrip("\n")) > 50 for l in open(sys.argv[1], encoding="utf-8")))' "$work/screen")"
assert_eq "$too_wide" 0 "no line is wider than 50 columns"
[ "$(grep -cv '^$' "$work/screen")" -le 8 ] && ok "no more lines than 8 rows" || fail "too tall: $(cat "$work/screen")"
tm send-keys -t top C-c
screen_until "top exited 0" && ok "Ctrl-C quits with status 0, the terminal put back" || fail "C-c: $(cat "$work/screen")"
tm kill-server 2>/dev/null || true

# Signals from outside end it at once, whatever the interval, with the terminal put back.
for sig in INT TERM; do
    tm kill-server 2>/dev/null || true
    sessions=$((sessions + 1)); sock="$work/tmux-$sessions.sock"
    tm -f /dev/null new-session -d -s top -x 80 -y 20 \
        "PATH='$PATH' SHAREDSTORE_GROUP='$g' storectl top --interval 600; echo \"top exited \$?\"; sleep 600"
    screen_until "SharedStore top" || fail "no screen before SIG$sig"
    pid="$(pgrep -P "$(tm display -p -t top '#{pane_pid}')" storectl)"
    kill -"$sig" "$pid"
    screen_until "top exited 0" && ok "SIG$sig from outside ends it at once (interval 600 s), status 0" \
        || fail "SIG$sig: $(cat "$work/screen")"
    [ "$(tm display -p -t top '#{alternate_on} #{cursor_flag}')" == "0 1" ] \
        && ok "and the terminal is put back (main screen, cursor shown)" || fail "the terminal after SIG$sig"
done
tm kill-server 2>/dev/null || true

# For scripts: one JSON line per interval, the same numbers.
storectl top --json --interval 0.1 --count 3 >"$work/top.json"
assert_json_lines "$work/top.json" "top --json"
assert_eq "$(jq_ 'len(lines)' <"$work/top.json")" 3 "--count 3 gives three samples"
assert_eq "$(jq_ '[c["lag"] for c in j["consumers"] if c["consumer"] == "Widget"]' <"$work/top.json")" "[5]" \
    "the widget's lag in transactions"
expect_error 2 "top without a terminal" storectl top --interval 0.1
expect_error 2 "an interval out of range" storectl top --interval 0 --json
finish
