# Power loss (issue 20): the targets, storectl stress writers and consumers, the cleaner and a mirror
# work on a group directory inside powerfs, a FUSE file system that forgets what was not synced;
# it loses power at a random moment (everything unsynced, or a random subset), the machine
# reboots, and every promise is checked (Scripts/lib/powerloss.py says which). A few seeds in the
# default mode and one durable; `Scripts/stress.sh --power-loss` runs seeds for 10 minutes.
# SHAREDSTORE_POWERLOSS_SEED replays a seed.
. "$(dirname "$0")/lib.sh"
if [ "$(id -u)" -ne 0 ] || [ ! -c /dev/fuse ]; then
    fail "the power-loss scenario needs root and /dev/fuse (FUSE) to mount its file system"
    exit 1
fi
. "$here/../lib/postgres.sh"
setup
sharedstore_postgres_start 2>/dev/null
trap 'sharedstore_postgres_stop; teardown' EXIT

seed="${SHAREDSTORE_POWERLOSS_SEED:-$((RANDOM * 32768 + RANDOM))}"
run() {
    local what="$1"; shift
    if python3 "$here/../lib/powerloss.py" --bin "$BIN" --mirror "$@" >"$work/powerloss.out" 2>"$work/powerloss.err"; then
        ok "$what: $(python3 "$here/../lib/powerloss_report.py" "$work/powerloss.out")"
    else
        fail "$what: $(tail -n 3 "$work/powerloss.out" "$work/powerloss.err")"
    fi
}
run "default mode, every promise after the losses" --seed "$seed" --seeds 3
run "durable mode, no acknowledged save lost" --seed "$((seed + 100))" --seeds 1 --durable
finish
