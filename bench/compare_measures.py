"""The measures of bench/compare.py, each run interleaved: in every round,
every peer once, in an order rotated by one each round; where a bash loop is
the floor, a bash loop run made just before each peer's run gives that
run's paired ratio (peer time / bash time of the same moment), which a
machine whose load drifts affects less than a ratio of medians.

Each measure records cells through Bench.record(row, peer, ...): samples
(numbers), paired ratios, or texts (verdicts, failures).
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import compare_peers as cp
import compare_procs as proc
import compare_ranks as ranks
import compare_servers
from _common import kill_all, marked, write_table
from launcher_killed import run_killed

# Variables a rank could mistake for its identity, or that change what is
# measured, are not passed on from this shell.
_SCRUB = ("RANK_ID", "RANK", "LOCAL_RANK", "WORLD_SIZE", "RANK_SIZE", "RANK_START", "RANK_TABLE_FILE",
          "RANK_TABLE_FILE_V_1_0", "MS_ROLE", "MS_NODE_ID", "PYTHONUNBUFFERED", "MASTER_ADDR", "MASTER_PORT",
          "JOB_ID", "BATCH_JOB_ID", "MA_CURRENT_HOST_IP", "BATCH_TASK_CURRENT_INSTANCE", "MA_VJ_NAME")


class Bench:
    def __init__(self, args, peers, tmp):
        self.args, self.peers, self.tmp = args, peers, tmp
        self.programs = ranks.write_programs(tmp)
        self.env = {k: v for k, v in os.environ.items() if k not in _SCRUB and not k.startswith("OMPI_")}
        # Jobs of others on this machine lock devices 0..N in the default directory.
        self.env["DAVINCIRUN_LOCK_DIR"] = os.path.join(tmp, "locks")
        self.rows, self.warnings, self.notes_table = {}, [], None
        self.session = uuid.uuid4().hex[:12]  # the start of every run's MARKER (proc.kill_session)

    def tag(self):
        return self.session + uuid.uuid4().hex[:12]

    # -- bookkeeping ---------------------------------------------------------
    def row(self, key, label, unit="", kind="time", better="low"):
        self.rows.setdefault(key, {"label": label, "unit": unit, "kind": kind, "better": better, "cells": {}})
        return key

    def record(self, row, peer, value=None, ratio=None, text=None):
        cell = self.rows[row]["cells"].setdefault(peer, {"samples": [], "ratios": [], "texts": []})
        if value is not None:
            cell["samples"].append(value)
        if ratio is not None:
            cell["ratios"].append(ratio)
        if text is not None:
            cell["texts"].append(text)

    def usable(self, keys):
        return [k for k in keys if self.peers[k].available]

    def order(self, keys, round_no):
        """`keys` rotated by the round: each peer takes each place in turn."""
        k = round_no % max(1, len(keys))
        return keys[k:] + keys[:k]

    def check_load(self, batch):
        load, busy = proc.machine_busy()
        line = "[%s] load average %.2f; %.0f%% of the CPUs busy over 1 s before the batch" % (batch, load, 100 * busy)
        print(line, flush=True)
        # The load average also counts this script's own last runs: only the
        # quiet second before the batch tells whether others use the machine.
        if busy > 0.25:
            warning = "warning: the machine is busy before %s (%s): its figures are noisy" % (batch, line)
            print(warning, flush=True)
            self.warnings.append(warning)

    # -- one run -------------------------------------------------------------
    def new_run(self, n, rank_argv):
        directory = tempfile.mkdtemp(prefix="run-", dir=self.tmp)
        log_dir = os.path.join(directory, "log")
        os.mkdir(log_dir)
        table = write_table(os.path.join(directory, "table.json"), n, device_ips=True)
        return cp.Run(n, rank_argv, directory, log_dir, table)

    def end_run(self, peer, run):
        if peer == "v015":
            cp.cleanup_v015(run.dir)
        shutil.rmtree(run.dir, ignore_errors=True)

    def launch(self, peer, n, rank_argv, extra_env=None, console=None, sample=None, linger=10.0):
        """Runs one job to its end. Returns a dict: wall (s, or None and
        `failed`), rc, and with console/sample: the measurements of a relay."""
        run = self.new_run(n, rank_argv)
        spec = cp.build(self.peers[peer], run)
        env = dict(self.env, **spec.env)
        env.update(extra_env or {})
        tag = self.tag()
        out, reader, result = subprocess.DEVNULL, None, {"run": run, "spec": spec}
        console_path = os.path.join(run.dir, "console.txt")
        if console == "file":
            out = open(console_path, "wb")
        elif console == "pipe":
            with open(console_path, "wb") as f:
                reader = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=f)
            out = reader.stdin
        err_path = os.path.join(run.dir, "launcher.err")
        with open(err_path, "wb") as err:
            cpu0 = proc.children_cpu()
            t0 = time.monotonic()
            p = proc.start(spec.argv, env, run.dir, tag, out, err)
        if out is not subprocess.DEVNULL:
            out.close()  # the launcher holds the console now
        waiter = proc.Waiter(p)
        sampler = proc.RssSampler(sample, exclude={reader.pid} if reader else ()) if sample else None
        reader_usage = {}
        if reader:
            threading.Thread(target=lambda: reader_usage.update(r=os.wait4(reader.pid, 0)), daemon=True).start()
        if not waiter.wait(self.args.timeout):
            proc.stop(p, tag)
            waiter.wait(10)
            result.update(wall=None, failed="timeout (%d s)" % self.args.timeout)
        else:
            result.update(wall=waiter.ended - t0, rc=p.returncode)
            if p.returncode != 0:
                result["failed"] = proc.stderr_reason(err_path, p.returncode)
        if sampler:
            result["rss_mib"] = sampler.stop() / 1024.0
        if sample:
            result["sizes"] = [os.path.getsize(f) if f and os.path.exists(f) else 0
                               for f in (spec.logs(r) for r in range(n))]
        # The job's other processes (0.1.5's tee) may outlive the launcher.
        start = time.monotonic()
        while marked(tag) and time.monotonic() - start < linger:
            time.sleep(0.005)
        result["linger"] = time.monotonic() - start
        kill_all(marked(tag))
        if reader:
            for _ in range(1000):
                if "r" in reader_usage:
                    break
                time.sleep(0.01)
            reader.returncode = 0  # waited for above, by wait4
            usage = reader_usage.get("r", (0, 0, None))[2]
            result["reader_cpu"] = usage.ru_utime + usage.ru_stime if usage else 0.0
        proc.reap()
        result["tree_cpu"] = proc.children_cpu() - cpu0 - result.get("reader_cpu", 0.0)
        return result

    def timed(self, peer, n, rank_argv):
        """(seconds, None) or (None, why it failed) for one plain run."""
        r = self.launch(peer, n, rank_argv)
        self.end_run(peer, r["run"])
        return (None, r["failed"]) if r.get("failed") else (r["wall"], None)

    def api_calls(self, n, rank_argv, calls):
        """Seconds per call of the Python API inside one interpreter."""
        run = self.new_run(n, rank_argv)
        out = os.path.join(run.dir, "times.json")
        argv = [sys.executable, "-c", cp.API_CALLS, json.dumps(rank_argv), run.log_dir, run.table, str(calls), out]
        tag = self.tag()
        p = proc.start(argv, self.env, run.dir, tag, subprocess.DEVNULL, subprocess.DEVNULL)
        waiter = proc.Waiter(p)
        if not waiter.wait(self.args.timeout):
            proc.stop(p, tag)
        kill_all(marked(tag))
        proc.reap()
        try:
            with open(out) as f:
                times = json.load(f)
        except (OSError, ValueError):
            times = None
        self.end_run("api-call", run)
        return times


# -- 1. launch + exit ---------------------------------------------------------
def measure_launch(b):
    b.check_load("launch")
    python = sys.executable
    n = b.args.ranks
    cases = (("true", "%d × /bin/true" % n, ["/bin/true"]), ("pass", "%d × python -c pass" % n, [python, "-c", "pass"]))
    peers = b.usable([k for k, _ in cp.PEERS if k != "bash"])
    for case, label, argv in cases:
        row = b.row("launch-" + case, "launch+exit: " + label, "ms")
        for round_no in range(b.args.repeat):
            for peer in b.order(peers, round_no):
                floor, _ = b.timed("bash", b.args.ranks, argv)
                b.record(row, "bash", value=floor and floor * 1000)
                if peer == "api-call":
                    times = b.api_calls(b.args.ranks, argv, b.args.calls)
                    if times:
                        for t in times:
                            b.record(row, peer, value=t * 1000)
                        b.record(row, peer, ratio=floor and statistics.median(times) / floor)
                    else:
                        b.record(row, peer, text="failed")
                    continue
                wall, failed = b.timed(peer, b.args.ranks, argv)
                b.record(row, peer, value=wall and wall * 1000, ratio=wall and floor and wall / floor, text=failed)


# -- 2. fail-fast -------------------------------------------------------------
def fail_once(b, peer, mode, cap):
    """One rank exits 1 once all are up; see compare_ranks.FAIL."""
    n = b.args.ranks
    failing = min(3, n - 1)
    sock = os.path.join(b.tmp, "t-%s.sock" % uuid.uuid4().hex[:8])
    tracker = proc.Tracker(sock)
    run = b.new_run(n, [sys.executable, b.programs["fail"], mode, sock, str(failing)])
    spec = cp.build(b.peers[peer], run)
    tag = b.tag()
    with open(os.path.join(run.dir, "launcher.err"), "wb") as err:
        p = proc.start(spec.argv, dict(b.env, **spec.env), run.dir, tag, subprocess.DEVNULL, err)
    waiter = proc.Waiter(p)
    result = {}
    try:
        deadline = time.monotonic() + b.args.timeout
        while tracker.count("rank") < n or tracker.count("child") < n:
            if time.monotonic() > deadline or waiter.done.is_set():
                result["failed"] = "the job did not come up"
                return result
            time.sleep(0.01)
        time.sleep(0.2)
        tracker.go(failing)
        deadline = time.monotonic() + 30
        while not any(m["rank"] == failing and m["kind"] == "rank" and m["gone"] for m in tracker.snapshot()):
            if time.monotonic() > deadline:
                result["failed"] = "the failing rank did not exit"
                return result
            time.sleep(0.001)
        failed_at = [m["gone"] for m in tracker.snapshot() if m["kind"] == "rank" and m["rank"] == failing][0]
        returned = waiter.wait(max(0.0, failed_at + cap - time.monotonic()))
        if returned:
            time.sleep(max(0.0, waiter.ended + 1.0 - time.monotonic()))
            result.update(returned=waiter.ended - failed_at, rc=p.returncode)
        members = tracker.snapshot()
        others = [m for m in members if m["kind"] == "rank" and m["rank"] != failing]
        result["children_left"] = sum(1 for m in members if m["kind"] == "child" and m["gone"] is None)
        result["ranks_left"] = sum(1 for m in others if m["gone"] is None)
        if not result["ranks_left"]:
            result["last_gone"] = max(m["gone"] for m in others) - failed_at
        return result
    finally:
        proc.stop(p, tag)
        waiter.wait(10)
        proc.reap()
        tracker.close()
        b.end_run(peer, run)


def measure_fail(b):
    b.check_load("fail-fast")
    peers = b.usable([k for k in cp.TITLES if k not in ("api-call", "bash-cat", "bash-tee")])
    for mode, rounds in (("obey", b.args.repeat), ("ignore", max(1, b.args.repeat // 3))):
        if mode == "ignore" and b.args.quick:  # the same supervisor as the native davincirun, 10 s each
            peers = [k for k in peers if k not in ("dvr-path", "api")]
        what = "others obey SIGTERM" if mode == "obey" else "others ignore SIGTERM"
        rows = {name: b.row("fail-%s-%s" % (mode, name), "fail-fast (%s): %s" % (what, label), unit, kind)
                for name, label, unit, kind in (("gone", "last other rank gone", "ms", "time"),
                                                ("return", "launcher returned", "ms", "time"),
                                                ("rc", "exit code", "", "text"),
                                                ("children", "rank children left 1 s after", "", "count"))}
        for round_no in range(rounds):
            for peer in b.order(peers, round_no):
                # A bash loop never stops the others: it is not waited for long.
                cap = min(b.args.cap, b.args.bash_cap) if peer == "bash" else b.args.cap
                r = fail_once(b, peer, mode, cap)
                if r.get("failed"):
                    for row in rows.values():
                        b.record(row, peer, text=r["failed"])
                    continue
                if "last_gone" in r:
                    b.record(rows["gone"], peer, value=r["last_gone"] * 1000)
                elif "returned" in r:
                    b.record(rows["gone"], peer, text="never: %d left running" % r["ranks_left"])
                else:
                    b.record(rows["gone"], peer, text="not in %.0f s: %d left" % (cap, r["ranks_left"]))
                if "returned" in r:
                    b.record(rows["return"], peer, value=r["returned"] * 1000)
                    b.record(rows["rc"], peer, text=str(r["rc"]))
                    b.record(rows["children"], peer, value=r["children_left"])
                else:
                    b.record(rows["return"], peer, text="not in %.0f s" % cap)
                    b.record(rows["rc"], peer, text="-")
                    b.record(rows["children"], peer, text="%d (running)" % r["children_left"])


# -- 3. relay -----------------------------------------------------------------
def relay_once(b, peer, mode, console):
    lines = b.args.relay_mib * (1 << 20) // ranks.LINE
    stats = tempfile.mkdtemp(prefix="cpu-", dir=b.tmp)
    os.sync()  # no run pays for the previous one's writeback
    time.sleep(0.2)
    env = {"PYTHONUNBUFFERED": "1"} if mode == "unbuffered" else {}
    r = b.launch(peer, b.args.ranks, [sys.executable, b.programs["relay"], str(lines), stats], env,
                 console=console if peer not in ("bash", "bash-cat") else None, sample=b.programs["relay"])
    out = {}
    try:
        if r.get("failed"):
            out["failed"] = r["failed"]
            return out
        cpus = []
        for name in os.listdir(stats):
            with open(os.path.join(stats, name)) as f:
                cpus.append(float(f.read()))
        out.update(wall=r["wall"], ranks_cpu=sum(cpus), launcher_cpu=r["tree_cpu"] - sum(cpus), rss=r["rss_mib"])
        spec, n = r["spec"], b.args.ranks
        verdict = ranks.check_logs([spec.logs(i) for i in range(n)], lines, spec.strip)
        if verdict.startswith("ok") and min(r["sizes"]) < lines * ranks.LINE:
            verdict += ", complete %.0f ms after the return" % (r["linger"] * 1000)
        out["logs"] = verdict
        if console in ("file", "pipe") and peer not in ("bash", "bash-cat"):
            out["console"] = ranks.check_console(os.path.join(r["run"].dir, "console.txt"), n, lines)[0]
        return out
    finally:
        shutil.rmtree(stats, ignore_errors=True)
        b.end_run(peer, r["run"])


def measure_relay(b):
    b.check_load("relay")
    peers = b.usable([k for k, _ in cp.PEERS if k not in ("bash", "api-call")])
    for mode in b.args.relay_modes:
        for console in b.args.relay_consoles:
            key = "relay-%s-%s" % (mode, console)
            head = "relay %s, console to %s: " % (mode, {"null": "/dev/null"}.get(console, "a " + console))
            rows = {name: b.row("%s-%s" % (key, name), head + label, unit, kind)
                    for name, label, unit, kind in (("wall", "wall", "s", "time"),
                                                    ("lcpu", "launcher-side CPU", "s", "value"),
                                                    ("rcpu", "ranks' CPU", "s", "value"),
                                                    ("rss", "launcher-side peak RSS", "MiB", "value"),
                                                    ("logs", "logs", "", "text"), ("console", "console", "", "text"))}
            for round_no in range(b.args.relay_repeat):
                for peer in b.order(peers, round_no):
                    floor = relay_once(b, "bash", mode, console)
                    for name, peer_result in (("bash", floor), (peer, relay_once(b, peer, mode, console))):
                        if peer_result.get("failed"):
                            b.record(rows["wall"], name, text=peer_result["failed"])
                            continue
                        ratio = floor.get("wall") and peer_result["wall"] / floor["wall"] if name != "bash" else None
                        b.record(rows["wall"], name, value=peer_result["wall"], ratio=ratio)
                        b.record(rows["lcpu"], name, value=peer_result["launcher_cpu"])
                        b.record(rows["rcpu"], name, value=peer_result["ranks_cpu"])
                        b.record(rows["rss"], name, value=peer_result["rss"])
                        b.record(rows["logs"], name, text=peer_result["logs"])
                        if "console" in peer_result:
                            b.record(rows["console"], name, text=peer_result["console"])


# -- 4. the launcher SIGKILLed -------------------------------------------------
def measure_killed(b):
    b.check_load("launcher SIGKILLed")
    peers = b.usable([k for k in cp.TITLES if k not in ("api-call", "bash-cat", "bash-tee")])
    alive = b.row("killed-alive", "launcher SIGKILLed: job processes alive 3 s later", "", "count")
    gone = b.row("killed-gone", "launcher SIGKILLed: all gone after", "ms", "time")
    for round_no in range(max(1, b.args.repeat // 2)):
        for peer in b.order(peers, round_no):
            ready = tempfile.mkdtemp(prefix="ready-", dir=b.tmp)
            run = b.new_run(b.args.ranks, [sys.executable, b.programs["killed"], ready])
            spec = cp.build(b.peers[peer], run)
            try:
                left, after = run_killed(spec.argv, dict(b.env, **spec.env), ready, b.args.ranks, cwd=run.dir,
                                         tag=b.tag())
                b.record(alive, peer, value=left)
                b.record(gone, peer, value=after * 1000 if after is not None else None,
                         text=None if after is not None else "never (3 s)")
            except RuntimeError as e:
                b.record(alive, peer, text="failed: %s" % e)
            finally:
                proc.reap()
                shutil.rmtree(ready, ignore_errors=True)
                b.end_run(peer, run)


# -- 5. scale -----------------------------------------------------------------
def measure_scale(b):
    b.check_load("scale")
    for n in b.args.scale:
        row = b.row("scale-%d" % n, "scale: %d × /bin/true" % n, "ms")
        peers = b.usable([k for k, _ in cp.PEERS if k not in ("bash", "api-call")])
        if b.args.quick and n > 64:
            peers = [k for k in peers if k not in ("torchrun", "msrun")]
        for round_no in range(max(1, b.args.repeat // 2)):
            for peer in b.order(peers, round_no):
                floor, _ = b.timed("bash", n, ["/bin/true"])
                b.record(row, "bash", value=floor and floor * 1000)
                wall, failed = b.timed(peer, n, ["/bin/true"])
                b.record(row, peer, value=wall and wall * 1000, ratio=wall and floor and wall / floor, text=failed)


# -- 6. a 65,536-rank table ----------------------------------------------------
V015_TABLE = r"""
import os, sys, time, statistics
os.environ["MA_CURRENT_HOST_IP"] = "127.0.0.1"
from davincirunsdk.rank_table import RankTable, RankTableV1
times = []
for _ in range(int(sys.argv[2])):
    t = time.perf_counter()
    table = RankTableV1(sys.argv[1])
    server = table.get_server(table.get_current_instance().server_id)
    RankTable.convert_server_to_instance(server)
    times.append(time.perf_counter() - t)
print(statistics.median(times) * 1000)
"""


def measure_table(b):
    b.check_load("65,536-rank table")
    row = b.row("table-65536", "65,536-rank table: load+validate+plan", "ms")
    repeat = 3 if b.args.quick else 7
    path = os.path.join(b.tmp, "hccl_4096.json")
    for round_no in range(max(1, b.args.repeat // 2)):
        for peer in b.order(b.usable(["api", "v015"]), round_no):
            import rank_table_scale  # the package's bindings: only when the API is there

            if peer == "api":
                load, plan, found, yardstick, _, first = rank_table_scale.measure(b.tmp, 4096, repeat)
                b.record(row, "api", value=plan)
                b.notes_table = ("65,536 ranks, median of %d: load+validate %.0f ms, plan %.0f ms (by server_id), "
                                 "%.0f ms (found by address), %.0f ms as a fresh interpreter's first call; json.loads "
                                 "of the same file %.0f ms; 0.1.5: json.load and finding its server, no validation"
                                 % (repeat, load, plan, found, first, yardstick))
            else:
                if not os.path.exists(path):
                    rank_table_scale.write_table(path, 4096, "127.0.0.1")
                done = subprocess.run([b.peers["v015"].path, "-c", V015_TABLE, path, str(repeat)],
                                      capture_output=True, text=True)
                if done.returncode == 0:
                    b.record(row, "v015", value=float(done.stdout.split()[-1]))
                else:
                    b.record(row, "v015", text="failed")


MEASURES = {"launch": measure_launch, "fail": measure_fail, "relay": measure_relay, "killed": measure_killed,
            "scale": measure_scale, "table": measure_table, "servers": compare_servers.measure_servers}
