"""Turns storebench's JSON lines into BENCHMARKS.md, bench/chart.svg and bench/index.html.
usage: bench_report.py RESULTS.jsonl BENCHMARKS.md CHART.svg"""
import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone

sys.dont_write_bytecode = True  # no __pycache__ left in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_goals import GOALS, NOTES, REFERENCE, REFERENCE_FIGURES  # noqa: E402
from bench_page import write_chart, write_page  # noqa: E402
import bench_kept  # noqa: E402

results_path, md_path, svg_path = sys.argv[1:4]
# Inputs the report could not read all of: said in the report, never a crash.
unread = []


def read_lines(path):
    """The JSON objects of a JSON-lines file that name a case; a line that is not one is left out
    and counted in `unread`. A missing file or one that is not a regular file gives none."""
    if not os.path.isfile(path):
        if os.path.exists(path):
            unread.append("%s is not a regular file" % path)
        return []
    out, bad = [], 0
    with open(path, errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except ValueError:
                r = None
            if isinstance(r, dict) and isinstance(r.get("case"), str):
                out.append(r)
            else:
                bad += 1
    if bad:
        unread.append("%s: %d line%s left out (not a JSON object naming a case)" % (path, bad, "" if bad == 1 else "s"))
    return out


def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


rows = read_lines(results_path)
by = {r["case"]: r for r in rows}
meta = by.get("meta", {})

# "Does not drop": the build the goals' figures came from, run beside this one by
# Scripts/bench-against.sh (bench/against.jsonl), compared in the same run.
against_path = os.path.join(os.path.dirname(results_path) or ".", "against.jsonl")
against = {}
if meta.get("size") == "full":
    odd = 0
    for r in read_lines(against_path):
        if isinstance(r.get("build"), str) and all(number(r.get(k)) and r[k] > 0 for k in ("ratio", "ours")):
            against.setdefault(r["case"], {}).setdefault(r["build"], []).append(r)
        else:
            odd += 1
    if odd:
        unread.append("%s: %d result%s without a build, a positive ratio and throughput, left out" % (
            against_path, odd, "" if odd == 1 else "s"))
GOALS = bench_kept.compare(against, by, GOALS, unread, against_path, number)
if "history-fetch-1k" in by and "history-fetch-1m" in by:
    by["history-fetch-cost"] = {"cost": round(by["history-fetch-1k"]["ratio"] / by["history-fetch-1m"]["ratio"], 3)}


def cpu():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def mem():
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                return "%.0f GiB" % (int(line.split()[1]) / 1024 / 1024)
    except OSError:
        pass
    return "?"


def fmt(v):
    if isinstance(v, float) and v != int(v):
        return "%.3g" % v if abs(v) < 100 else "{:,.0f}".format(v)
    if isinstance(v, (int, float)):
        return "{:,}".format(int(v))
    return str(v)


def check(case, field, goal, op):
    r = by.get(case)
    if not r or field not in r:
        return None, None
    v = r[field]
    ok = v >= goal if op == ">=" else v <= goal
    if case == "writers-8" and r.get("failed", 0) > 0:
        ok = False
    return v, ok


swift = subprocess.run(["swift", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
out = []
out.append("# Benchmarks\n")
out.append("SharedStore against raw SQLite in the same process, interleaved round by round "
           "(`storebench`). Ratio = SharedStore throughput / baseline throughput: 1.0 would be free.\n")
out.append("| | |\n| --- | --- |")
out.append("| machine | %s, %s cores, %s |" % (cpu(), meta.get("cores", "?"), mem()))
out.append("| system | %s %s |" % (platform.system(), platform.release()))
out.append("| SQLite | %s, %s, single-row transactions with `BEGIN IMMEDIATE` |" % (meta.get("sqlite", "?"), meta.get("pragmas", "")))
out.append("| Swift | %s, release build |" % swift)
if meta.get("code"):
    out.append("| code | %s |" % meta["code"])
# A case measured apart from the full run carries its own time ("measured"): say so.
apart = ["%s: %s" % (r["case"], r["measured"]) for r in by.values() if "measured" in r]
out.append("| run | %s, size %s, %s rounds per case (median; spread = min…max ratio)%s |\n" % (
    meta.get("run") or datetime.fromtimestamp(os.path.getmtime(results_path), timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), meta.get("size", "?"),
    meta.get("rounds", "?"), "; measured apart, release build, 9 rounds: " + ", ".join(apart) if apart else ""))

out.append("## Against the baseline\n")
def cpu_cell(r):
    """The ratio in CPU time (both sides' operations per CPU second of the process), when measured."""
    if not isinstance(r.get("cpu_ratio"), (int, float)):
        return ""
    spread = r.get("cpu_spread") if isinstance(r.get("cpu_spread"), list) else None
    return "%.3f" % r["cpu_ratio"] + (" (%s…%s)" % (spread[0], spread[1]) if spread else "")


def cpu_only(r):
    """The CPU ratio alone, when measured."""
    return "%.3f" % r["cpu_ratio"] if isinstance(r.get("cpu_ratio"), (int, float)) else ""


out.append("| case | SharedStore | baseline | unit | ratio | spread | CPU ratio (spread) |")
out.append("| --- | ---: | ---: | --- | ---: | --- | ---: |")
for name in ["save-history", "save-no-history", "save-history-durable", "batch-insert", "update-property",
             "history-fetch-1k", "history-fetch-1m", "query-indexed", "save-history-mirrored", "save-history-watched",
             "save-history-top"]:
    r = by.get(name)
    if r:
        label = name + (" (%s retained before)" % fmt(r["retained_before"]) if "retained_before" in r else "")
        if name == "save-history-durable":
            label += " (synchronous=FULL, against SQLite at FULL)"
        out.append("| %s | %s | %s | %s | **%.3f** | %s…%s | %s |" % (
            label, fmt(r["ours"]), fmt(r["baseline"]), r["unit"], r["ratio"], r["spread"][0], r["spread"][1],
            cpu_cell(r)))
out.append("")
out.append("Baselines: the same `Item` rows written straight through SQLite's C API (prepared statements, same pragmas), "
           "with **no history**; for history fetch, the same rows selected raw without decoding.\n")
out.append("Ratio is of wall time; **CPU ratio** is the same comparison in CPU time (each side's operations per "
           "CPU second of the process, all threads). Where the two differ, the machine made both sides wait (the "
           "disk, the page cache, another process): that wait is about the same time on each side, so it pulls the "
           "wall ratio towards 1, the more so the slower the storage is against the CPU. This is why the save "
           "ratios did not travel between machines (issue 22): compare CPU ratios between machines and builds.\n")
memory_path = os.path.join(os.path.dirname(results_path) or ".", "results-memory.jsonl")
if meta.get("size") == "full" and os.path.exists(memory_path):
    memory = {r["case"]: r for r in (json.loads(l) for l in open(memory_path) if l.strip())}
    names = [n for n in ["save-history", "save-no-history", "update-property"] if n in memory and n in by]
    if names:
        out.append("The saves once more right after this run, with every store in memory (tmpfs), where nothing "
                   "waits for the disk; wall and CPU ratios then agree, and they are what the code costs:\n")
        out.append("| case | on disk: C API | wall ratio | CPU ratio | in memory: C API | wall ratio | CPU ratio |")
        out.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for n in names:
            d, m = by[n], memory[n]
            out.append("| %s | %s %s | %.3f | %s | %s %s | %.3f | %s |" % (
                n, fmt(d["baseline"]), d["unit"], d["ratio"], cpu_only(d), fmt(m["baseline"]), m["unit"], m["ratio"],
                cpu_only(m)))
        out.append("")
out.append("Measured apart (issue 22): on the disk each side waits in the kernel, about 1,000 voluntary context switches in 18,000 saves "
           "(the checkpoints' fsyncs, writes into the page cache), and `strace -f -y` counts the same file system "
           "calls on both sides but one, the 8-byte `pwrite` of the change signal after each SharedStore save. By "
           "instruction count (callgrind, save-history, one row a save) a SharedStore save is 72k instructions "
           "against the C API's 30k; SQLite's own work is 40k of the 72k (the commit of one more page, the history "
           "row's; the history insert; the data insert), the rest is the context's: pending objects, validation, "
           "the save's result.\n")
if "history-fetch-1k" in by and "history-fetch-1m" in by:
    k, m = by["history-fetch-1k"], by["history-fetch-1m"]
    # The two cases run minutes apart; each is normalized by the baseline of its own rounds so
    # that a machine slower at one moment does not show as a cost of retained history.
    cost = k["ratio"] / m["ratio"]
    out.append("Fetching after a token with %s transactions retained before it costs **%.2f×** the same fetch with %s retained "
               "(each against its own baseline; goal: at most 1.2; raw throughputs %s and %s transactions/s).\n" % (
                   fmt(m["retained_before"]), cost, fmt(k["retained_before"]), fmt(m["ours"]), fmt(k["ours"])))

out.append("## The product's model and queries\n")
out.append("The newest ReadLater model (validation patterns, derived `searchTitle`, kept counts, a hook) and the "
           "queries its targets run, each against the same work through SQLite's C API in the same run (the same "
           "indexes and constraints; the plain validation done in Swift beside the C calls).\n")
out.append("| case | SharedStore | baseline | unit | ratio | spread | CPU ratio (spread) | what |")
out.append("| --- | ---: | ---: | --- | ---: | --- | ---: | --- |")
WHAT = {
    "query-range": lambda r: "%s articles; plan: %s" % (fmt(r.get("rows", 0)), r.get("plan", "?")),
    "query-prefix": lambda r: "%s articles, %s matched per query; plan: %s" % (
        fmt(r.get("rows", 0)), r.get("matched_per_query", "?"), r.get("plan", "?")),
    "record-fetch": lambda r: "%s `Article` records against %s" % (fmt(r.get("rows", 0)), r.get("baseline_is", "?")),
    "batch-insert-full-model": lambda r: "links with a URL pattern, a unique URL, a derived indexed title, a folder's "
                                         "link count and an awakeFromInsert hook",
    "query-range-typed": lambda r: "the date range with key paths against the same with string keys",
    "batch-closure-typed": lambda r: "`batch { $0.insert(article) }` against `batch { $0.insert(\"Article\", row, object:) }` "
                                     "of the same values (each record encoded by the writer as it comes)",
    "batch-insert-typed": lambda r: "`batchInsert([Article])` against `batchInsert(\"Article\", rows)` of the same values "
                                    "(a large typed batch encodes on a second thread: see the CPU ratio)",
    "debug-switches": lambda r: "a context, a fetch, an update and a save with both switches off, against %s "
                                "(SQL debug on: %s workloads/s)" % (r.get("baseline_is", "?"), fmt(r.get("sql_debug_on", 0))),
}
for name in ["query-range", "query-prefix", "record-fetch", "batch-insert-full-model", "query-range-typed",
             "batch-insert-typed", "batch-closure-typed", "debug-switches"]:
    r = by.get(name)
    if r:
        out.append("| %s | %s | %s | %s | **%.3f** | %s…%s | %s | %s |" % (
            name, fmt(r["ours"]), fmt(r["baseline"]), r["unit"], r["ratio"], r["spread"][0], r["spread"][1],
            cpu_cell(r), WHAT[name](r)))
if "share-batch-1m-categories" in by:
    r = by["share-batch-1m-categories"]
    base = r.get("baseline_rows_per_s")
    out.append("| share-batch-1m-categories | **%s** | %s | rows/s | %s | | %s | `share-extension share-batch` of %s lines "
               "over %s categories, one process, model version %s, against the same lines through the C API in "
               "this process; peak RSS **%s MiB** |" % (
                   fmt(r["rows_per_s"]), fmt(base) if base else "", "**%.3f**" % r["ratio"] if "ratio" in r else "",
                   "%.3f (the process's CPU time)" % r["cpu_ratio"] if isinstance(r.get("cpu_ratio"), (int, float)) else "",
                   fmt(r["rows"]), fmt(r.get("categories", 0)), r.get("model_version", "?"), r["peak_rss_mib"]))
out.append("")

out.append("## Across processes\n")
out.append("| case | figures |")
out.append("| --- | --- |")
if "latency" in by:
    r = by["latency"]
    out.append("| latency: commit in one process → end of merge in another, %s commits | median **%s ms**, p99 **%s ms**, max %s ms (the save itself: %s ms median, included) |" % (
        r["commits"], r["median_ms"], r["p99_ms"], r["max_ms"], r["save_median_ms"]))
if "token-advance" in by:
    r = by["token-advance"]
    out.append("| advancing a consumer's token in the LMDB registry | **%s µs** (the default: each commit syncs its pages, "
               "MDB_NOMETASYNC; a power loss may take the last advance, never the registry), **%s µs** durable "
               "(pages and meta page synced: every advance survives) |" % (r["advance_us"], r["advance_durable_us"]))
    if "directory_sync_us" in r:
        out.append("| syncing the group directory after a group file is made or moved (once per file) | **%s µs** |" %
                   r["directory_sync_us"])
if "cleaner" in by:
    r = by["cleaner"]
    tail = ""
    if number(r.get("p99_writer_save_ms")) and number(r.get("p999_writer_save_ms")):
        tail = " (p99 %s ms, p99.9 %s ms)" % (r["p99_writer_save_ms"], r["p999_writer_save_ms"])
    out.append("| cleaner: deleting %s transactions in chunks of %s while a writer saves | %s deleted/s; longest writer stall **%s ms**%s over %s saves, %s failed |" % (
        fmt(r["deleted"]), r["chunk"], fmt(r["deleted_per_s"]), r["max_writer_stall_ms"], tail, fmt(r["writer_saves"]), r["writer_failed"]))
if "catch-up-memory" in by:
    r = by["catch-up-memory"]
    out.append("| catch-up: a consumer merging %s transactions | peak resident **%s MiB**, %s merged/s |" % (fmt(r["transactions"]), r["peak_rss_mib"], fmt(r["merged_per_s"])))
for n in [1, 2, 4, 8]:
    r = by.get("writers-%d" % n)
    if r:
        spread = r.get("spread")
        against = ""
        if number(r.get("ratio")):
            against = " (%.2f× one writer" % r["ratio"]
            if number(r.get("rounds")) and isinstance(spread, list) and len(spread) == 2:
                against += " in the same round: median of %d rounds, spread %s…%s" % (r["rounds"], spread[0], spread[1])
            against += ")"
        if number(r.get("steal_percent")):
            against += "; the host took %.1f%% of the processors (steal)" % r["steal_percent"]
        out.append("| %d writer process%s | %s saves/s aggregate%s, %s failed |" % (
            n, "" if n == 1 else "es", fmt(r["saves_per_s"]), against, r["failed"]))
if "share-batch-1m" in by:
    r = by["share-batch-1m"]
    out.append("| `share-extension share-batch` of %s lines, one transaction, as a process (model version 2) | **%s rows/s**, peak RSS **%s MiB** |" % (
        fmt(r["rows"]), fmt(r["rows_per_s"]), r["peak_rss_mib"]))
if "share-batch-1m-newest" in by:
    r = by["share-batch-1m-newest"]
    out.append("| the same share-batch with the newest model (derived searchTitle and articleCount, an index on searchTitle, awakeFromInsert) | **%s rows/s** (%s× the time of model version 2), peak RSS %s MiB |" % (
        fmt(r["rows_per_s"]), r["cost_vs_v2"], r["peak_rss_mib"]))
if "list-1m" in by:
    r = by["list-1m"]
    out.append("| `main-app list --json` over %s articles | **%s rows/s**, peak RSS **%s MiB** |" % (
        fmt(r["rows"]), fmt(r["rows_per_s"]), r["peak_rss_mib"]))
if "live-query-latency" in by:
    r = by["live-query-latency"]
    out.append("| live query (50 newest unread of %s rows): commit → diff delivered in another process, %s commits | median **%s ms**, p99 **%s ms**; its RSS %s → %s MiB |" % (
        fmt(r["rows"]), r["commits"], r["median_ms"], r["p99_ms"], r["rss_first_mib"], r["rss_last_mib"]))
if "widget-show-1m" in by:
    r = by["widget-show-1m"]
    out.append("| `widget show` on %s articles | median **%s s** (%s s on a 1-article store: **%s×**), peak RSS **%s MiB** |" % (
        fmt(r["rows"]), r["median_s"], r["one_article_median_s"], r["ratio_to_one_article"], r["peak_rss_mib"]))
if "migrate-add-attribute-1m" in by:
    r = by["migrate-add-attribute-1m"]
    out.append("| opening a store of %s rows with a model that adds an attribute (the migration runs in the open) | median **%s ms** (an open that migrates nothing: %s ms; SQLite's own ADD COLUMN: %s ms) |" % (
        fmt(r["rows"]), r["median_ms"], r["open_without_migration_ms"], r["raw_add_column_ms"]))
if "mirror-latency" in by:
    r = by["mirror-latency"]
    out.append("| mirror: save() on machine A → the import committed on machine B, through two `storectl mirror --follow` processes and the server (%s), %s commits | p50 **%s ms**, p99 **%s ms**, max %s ms |" % (
        meta.get("postgres", "?"), r["commits"], r["p50_ms"], r["p99_ms"], r["max_ms"]))
if "mirror-throughput" in by:
    r = by["mirror-throughput"]
    out.append("| mirror: %s one-article transactions pushed by one store, then pulled by another (each applied in a local transaction of its own) | pushed **%s/s**, pulled **%s/s** |" % (
        fmt(r["transactions"]), fmt(r["pushed_per_s"]), fmt(r["pulled_per_s"])))
if "mirror-space-throughput" in by:
    r = by["mirror-space-throughput"]
    out.append("| mirror in a space, as a login role granted it (no superuser), against the log outside any space in the same run (%s transactions, best of 3 each) | pushed **%s/s** (%s×), pulled **%s/s** (%s×) |" % (
        fmt(r["transactions"]), fmt(r["pushed_per_s"]), r["push_ratio"], fmt(r["pulled_per_s"]), r["pull_ratio"]))
if "mirror-spaces-server" in by:
    r = by["mirror-spaces-server"]
    out.append("| mirror: the whole server's uploads across %s spaces (4 connections as one login role granted them all, one upload per server transaction), against as many uploads into one space from the same connections | **%s uploads/s** (one space: %s/s, **%s×**) |" % (
        fmt(r["spaces"]), fmt(r["uploads_per_s"]), fmt(r["one_space_uploads_per_s"]), r["ratio"]))
if "mirror-bootstrap-1m" in by:
    r = by["mirror-bootstrap-1m"]
    out.append("| mirror: a machine joining a space of %s live objects (`storectl mirror --once` on an empty store: the snapshot, then the log after it) | **%s s** (%s objects/s), peak RSS **%s MiB**; the snapshot took %s s to make, on the machine that wrote them |" % (
        fmt(r["objects"]), r["seconds"], fmt(r["objects_per_s"]), r["peak_rss_mib"], r["snapshot_seconds"]))
if os.path.exists(os.path.join(os.path.dirname(os.path.abspath(sys.argv[2])), "bench", "failover.txt")):
    window = open(os.path.join(os.path.dirname(os.path.abspath(sys.argv[2])), "bench", "failover.txt")).read().strip()
    if window:
        out.append("| mirror: failover to a synchronous streaming standby during a burst of uploads (`Scripts/scenarios/18-failover.sh`, the same run) | %s |" % window)
if "mirror" in by and "skipped" in by["mirror"]:
    out.append("| mirror cases | skipped: %s |" % by["mirror"]["skipped"])
out.append("")
if "save-history-mirrored" in by and "save-history-watched" in by:
    m, w = by["save-history-mirrored"], by["save-history-watched"]
    out.append("Saves of the app while a mirror follows its store: **%.3f×** the same saves on a store nobody follows "
               "(spread %s…%s); while a `main-app watch` follows instead: %.3f× (spread %s…%s). On this 2-core machine "
               "the mirror process and the PostgreSQL server share the processors with the app.\n" % (
                   m["ratio"], m["spread"][0], m["spread"][1], w["ratio"], w["spread"][0], w["spread"][1]))

out.append("## Power loss\n")
if "save-history-durable" in by and "save-history" in by:
    d, n = by["save-history-durable"], by["save-history"]
    out.append("A durable save (`--durable`: synchronous=FULL, one fsync of the WAL per commit) runs at **%s saves/s**, "
               "%.3f× a default one (%s saves/s); against SQLite's own FULL commit it is %.3f× (spread %s…%s: an fsync "
               "dominates both, and its time varies from one to the next). The default mode's token lease adds one "
               "sync of the WAL per 4,096 saves, off the write lock (a commit synced under the lock only when the lease "
               "runs out first).\n" % (fmt(d["ours"]), d["ours"] / n["ours"], fmt(n["ours"]), d["ratio"],
                                                   d["spread"][0], d["spread"][1]))
losses = os.path.join(os.path.dirname(sys.argv[2]) or ".", "bench", "powerloss.jsonl")
if os.path.exists(losses):
    summary = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "powerloss_report.py"), losses],
                             capture_output=True, text=True).stdout.strip()
    out.append("Acknowledged saves lost per power loss in `Scripts/stress.sh --power-loss` (bench/powerloss.jsonl; "
               "the writers there are long-lived, so the default mode syncs only at a checkpoint):\n")
    for line in summary.splitlines():
        out.append("- " + line.strip())
    out.append("")

quick_path = os.path.join(os.path.dirname(results_path) or ".", "results-quick.jsonl")
quick = {r["case"]: r for r in read_lines(quick_path)} if meta.get("size") == "full" else {}
if quick and quick.get("meta", {}).get("size") != "quick":
    unread.append("%s is not a quick run's (its meta line says size %s): not compared" % (
        quick_path, quick.get("meta", {}).get("size")))
    quick = {}
if quick:
    both = [n for n, r in by.items() if number(r.get("ratio")) and number(quick.get(n, {}).get("ratio"))]
    if both:
        out.append("## Quick against full\n")
        out.append("`Scripts/bench.sh --quick` (smaller stores, fewer rounds) against this full run, case by case, "
                   "right after it on the same machine. The goal: within 10%. A case is compared by its CPU ratio "
                   "where both runs have one (the ratio that travels: the disk's wait, which the wall ratio "
                   "includes, is the same time on each side and pulls it towards 1), by its wall ratio otherwise.\n")
        out.append("| case | full (wall) | quick (wall) | full (CPU) | quick (CPU) | quick / full | full run's spread "
                   "| within 10% |")
        out.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")

        def cpu(r):
            v = r.get("cpu_ratio")
            return v if number(v) and v > 0 else None

        far, noisy = [], []
        for n in both:
            f, q = by[n]["ratio"], quick[n]["ratio"]
            fc, qc = cpu(by[n]), cpu(quick[n])
            a, b = (fc, qc) if fc and qc else (f, q)
            spread = by[n].get("cpu_spread" if fc and qc else "spread")
            rel = b / a if a else float("inf")
            if not (isinstance(spread, list) and len(spread) == 2 and all(number(v) for v in spread)):
                spread = None
            inside = spread is not None and spread[0] <= b <= spread[1]
            ok = abs(rel - 1) <= 0.10
            if not ok:
                (noisy if inside else far).append(n)
            show = lambda v: "%.3f" % v if v else ""
            out.append("| %s | %.3f | %.3f | %s | %s | %.2f | %s | %s |" % (
                n, f, q, show(fc), show(qc), rel,
                "%.3f…%.3f" % tuple(spread) if spread else "",
                "yes" if ok else "no, within the full run's spread" if inside else "**no**"))
        out.append("")
        out.append("%d of %d within 10%%%s%s. The quick run keeps the full run's batch sizes, history fetches, "
                   "saves per round and durable saves (each costs milliseconds); it makes smaller stores (100,000 "
                   "rows against 1,000,000: the reads of a store, retained history), keeps share-batch's "
                   "1,000,000 lines (at 100,000 the process's start weighs a tenth of its time) and the 1,000 "
                   "spaces and 20 uploads to each of mirror-spaces-server, and runs "
                   "three rounds instead of seven (the writer processes: three rounds of 1 s against five of 1.5 s, "
                   "each count of writers against one writer in the same round). A figure outside 10%% but inside the full run's own spread (its rounds' "
                   "lowest and highest ratio) is as far from the full run as the full run's rounds are from each "
                   "other. The noisy cases, and why: those that fsync (save-history-durable: each save waits on "
                   "the disk, and one slow flush moves a round), those that run several processes on two cores "
                   "(writers-N, the mirror cases, watched saves), and the in-process cases whose rounds vary with "
                   "the machine's speed under them (this virtual machine's C baselines alone move by up to 1.7× "
                   "between runs of minutes apart).\n" % (
                       len(both) - len(far) - len(noisy), len(both),
                       ("; within the full run's spread: " + ", ".join(noisy)) if noisy else "",
                       ("; outside both: " + ", ".join(far)) if far else ""))

if unread:
    out.append("## Inputs not read\n")
    out.extend("- " + u for u in unread)
    out.append("")
out.append("## Goals\n")
out.append("| goal | measured | met |")
out.append("| --- | ---: | --- |")
for case, field, goal, op, text in GOALS:
    v, ok = check(case, field, goal, op)
    if v is None:
        continue
    out.append("| %s (%s) | %s | %s |" % (text, case, fmt(v), "yes" if ok else "**no**"))
out.append("")
kept_text = bench_kept.paragraph(by, fmt)
if kept_text:
    out.append(kept_text)
misses = [(case, field, goal, op, text) for case, field, goal, op, text in GOALS if check(case, field, goal, op)[1] is False]


def machine_note():
    speeds = []
    for case, then in REFERENCE.items():
        r = by.get(case, {})
        now = r.get("baseline_rows_per_s", r.get("baseline"))
        if isinstance(now, (int, float)) and now > 0:
            speeds.append((case, now, then))
    text = ("Ratios are taken against a baseline in the same rounds, but on this shared virtual machine the spread "
            "of one case between rounds is often 1.5× or more, and whole runs differ: four full runs of builds "
            "that differ little in these paths gave query-range 0.821, 0.477, 0.796 and 0.735, and "
            "batch-insert-full-model 0.572, 0.598, 0.477 and 0.495. Figures in rows/s follow the machine.")
    if speeds:
        parts = ", ".join("%s %s against %s" % (c, fmt(now), fmt(then)) for c, now, then in speeds)
        share = sum(now / then for _, now, then in speeds) / len(speeds)
        text += (" The C API's own baselines in this run against the reference run of 2026-12-03: %s: the machine "
                 "ran at about %.0f%% of that run's speed, where %s." % (parts, share * 100, REFERENCE_FIGURES))
    return text


if misses:
    out.append("### Where a goal is missed\n")
    out.append(machine_note() + "\n")
    for case, field, goal, op, text in misses:
        v, _ = check(case, field, goal, op)
        gap = (goal - v) / goal * 100 if op == ">=" else (v - goal) / goal * 100
        out.append("- **%s**: %s against %s %s, short by %.0f%%. %s" % (case, fmt(v), op, goal, gap, NOTES.get(case, "")))
    out.append("")
out.append("![ratios and writer scaling](bench/chart.svg)\n")
out.append("## Reproduce\n")
out.append("```sh\nScripts/bench.sh           # the full run (a few minutes), rewrites this file and the chart\n"
           "Scripts/bench.sh --quick   # about a minute\n.build/release/storebench --json --cases save-history,latency\n```\n")
open(md_path, "w").write("\n".join(out))

# The chart: ratio bars with goal ticks, and writer scaling.
write_chart(by, svg_path, fmt)

# The same report as a page to look at (issue 24): bench/index.html, next to the chart.
write_page(out, svg_path)
