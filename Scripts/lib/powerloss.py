#!/usr/bin/env python3
"""Power-loss runs (issue 20): the targets, `storectl stress` writers and consumers, the cleaner and a
mirror work on a group directory inside powerfs (Scripts/powerfs/powerfs.c), which then loses power
at a random moment: everything not synced is dropped, whole or as a random subset. The processes
die with the power; the backing directory is mounted again as it is after the loss and the machine
"reboots" (a new SHAREDSTORE_BOOT_ID): every target runs again. Then every promise is checked:

- every file opens and `storectl verify` passes;
- no token is reused, no acknowledged save is missing except as the mode allows, the cleaner never
  deleted what a consumer needed, and every consumer merged what it has or reloaded
  (`storectl stress --resume` checks these against the logs every process kept outside the mount);
- with a second machine, the mirror converges and `storectl mirror --verify` is clean on both;
- durable runs (`--durable`) lose no acknowledged save; default runs lose at most a suffix.

Each seed prints one JSON line. Usage:
  powerloss.py --bin DIR [--seeds N | --seed N | --seconds S] [--durable] [--losses K] [--mirror] [--keep]
"""
import argparse
import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE = os.path.join(ROOT, "Scripts", "powerfs", "powerfs.c")
POWERFS = os.path.join(ROOT, ".build", "powerfs", "powerfs")
COHERENCE_SOURCE = os.path.join(ROOT, "Scripts", "powerfs", "coherence.c")
COHERENCE = os.path.join(ROOT, ".build", "powerfs", "coherence")


def build_powerfs():
    """Compiles powerfs and its coherence check when a binary is missing or older than its source."""
    os.makedirs(os.path.dirname(POWERFS), exist_ok=True)
    if not (os.path.exists(POWERFS) and os.path.getmtime(POWERFS) >= os.path.getmtime(SOURCE)):
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "fuse3"], capture_output=True, text=True,
                               check=True)
        subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", POWERFS, SOURCE] + flags.stdout.split(),
                       check=True)
    if not (os.path.exists(COHERENCE) and os.path.getmtime(COHERENCE) >= os.path.getmtime(COHERENCE_SOURCE)):
        subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", COHERENCE, COHERENCE_SOURCE], check=True)


def check_coherence(seconds):
    """Runs Scripts/powerfs/coherence.c on a fresh powerfs mount: a page written with pwrite must read
    back through the writer's mapping at once, as LMDB's writers need (a stale page there damaged the
    registry in issue 20's runs, from powerfs, not from SharedStore). Returns 0 when it holds."""
    work = tempfile.mkdtemp(prefix="sharedstore-powerfs-coherence-")
    back, mnt = os.path.join(work, "back"), os.path.join(work, "mnt")
    os.makedirs(back, mode=0o700)
    os.makedirs(mnt, mode=0o700)
    with open(os.path.join(work, "powerfs.stderr"), "a") as log:
        disk = Disk(back, mnt, 1, log)
        try:
            r = subprocess.run([COHERENCE, os.path.join(mnt, "coherence"), str(seconds)], capture_output=True,
                               text=True, timeout=seconds + 60)
        finally:
            disk.unmount()
    print((r.stdout + r.stderr).strip(), file=sys.stderr, flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return r.returncode


class Failure(Exception):
    pass


def wait_for(what, predicate, seconds):
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise Failure(f"{what} did not happen within {seconds} s")
        time.sleep(0.02)


class Disk:
    """One powerfs mount of `back` on `mnt`."""

    def __init__(self, back, mnt, seed, log):
        self.mnt = mnt
        self.process = subprocess.Popen([POWERFS, back, mnt, str(seed), "-f"], stdout=subprocess.PIPE,
                                        stderr=log, text=True)
        wait_for("the powerfs mount", lambda: os.path.ismount(mnt) or self.process.poll() is not None, 10)
        if self.process.poll() is not None:
            log.flush()
            with open(log.name) as f:
                said = f.read().strip().splitlines()[-1:] or ["nothing"]
            raise Failure(f"powerfs exited with status {self.process.returncode}: {said[0]}")

    def lose_power(self, partial):
        """Drops what was not synced (all, or a random subset); returns powerfs's counts."""
        self.process.send_signal(signal.SIGUSR2 if partial else signal.SIGUSR1)
        ready, _, _ = select.select([self.process.stdout], [], [], 30)
        if not ready:
            raise Failure("powerfs did not report the power loss within 30 s")
        line = self.process.stdout.readline().split()
        return {"lost_" + k if k == "pages" else k: int(v) for k, v in (part.split("=") for part in line[1:])}

    def unmount(self):
        subprocess.run(["fusermount3", "-u", "-z", self.mnt], capture_output=True)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def say(text):
    print(f"power loss: {text}", file=sys.stderr, flush=True)


class Run:
    def __init__(self, args, seed):
        self.args = args
        self.seed = seed
        self.random = random.Random(seed)
        self.work = tempfile.mkdtemp(prefix=f"sharedstore-powerloss-{seed}-")
        self.back = os.path.join(self.work, "back")
        self.mnt = os.path.join(self.work, "mnt")
        self.logs = os.path.join(self.work, "logs")
        self.other = os.path.join(self.work, "machine-b")  # the mirror's second machine, on a plain disk
        for d in (self.back, self.mnt, self.logs):
            os.makedirs(d, mode=0o700)
        self.group = os.path.join(self.mnt, "g")
        self.processes = []
        self.boot = 0
        self.disk = None
        self.fslog = open(os.path.join(self.logs, "powerfs.stderr"), "a")
        self.result = {"seed": seed, "mode": "durable" if args.durable else "normal", "losses": []}
        self.database = None
        self.interrupted = False

    # MARK: processes

    def env(self, group=None):
        env = dict(os.environ)
        if self.database:
            env["PGDATABASE"] = self.database
        env["SHAREDSTORE_GROUP"] = group or self.group
        env["SHAREDSTORE_BOOT_ID"] = f"powerloss-{self.seed}-boot-{self.boot}"
        if self.args.durable:
            env["SHAREDSTORE_DURABLE"] = "1"
        else:
            env.pop("SHAREDSTORE_DURABLE", None)
        return env

    def tool(self, name):
        return os.path.join(self.args.bin, name)

    def argv(self, argv, group):
        # --group on every command line: kill_all finds this run's processes by it.
        return [self.tool(argv[0])] + argv[1:] + ([] if "--group" in argv else ["--group", group or self.group])

    def run(self, argv, group=None, timeout=120):
        return subprocess.run(self.argv(argv, group), capture_output=True, text=True, env=self.env(group),
                              timeout=timeout)

    def start(self, argv, name, group=None):
        out = open(os.path.join(self.logs, f"{name}.out"), "a")
        p = subprocess.Popen(self.argv(argv, group), stdout=out, stderr=out, env=self.env(group),
                             start_new_session=True)
        self.processes.append(p)
        return p

    def kill_all(self):
        """What the power loss does to every process of the machine: each one whose command line names
        this run's directory (a stress run's writers and consumers are not in its process group), until
        none is left. A survivor would write into the next boot's mount with a stale view of the store."""
        def survivors():
            found = []
            spared = {os.getpid(), self.disk.process.pid if self.disk else -1}
            for pid in os.listdir("/proc"):
                if not pid.isdigit() or int(pid) in spared:
                    continue
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        if self.work.encode() in f.read():
                            found.append(int(pid))
                except OSError:
                    pass
            return found
        deadline = time.monotonic() + 30
        while True:
            pids = survivors()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for p in self.processes:
                if p.poll() is None and p.pid in pids:
                    p.wait()
            if time.monotonic() > deadline:
                raise Failure(f"processes {pids} survived kill -9 for 30 s")
            time.sleep(0.01)
        for p in self.processes:
            p.wait()
        self.processes = []

    # MARK: the targets

    def targets(self, stop):
        """main-app, share-extension and widget commands one after another; each acknowledged save is
        logged (synced, outside the mount) as the token it printed."""
        rnd = random.Random(self.seed * 31 + self.boot)
        ids = []
        log = os.open(os.path.join(self.logs, "targets.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        n = 0
        try:
            while not stop.is_set():
                n += 1
                roll = rnd.random()
                if roll < 0.35:
                    cmd, author = ["main-app", "add", "--title", f"t{self.boot}-{n}", "--url",
                                   f"https://targets.example/{self.boot}/{n}", "--json"], "MainApp"
                elif roll < 0.6:
                    cmd, author = ["share-extension", "share", "--title", f"s{self.boot}-{n}", "--url",
                                   f"https://share.example/{self.boot}/{n}", "--category", rnd.choice(["A", "B"]),
                                   "--json"], "ShareExtension"
                elif roll < 0.75 and ids:
                    # Not logged: a toggle the merge policy undid saves nothing and prints the newest token.
                    cmd, author = ["widget", "toggle-read", rnd.choice(ids), "--json"], None
                elif roll < 0.9:
                    cmd, author = ["main-app", "sync", "--json"], None
                else:
                    cmd, author = ["widget", "show", "--json"], None
                try:
                    r = self.run(cmd, timeout=30)
                except subprocess.TimeoutExpired:
                    continue
                if r.returncode != 0 or stop.is_set() or cmd[1] not in ("add", "share"):
                    continue
                last = json.loads(r.stdout.strip().splitlines()[-1])
                if "token" in last:
                    os.write(log, (json.dumps({"token": last["token"], "author": author}) + "\n").encode())
                    os.fsync(log)
                if cmd[1] in ("add", "share"):
                    ids.append(last["id"])
        finally:
            os.close(log)

    # MARK: one boot

    def mount(self):
        self.disk = Disk(self.back, self.mnt, self.seed * 1000 + self.boot, self.fslog)

    def work_until_the_power_goes(self, first):
        stress = ["storectl", "stress", "--group", self.group, "--logs", self.logs, "--seconds", "3600",
                  "--writers", "3", "--consumers", "2", "--kill-every", str(self.random.choice([0, 700, 1500])),
                  "--seed", str(self.seed), "--json"]
        if not first:
            stress.append("--resume")
        self.start(stress, f"stress-{self.boot}")
        # The targets come once the stress consumers have synced (its writers start then): what
        # they save before would reach no consumer's log, and the checks could not see it.
        def lines(path):
            try:
                with open(path, "rb") as f:
                    return f.read().count(b"\n")
            except FileNotFoundError:
                return 0
        writers = [os.path.join(self.logs, f"writer{i}.jsonl") for i in range(3)]
        before = sum(lines(w) for w in writers)
        started = time.monotonic()
        # Now and then the power goes early, while the group's files are being made.
        early = first and self.random.random() < 0.2
        cut = started + (self.random.uniform(0.05, 1.0) if early else self.random.uniform(1.5, 6.0))
        wait_for("the stress writers", lambda: sum(lines(w) for w in writers) > before or
                 (early and time.monotonic() >= cut), 60)
        stop = threading.Event()
        thread = threading.Thread(target=self.targets, args=(stop,), daemon=True)
        if time.monotonic() < cut:
            if self.args.mirror:
                self.start(["storectl", "mirror", "--follow", "--json"], f"mirror-a-{self.boot}")
            thread.start()
        time.sleep(max(0.0, cut - time.monotonic()))
        partial = self.random.random() < 0.5
        say(f"seed {self.seed}: boot {self.boot} loses power ({'a random subset' if partial else 'everything'} "
            "not synced)")
        counts = self.disk.lose_power(partial)
        stop.set()
        self.kill_all()
        if thread.is_alive():
            thread.join()
        self.disk.unmount()
        say(f"seed {self.seed}: lost {counts}")
        counts["partial"] = partial
        self.result["losses"].append(counts)

    def reboot(self):
        self.boot += 1
        self.mount()
        if not os.path.exists(os.path.join(self.group, "Store.sqlite")):
            # The power went before the store's name was on disk: no save was acknowledged yet.
            say(f"seed {self.seed}: boot {self.boot}: the store was never made durable; starting anew")
            return
        say(f"seed {self.seed}: boot {self.boot}: verify, then every target runs again")
        r = self.run(["storectl", "verify", "--json"])
        if r.returncode != 0 and "error: no store in" in r.stderr:
            # The name is on disk but the transaction that makes the store is not (an empty
            # SQLite file in WAL mode): the power went while the store was being made, before
            # any save could be acknowledged. The next open makes it (seed 1060422157, durable).
            say(f"seed {self.seed}: boot {self.boot}: the store's making was never durable; starting anew")
            return
        if "a journal left by a crash or power loss" in r.stderr:
            # The power went while the store was being made: verify names the journal and its
            # repair (open the store with a target), which is taken before verifying again.
            say(f"seed {self.seed}: boot {self.boot}: {r.stderr.strip()}")
            self.run(["widget", "show", "--json"])
            r = self.run(["storectl", "verify", "--json"])
        # verify only reads: before any target opened the store, a registry ahead of a store that
        # lost its last commits is named with its repair (a target's open moves the tokens past it),
        # as are consumers whose position the loss took (they reload at their next sync).
        self.verify_names_only_repairs(r, ("reloads in full at its next sync",
                                           "any target that opens the group moves the tokens past it"))
        # Every target runs again: the consumers merge or reload (the mirror is one).
        commands = [["main-app", "sync", "--json"], ["widget", "show", "--json"], ["history-cleaner", "--json"]]
        if self.args.mirror:
            commands.insert(0, ["storectl", "mirror", "--once", "--json"])
        for cmd in commands:
            r = self.run(cmd)
            if r.returncode != 0:
                raise Failure(f"{' '.join(cmd[:2])} after power loss {self.boot}: {r.stderr.strip()}")
        # After a target's open, the store is past every token the registry saw; only consumers
        # that have not synced yet (the stress run's) may still be named.
        r = self.run(["storectl", "verify", "--json"])
        self.verify_names_only_repairs(r, ("reloads in full at its next sync",))

    def verify_names_only_repairs(self, r, repairs):
        """A failed `storectl verify` may name only the registry's expected repairs."""
        failed = [json.loads(l) for l in r.stdout.splitlines() if l.strip() and not json.loads(l)["ok"]]
        damage = [f for f in failed if not (f["check"] == "registry" and any(p in f["detail"] for p in repairs))]
        if r.returncode != 0 and (damage or not failed):
            raise Failure(f"storectl verify after power loss {self.boot}: {damage or r.stderr.strip()}")

    def check(self):
        say(f"seed {self.seed}: the stress run goes on for 3 s, then checks everything")
        r = self.run(["storectl", "stress", "--group", self.group, "--logs", self.logs, "--resume", "--seconds", "3",
                      "--writers", "3", "--consumers", "2", "--seed", str(self.seed), "--json"], timeout=300)
        lines = [l for l in r.stdout.splitlines() if l.strip()]
        summary = json.loads(lines[-1]) if lines else {}
        self.result["acknowledged_lost"] = summary.get("acknowledged_lost")
        self.result["acknowledged"] = summary.get("saves", 0) + summary.get("target_acknowledged", 0)
        self.result["lost_token_ranges"] = summary.get("lost_token_ranges")
        self.result["acknowledged_lost_per_range"] = summary.get("acknowledged_lost_per_range")
        if r.returncode != 0 or not summary.get("ok"):
            raise Failure(f"the checks after the power losses: {summary.get('violations') or r.stderr.strip()}")
        for cmd in (["main-app", "sync", "--json"], ["widget", "show", "--json"]):
            r = self.run(cmd)
            if r.returncode != 0:
                raise Failure(f"{' '.join(cmd[:2])}: {r.stderr.strip()}")
        r = self.run(["storectl", "tokens", "--json"])
        for line in r.stdout.splitlines():
            entry = json.loads(line)
            if entry["consumer"] in ("MainApp",) and entry["lag"] != 0:
                raise Failure(f"consumer {entry['consumer']} has lag {entry['lag']} after its sync")

    def check_mirror(self):
        """Both machines mirror until neither moves, then each compares itself with the server."""
        def listing(group):
            r = self.run(["main-app", "list", "--json"], group=group)
            return sorted((l["gid"], l["title"], l["url"], l["isRead"], l.get("category")) for l in
                          map(json.loads, r.stdout.splitlines()))
        say(f"seed {self.seed}: both machines mirror until they settle")
        deadline = time.monotonic() + 120
        while True:
            quiet = True
            for group in (self.group, self.other):
                r = self.run(["storectl", "mirror", "--once", "--json"], group=group)
                if r.returncode != 0:
                    raise Failure(f"storectl mirror --once on {group}: {r.stderr.strip()}")
                last = json.loads(r.stdout.splitlines()[-1])
                quiet = quiet and last["pushed"] == 0 and last["pulled"] == 0 and last["lag"] == 0
            if quiet:
                break
            if time.monotonic() > deadline:
                raise Failure("the mirrors did not settle within 120 s")
        for group in (self.group, self.other):
            r = self.run(["storectl", "mirror", "--verify", "--json"], group=group)
            if r.returncode != 0:
                raise Failure(f"storectl mirror --verify on {group}: {r.stdout.strip()[:400]} {r.stderr.strip()}")
        a, b = listing(self.group), listing(self.other)
        if a != b:
            raise Failure(f"the machines differ: {len(a)} articles here, {len(b)} on the other machine")
        self.result["mirrored_articles"] = len(a)

    def fresh_database(self):
        """A database of its own per seed: what earlier seeds mirrored stays out of this one."""
        name = f"sharedstore_powerloss_{self.seed}_{os.getpid()}"
        for sql in (f"DROP DATABASE IF EXISTS {name}", f"CREATE DATABASE {name}"):
            r = subprocess.run(["psql", "-X", "-q", "-d", os.environ.get("PGDATABASE", "postgres"), "-c", sql],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise Failure(f"cannot make the mirror's database: {r.stderr.strip()}")
        self.database = name

    def drop_database(self):
        if self.database:
            subprocess.run(["psql", "-X", "-q", "-d", os.environ.get("PGDATABASE", "postgres"), "-c",
                            f"DROP DATABASE IF EXISTS {self.database}"], capture_output=True)

    def execute(self):
        try:
            self.mount()
            if self.args.mirror:
                self.fresh_database()
                os.makedirs(self.other, mode=0o700)
                self.start(["storectl", "mirror", "--follow", "--json"], "mirror-b", group=self.other)
                r = self.run(["share-extension", "share", "--title", "from b", "--url", "https://b.example/0",
                              "--json"], group=self.other)
                if r.returncode != 0:
                    raise Failure(f"machine b: {r.stderr.strip()}")
            for _ in range(self.args.losses):
                made = os.path.exists(os.path.join(self.group, "Store.sqlite"))
                self.work_until_the_power_goes(first=not made)
                self.reboot()
            self.check()
            if self.args.mirror:
                self.check_mirror()
            self.result["ok"] = True
        except (Failure, subprocess.TimeoutExpired, json.JSONDecodeError, KeyError) as error:
            self.result["ok"] = False
            self.result["error"] = str(error)
        except KeyboardInterrupt as stopped:
            self.result["ok"] = False
            self.result["error"] = f"stopped by {stopped}"
            self.interrupted = True
        finally:
            self.kill_all()
            if self.disk:
                self.disk.unmount()
            if self.result.get("ok"):
                self.drop_database()
        self.result["work"] = self.work
        if self.result["ok"] and not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)
        return self.result


def stop_on_signals():
    """SIGTERM and SIGINT end the run through its cleanup (every process killed, every mount gone):
    `timeout` or a CI runner would otherwise leave writers going on a plain directory."""
    def stop(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin")
    parser.add_argument("--build-only", action="store_true", help="only build powerfs")
    parser.add_argument("--coherence", type=float, metavar="SECONDS",
                        help="only check for this long that powerfs shows a process the pages it writes")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--seeds", type=int, default=1, help="how many seeds (random unless --seed)")
    parser.add_argument("--seconds", type=float, help="run seeds until this much time has passed")
    parser.add_argument("--losses", type=int, default=2, help="power losses per seed")
    parser.add_argument("--durable", action="store_true")
    parser.add_argument("--mirror", action="store_true", help="a second machine mirrors through $PGHOST")
    parser.add_argument("--keep", action="store_true", help="keep every work directory")
    args = parser.parse_args()
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        sys.exit("error: the power-loss runs mount a FUSE file system: they need root and /dev/fuse")
    build_powerfs()
    if args.build_only:
        return
    if args.coherence is not None:
        sys.exit(check_coherence(args.coherence))
    if not args.bin:
        parser.error("--bin is required")
    stop_on_signals()
    start = time.monotonic()
    first = args.seed if args.seed is not None else random.randrange(1, 1 << 31)
    failures = 0
    n = 0
    while True:
        seed = first + n
        n += 1
        print(f"power loss: seed {seed} (--seed {seed} replays it)", file=sys.stderr, flush=True)
        run = Run(args, seed)
        result = run.execute()
        print(json.dumps(result), flush=True)
        failures += 0 if result["ok"] else 1
        if run.interrupted:
            break
        if args.seconds is not None:
            if time.monotonic() - start >= args.seconds:
                break
        elif n >= args.seeds:
            break
    print(f"power loss: {n} seeds, {failures} failed", file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
