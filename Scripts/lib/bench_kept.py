"""The "does not drop" goals of BENCHMARKS.md: build 741c53e, whose run set the save goals' figures,
run beside this build by Scripts/bench-against.sh (bench/against.jsonl). Read by bench_report.py."""

# A drop of more than 3% of the reference build's throughput misses.
KEPT = 0.97
# The figures the goals were set with, and the build that measured them.
GOAL_BUILD, GOAL_FIGURES = "741c53e", {"save-history": 0.637, "update-property": 0.458}


def _mid(xs):
    xs = sorted(xs)
    return (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2


def compare(against, by, goals, unread, against_path, number):
    """Adds a `CASE-kept` entry to `by` for each goal case both builds measured, and returns `goals`
    with the goal on the old figure replaced by the goal on the reference build's throughput.
    `against`: case -> build -> its result lines."""
    for case, old in GOAL_FIGURES.items():
        builds = against.get(case, {})
        ref = [b for b in builds if b != "this"]
        if "this" not in builds or len(ref) != 1:
            if len(ref) > 1:
                unread.append("%s: %s measured against %d builds (%s): no comparison" % (
                    against_path, case, len(ref), ", ".join(ref)))
            continue
        # SharedStore's own throughput, this build's over the reference's: each build measures
        # with its own storebench, and the C baselines beside them may differ (see
        # Scripts/bench-against.sh). Compared turn by turn (the two runs of a turn are back to
        # back): the machine's speed moves by more between turns than between the two runs of one.
        # The reference runs first in odd turns, this build in even ones: the median of each order,
        # then their mean, so that an odd number of turns (more of one order) does not let a machine
        # that slows through each turn favour the build run second.
        theirs_by_turn = {r.get("turn"): r for r in builds[ref[0]] if number(r.get("turn"))}
        orders = {}
        for r in builds["this"]:
            if number(r.get("turn")) and r["turn"] in theirs_by_turn:
                orders.setdefault(int(r["turn"]) % 2, []).append(r["ours"] / theirs_by_turn[r["turn"]]["ours"])
        if not orders:
            unread.append("%s: %s has no turn measured by both builds: no comparison" % (against_path, case))
            continue
        pairs = sorted(x for xs in orders.values() for x in xs)
        # How far the machine moved between a turn's two runs: the C API, the same code on each side.
        machine = sorted(r["baseline"] / theirs_by_turn[r["turn"]]["baseline"] for r in builds["this"]
                         if number(r.get("turn")) and r["turn"] in theirs_by_turn
                         and number(r.get("baseline")) and number(theirs_by_turn[r["turn"]].get("baseline"))
                         and theirs_by_turn[r["turn"]]["baseline"] > 0)
        ratios = {b: [r["ratio"] for r in builds[b] if number(r.get("ratio"))] for b in ("this", ref[0])}
        by[case + "-kept"] = {"kept": round(sum(_mid(xs) for xs in orders.values()) / len(orders), 3),
                              "turns": len(pairs), "spread": [round(pairs[0], 3), round(pairs[-1], 3)],
                              "reference": ref[0], "this": builds["this"], "theirs": builds[ref[0]],
                              "machine": [round(machine[0], 3), round(machine[-1], 3)] if machine else None,
                              "ratios": {b: round(_mid(xs), 3) for b, xs in ratios.items() if xs}}
        goals = [g for g in goals if not (g[0] == case and g[2] == old)]
        set_by = " (%s when the goal was set)" % old if ref[0].startswith(GOAL_BUILD) else ""
        goals.append((case + "-kept", "kept", KEPT, ">=",
                      "%s does not drop%s: this build's SharedStore throughput over build %s's in the same turn "
                      "(the mean of the medians of each order); a drop over %d%% misses" % (
                          case, set_by, ref[0], round((1 - KEPT) * 100))))
    return goals


def paragraph(by, fmt):
    """The text under the goals table on how the "does not drop" rows were measured; None when no
    case was compared."""
    kept = [(c[:-len("-kept")], r) for c, r in by.items() if c.endswith("-kept")]
    if not kept:
        return None
    turn = lambda x: "%s/s (C API %s, ratio %.3f)" % (fmt(x["ours"]), fmt(x.get("baseline", 0)), x["ratio"])
    return ("The \"does not drop\" rows: `Scripts/bench-against.sh` ran that build's storebench and this "
            "one's in turns, after the full run, back to back within a turn and first in alternate turns (a "
            "machine that slows through the run does not favour either); each run is seven rounds. Each "
            "turn gives this build's throughput over that build's; the goal takes the median of the turns of "
            "each order and the mean of the two (%s). Compared is SharedStore's throughput: each build measures "
            "with its own storebench, and SharedStore now turns SQLite's memory statistics off for its whole "
            "process, which speeds the C baseline beside it more, in proportion, than SharedStore: the ratios of "
            "two builds differ by more than the library. Each turn: %s.%s\n" % (
                "; ".join("%s %.3f over %d turns, spread %s…%s%s%s" % (
                    case, r["kept"], r["turns"], r["spread"][0], r["spread"][1],
                    ", the C API of this build's run over that build's %s…%s" % tuple(r["machine"])
                    if r.get("machine") else "",
                    ", the ratio to the C API within each run (median of the turns) %s for this build and %s "
                    "for that build" % (r["ratios"].get("this"), r["ratios"].get(r["reference"]))
                    if len(r.get("ratios", {})) == 2 else "") for case, r in kept),
                "; ".join("%s: %s for %s; %s for this build" % (
                    case, ", ".join(turn(x) for x in r["theirs"]), r["reference"],
                    ", ".join(turn(x) for x in r["this"])) for case, r in kept),
                " The goals' figures (%s) were measured by that build on this machine at another speed: the "
                "ratios follow the machine, and a build run beside a build does not." % " and ".join(
                    str(v) for v in GOAL_FIGURES.values())
                if all(r["reference"].startswith(GOAL_BUILD) for _, r in kept) else ""))
