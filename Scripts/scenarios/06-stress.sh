# The short stress run of the test suite: real writers, consumers and cleaner, kill -9 every
# 500 ms, fixed seed; then a run with a deliberately faulty consumer must be caught.
. "$(dirname "$0")/lib.sh"
setup

if storectl stress --group "$work/stress" --writers 4 --consumers 2 --seconds "${STRESS_SECONDS:-25}" --kill-every 500 --clean-every 300 --seed 20261130 --json >"$work/stress.out" 2>"$work/stress.err"; then
    ok "stress: $(cat "$work/stress.out")"
else
    fail "stress found violations: $(cat "$work/stress.out") $(tail -n 3 "$work/stress.err")"
fi
assert_eq "$(jq_ 'j["ok"] and j["kills"] > 0 and j["saves"] > 100' <"$work/stress.out")" true "saves were made, processes were killed, no violation"

status=0
SHAREDSTORE_STRESS_DROP_EVERY=7 storectl stress --group "$work/faulty" --writers 2 --consumers 1 --seconds 3 --kill-every 0 --seed 5 --json >"$work/faulty.out" 2>/dev/null || status=$?
assert_eq "$status" 1 "a consumer that loses transactions makes stress fail"
assert_eq "$(jq_ 'any("run" in v and "missing" in v for v in j["violations"])' <"$work/faulty.out")" true "naming the missing tokens"
finish
