# The short stress run of the test suite: real writers, consumers and cleaner, kill -9 every
# 500 ms, fixed seed; then a run with a deliberately faulty consumer must be caught.
. "$(dirname "$0")/lib.sh"
setup

if storectl stress --group "$work/stress" --writers 4 --consumers 2 --seconds "${STRESS_SECONDS:-25}" --kill-every 500 --clean-every 300 --seed 20261130 --report "$work/report" --json >"$work/stress.out" 2>"$work/stress.err"; then
    ok "stress: $(cat "$work/stress.out")"
else
    fail "stress found violations: $(cat "$work/stress.out") $(tail -n 3 "$work/stress.err")"
fi
assert_eq "$(jq_ 'j["ok"] and j["kills"] > 0 and j["saves"] > 100' <"$work/stress.out")" true "saves were made, processes were killed, no violation"

# The report, as a person sees it: a real browser (headless chromium) renders the page; the
# rendered text and every chart are there, with no outside script or font.
page="$work/report/index.html"
[ -f "$page" ] && ok "stress wrote its report page" || fail "no report page in $work/report"
grep -qE '<script|https?://[^"]*\.(js|css|woff)' "$page" && fail "the page loads something from outside" || ok "the page is self-contained"
timeout 120 chromium --headless=new --no-sandbox --disable-gpu --dump-dom "file://$page" >"$work/dom.html" 2>/dev/null
for chart in saves latency lag history kills; do
    grep -q "<svg id=\"chart-$chart\"" "$work/dom.html" && ok "the browser renders the $chart chart" || fail "no $chart chart in the rendered page"
done
grep -q "Violations: 0" "$work/dom.html" && ok "the rendered page says no violation" || fail "violations: $(grep -o 'Violations: [0-9]*' "$work/dom.html")"
grep -q "20261130" "$work/dom.html" && ok "and shows the run's seed" || fail "no seed in the rendered page"

status=0
SHAREDSTORE_STRESS_DROP_EVERY=7 storectl stress --group "$work/faulty" --writers 2 --consumers 1 --seconds 3 --kill-every 0 --seed 5 --report "$work/faulty-report" --json >"$work/faulty.out" 2>/dev/null || status=$?
assert_eq "$status" 1 "a consumer that loses transactions makes stress fail"
assert_eq "$(jq_ 'any("run" in v and "missing" in v for v in j["violations"])' <"$work/faulty.out")" true "naming the missing tokens"
timeout 120 chromium --headless=new --no-sandbox --disable-gpu --dump-dom "file://$work/faulty-report/index.html" >"$work/faulty-dom.html" 2>/dev/null
grep -q "Violations: [1-9]" "$work/faulty-dom.html" && grep -q "missing" "$work/faulty-dom.html" \
    && ok "its report page lists the violations, with their detail" || fail "the faulty run's page: $(grep -o 'Violations: [0-9]*' "$work/faulty-dom.html")"
finish
