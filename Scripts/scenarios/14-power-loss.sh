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

# Mounts powerfs (seed $3) of backing dir $1 on $2, its output in $4; sets pf to its pid.
powerfs_mount() {
    mkdir -p "$1" "$2"
    "$powerfs" "$1" "$2" "$3" -f >"$4" 2>/dev/null &
    pf=$!
    for _ in $(seq 1 100); do mountpoint -q "$2" && break; sleep 0.05; done
}

# Loses everything unsynced on powerfs $1 (output $2, mount $3), then unmounts it.
powerfs_cut() {
    kill -USR1 "$1"
    for _ in $(seq 1 100); do [ -s "$2" ] && break; sleep 0.05; done
    fusermount3 -u -z "$3"
    wait "$1" 2>/dev/null || true
}

# A deterministic case (hostile review): the cleaner deletes history by MainApp's last advance, the
# registry's last write; the power goes; MainApp must not find its history deleted.
cleaner_case() {
    local back="$work/cleaner-back" mnt="$work/cleaner-mnt" pf status=0
    powerfs_mount "$back" "$mnt" 7 "$work/cleaner-fs.out"
    local g="$mnt/g" e=(env SHAREDSTORE_BOOT_ID=cleaner-1)
    "${e[@]}" main-app sync --group "$g" --json >/dev/null
    "${e[@]}" widget show --group "$g" --json >/dev/null
    for i in 1 2 3 4 5; do
        "${e[@]}" share-extension share --group "$g" --url "https://c.example/$i" --title "c $i" --json >/dev/null
    done
    "${e[@]}" widget show --group "$g" --json >/dev/null
    "${e[@]}" main-app sync --group "$g" --json >/dev/null
    "${e[@]}" history-cleaner --group "$g" --json >"$work/cleaner.out"
    powerfs_cut "$pf" "$work/cleaner-fs.out" "$mnt"
    SHAREDSTORE_BOOT_ID=cleaner-2 main-app sync --group "$back/g" --json >"$work/cleaner-sync.out" || status=1
    assert_eq "$(jq_ 'j["expired"]' <"$work/cleaner-sync.out")" "false" \
        "the cleaner deleted by a position a power loss cannot take back (deleted $(jq_ 'j["deleted"]' <"$work/cleaner.out"))"
    return "$status"
}

# The same for storectl repair-registry (second review): its new registry's only commit must be on
# disk when it reports success, or the empty registry reads as a lost one after a power loss.
repair_case() {
    local back="$work/repair-back" mnt="$work/repair-mnt" pf status=0
    powerfs_mount "$back" "$mnt" 8 "$work/repair-fs.out"
    local g="$mnt/g" e=(env SHAREDSTORE_BOOT_ID=repair-1)
    "${e[@]}" main-app add --group "$g" --url "https://r.example/" --title r --json >/dev/null
    "${e[@]}" main-app sync --group "$g" --json >/dev/null
    "${e[@]}" storectl repair-registry --force --group "$g" --json >/dev/null
    powerfs_cut "$pf" "$work/repair-fs.out" "$mnt"
    if SHAREDSTORE_BOOT_ID=repair-2 storectl verify --group "$back/g" --json >"$work/repair-verify.out" 2>&1; then
        ok "a registry repaired just before a power loss is still the repaired one"
    else
        fail "after repair-registry and a power loss: $(grep -v '"ok":true' "$work/repair-verify.out" | head -n 2)"
    fi
    return "$status"
}

# powerfs, built by the driver when missing or older than its source.
python3 "$here/../lib/powerloss.py" --build-only
powerfs="$here/../../.build/powerfs/powerfs"
# powerfs must show a process the page it just wrote through its mapping (LMDB's writers read their
# pages back so): a stale page there damaged registries in earlier runs, the test disk's fault.
if python3 "$here/../lib/powerloss.py" --coherence 3 2>"$work/coherence.out"; then
    ok "powerfs shows a page written with pwrite through the writer's mapping at once ($(cat "$work/coherence.out"))"
else
    fail "powerfs served a stale page through a mapping: $(head -n 3 "$work/coherence.out")"
fi
cleaner_case || fail "the cleaner case did not run through"
repair_case || fail "the repair case did not run through"

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
