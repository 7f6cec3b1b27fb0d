"""Randomized fault injection: many random jobs, each checked for survivors,
lost bytes and the report of its first failure.

One rep: a seed gives a rank count (8 to max_ranks, one simulated server),
a behaviour per rank (chaos_rank.cpp) and an ending: every rank exits 0, a
rank fails, SIGINT to the caller, terminate() (the CLI: SIGTERM), the job
timeout, or SIGKILL of the caller. The caller is a separate process, the
`davincirun` command or fault_caller.py (the Python API), chosen at random.
Afterwards:

- no process carrying the rep's marker variable is alive a few seconds
  after the caller ended (a survivor is SIGKILLed and counted);
- every rank's log is an exact prefix of the stream the rank writes, at
  least as long as the rank's ledger (bytes whose write(2) returned) and
  exactly as long when the rank ended on its own;
- summary.json, the caller's exit status and its report agree with the plan:
  the rank planned to fail first is named, with its code, and the report
  lists every other rank; each rank's status is one its behaviour allows;
- the caller never crashed.

Used by bench/fault_run.py (the full run) and tests/python/process/test_fault_run.py
(a bounded run in the suite).
"""

import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from caller_signals import caller_argv
from fault_plan import (  # noqa: F401 (expected_stream is used through this module)
    CRASH_SIGNALS,
    ENDINGS,
    HERE,
    REPO,
    RepPlan,
    chaos_program,
    expected_stream,
    read_ledger,
    write_rank_table,
)
from process_scan import MARKER_VARIABLE, processes_with_marker

CALLER_SCRIPT = os.path.join(HERE, "fault_caller.py")
SURVIVOR_WAIT = 5.0  # seconds after the caller ended (covers a grace period and the sweep)
CALLER_LIMIT = 60.0  # a caller still running this long after its start is a hang

# ---- report parsing ---------------------------------------------------------

_FIRST = re.compile(r"^rank (\d+) \(pid (\d+)\) failed with (.+) after [\d.]+ s$")
_ONE = re.compile(r"^rank (\d+) \(pid (\d+)\): (.+)$")
_GROUP = re.compile(r"^(\d+) ranks \(([\d, -]+)\): (.+)$")


def parse_report(text):
    """(first failed rank or None, {rank: outcome} of the other ranks listed)."""
    first, others = None, {}
    for line in text.splitlines():
        line = line[len("distributed training failed: "):] if line.startswith("distributed training failed: ") else line
        m = _FIRST.match(line)
        if m:
            first = int(m.group(1))
            continue
        m = _ONE.match(line)
        if m:
            others[int(m.group(1))] = m.group(3)
            continue
        m = _GROUP.match(line)
        if m:
            listed = []
            for part in m.group(2).split(", "):
                lo, _, hi = part.partition("-")
                listed.extend(range(int(lo), int(hi or lo) + 1))
            if len(listed) != int(m.group(1)):
                others[-1] = "group count %s does not match %s" % (m.group(1), m.group(2))
            for r in listed:
                others[r] = m.group(3)
    return first, others


# ---- one rep ----------------------------------------------------------------

class RepResult:
    def __init__(self, plan):
        self.plan = plan
        self.failures = []  # (check, detail)
        self.survivors = 0
        self.bytes_written = 0
        self.bytes_logged = 0
        self.bytes_lost = 0
        self.bytes_corrupt = 0
        self.report_mismatches = 0
        self.seconds = 0.0
        self.kept_dir = None

    def fail(self, check, detail):
        self.failures.append((check, detail))
        if check == "report":
            self.report_mismatches += 1


def expected_exit(plan):
    """(shell code the job ends with, exit status of the caller)."""
    if plan.ending == "success":
        return 0, 0
    if plan.ending == "rank_failure":
        code = plan.behaviours[plan.primary].own_code()
        return code, code
    if plan.ending == "timeout":
        return 124, 124
    if plan.ending == "terminate":  # the CLI's SIGTERM: a signal's stop, 143 in summary.json too
        return (130, 130) if plan.caller == "python" else (128 + signal.SIGTERM,) * 2
    if plan.ending == "interrupt":
        return 130, 130
    # caller_kill: the supervisor stops the job itself and records why
    # (stop_reason launcher_gone, 128 + SIGHUP).
    return 128 + signal.SIGHUP, -signal.SIGKILL


def _wait_ready(ledger, ranks, caller, limit=30.0, also=None):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if caller.poll() is not None:
            return False
        if all(read_ledger(ledger, ranks)[2]) and (also is None or os.path.exists(also)):
            return True
        time.sleep(0.005)
    return False


def run_rep(seed, chaos, max_ranks=64, keep_failed_dir=True, python=None):
    """Runs one random job and checks it; returns a RepResult."""
    plan = RepPlan(seed, max_ranks)
    result = RepResult(plan)
    started = time.monotonic()
    base = tempfile.mkdtemp(prefix="fault-%d-" % seed)
    try:
        _run_checked(plan, result, chaos, base, python or sys.executable)
    finally:
        result.seconds = time.monotonic() - started
        if result.failures and keep_failed_dir:
            result.kept_dir = base
        else:
            shutil.rmtree(base, ignore_errors=True)
    return result


def _run_checked(plan, result, chaos, base, python):
    n = plan.ranks
    table = os.path.join(base, "rank_table.json")
    write_rank_table(table, n)
    paths = {name: os.path.join(base, name) for name in ("locks", "log", "work")}
    for p in paths.values():
        os.mkdir(p)
    plan_file = os.path.join(base, "plan.txt")
    with open(plan_file, "w") as f:
        f.write(plan.plan_text())
    ledger = os.path.join(base, "ledger.bin")
    with open(ledger, "wb") as f:
        f.write(b"\0" * (24 * n))
    marker = "%d-%s" % (plan.seed, os.urandom(6).hex())
    env = dict(os.environ, DAVINCIRUN_LOCK_DIR=paths["locks"], **{MARKER_VARIABLE: marker})
    command = [chaos, plan_file, ledger]
    caller_result = os.path.join(base, "caller.json")
    waiting = os.path.join(base, "waiting")
    if plan.caller == "python":
        cfg = {
            "command": command, "work_dir": paths["work"], "log_dir": paths["log"], "rank_table": table,
            "output_notebook": plan.output_notebook, "grace_period": plan.grace, "job_timeout": plan.job_timeout,
            "env": {MARKER_VARIABLE: marker}, "ending": plan.ending, "ledger": ledger, "ranks": n,
            "delay": plan.delay, "result": caller_result, "waiting": waiting,
        }
        cfg_path = os.path.join(base, "caller_config.json")
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        argv = [python, CALLER_SCRIPT, cfg_path]
    else:
        argv = ["davincirun", "-r", table, "-l", paths["log"], "-w", paths["work"], "--wait-timeout", "0",
                "--grace-period", str(plan.grace)]
        if plan.job_timeout is not None:
            argv += ["--job-timeout", str(plan.job_timeout)]
        argv += ["--"] + command
    out_path, err_path = os.path.join(base, "caller.out"), os.path.join(base, "caller.err")
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        caller = subprocess.Popen(caller_argv(argv), env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                  start_new_session=True)
    try:
        _drive(plan, result, caller, ledger, waiting)
    finally:
        if caller.poll() is None:
            caller.kill()
        caller.wait()
    _check_survivors(result, marker)
    _check_job(plan, result, caller.returncode, paths["log"], ledger, caller_result, out_path, err_path, chaos)


def _drive(plan, result, caller, ledger, waiting):
    signals = {"interrupt": signal.SIGINT, "caller_kill": signal.SIGKILL}
    if plan.caller == "cli":
        signals["terminate"] = signal.SIGTERM
    sig = signals.get(plan.ending)
    if sig is not None:
        also = waiting if plan.caller == "python" and plan.ending == "interrupt" else None
        if not _wait_ready(ledger, plan.ranks, caller, also=also):
            result.fail("start", "the ranks did not all start (caller status %s)" % caller.poll())
        else:
            time.sleep(plan.delay)
            caller.send_signal(sig)
    try:
        caller.wait(timeout=CALLER_LIMIT)
    except subprocess.TimeoutExpired:
        result.fail("hang", "the caller was still running after %.0f s: SIGKILLed" % CALLER_LIMIT)


def _check_survivors(result, marker):
    deadline = time.monotonic() + SURVIVOR_WAIT
    left = processes_with_marker(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        left = processes_with_marker(marker)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if left:
        result.survivors += len(left)
        result.fail("survivors", "%d process(es) alive %.0f s after the caller ended: %s" % (
            len(left), SURVIVOR_WAIT, _describe(left)))


def _describe(pids):
    out = []
    for pid in pids[:5]:
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                out.append("%d %s" % (pid, f.read().replace(b"\0", b" ").decode(errors="replace")[:80]))
        except OSError:
            out.append(str(pid))
    return "; ".join(out)


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _check_job(plan, result, returncode, log_dir, ledger, caller_result, out_path, err_path, chaos):
    n = plan.ranks
    job_code, caller_code = expected_exit(plan)
    stderr = _read(err_path)
    # The caller.
    if returncode != (0 if plan.caller == "python" and plan.ending != "caller_kill" else caller_code):
        result.fail("caller", "exit status %s, expected %s; stderr: %s" % (
            returncode, caller_code, stderr.strip()[-600:]))
    if "Traceback" in stderr:
        result.fail("caller", "a Python traceback: %s" % stderr.strip()[-600:])
    record = {}
    if plan.caller == "python" and plan.ending != "caller_kill":
        try:
            with open(caller_result) as f:
                record = json.load(f)
        except (OSError, ValueError) as e:
            result.fail("caller", "no result from the Python caller: %s" % e)
        expected_outcome = {"success": "returned", "terminate": "returned", "interrupt": "keyboard_interrupt"}.get(
            plan.ending, "runtime_error")
        if record and (record.get("outcome"), record.get("exit_code")) != (expected_outcome, caller_code):
            result.fail("caller", "Python outcome %s %s, expected %s %s" % (
                record.get("outcome"), record.get("exit_code"), expected_outcome, caller_code))
    # The run directory and its summary.
    run_dir = os.path.realpath(os.path.join(log_dir, "latest"))
    try:
        with open(os.path.join(run_dir, "summary.json")) as f:
            summary = json.load(f)
    except (OSError, ValueError) as e:
        result.fail("summary", "no summary.json in %s: %s" % (run_dir, e))
        return
    if record.get("run_dir") and os.path.realpath(record["run_dir"]) != run_dir:
        result.fail("summary", "the caller's run_dir %s is not log/latest %s" % (record["run_dir"], run_dir))
    ranks = summary.get("ranks", [])
    if len(ranks) != n:
        result.fail("summary", "%d ranks in summary.json, expected %d" % (len(ranks), n))
        return
    _check_summary(plan, result, summary, job_code)
    _check_report(plan, result, record, stderr, summary)
    _check_logs(plan, result, summary, run_dir, ledger, chaos)


def _status_code(entry):
    return entry["exit_code"] if entry["exit_code"] is not None else 128 + entry["signal"]


def _check_summary(plan, result, summary, job_code):
    expected_reason = {"success": "none", "rank_failure": "rank_failed", "timeout": "timed_out",
                       "caller_kill": "launcher_gone"}.get(plan.ending, "requested")
    expected_reason = "signaled" if (plan.ending, plan.caller) == ("terminate", "cli") else expected_reason
    first = summary["first_failure"]
    got = (summary["exit_code"], summary["stop_reason"], first)
    want = (job_code, expected_reason, plan.primary)
    if got != want:
        result.fail("report", "summary.json: exit code, stop reason, first failure %s, expected %s" % (got, want))
    ranks = summary["ranks"]
    if plan.primary is not None and first == plan.primary:
        # The rank named first also ended first among the ranks that failed.
        ended = ranks[first]["ended"]
        for e in ranks:
            if e["rank"] != first and _status_code(e) != 0 and e["ended"] < ended:
                result.fail("report", "rank %d (%s) ended at %.6f, before the first failure rank %d at %.6f" % (
                    e["rank"], e["status"], e["ended"], first, ended))
    daemons = sum(1 for b in plan.behaviours if b.daemon)
    if plan.ending in ("success", "interrupt", "terminate", "caller_kill") and \
            summary["leftover_processes_killed"] != daemons:
        result.fail("summary", "leftover_processes_killed %s, expected %d (one daemon each)" % (
            summary["leftover_processes_killed"], daemons))
    for e in ranks:
        b = plan.behaviours[e["rank"]]
        got = (_status_code(e), e["terminated_by_launcher"])
        own = b.own_code()
        if plan.ending == "success" or e["rank"] == plan.primary:
            allowed = {(own, False)}
        else:
            # Stopped by the launcher, or (exit 0 only) ended by itself
            # before or while the stop came; a rank failing on its own
            # after the first failure is always one the launcher stopped.
            allowed = {(128 + signal.SIGKILL, True)}
            if not b.ignore_term:
                allowed.add((128 + signal.SIGTERM, True))
            if own is not None:
                allowed.add((own, True))
                if own == 0:
                    allowed.add((0, False))
        if got not in allowed:
            result.fail("report", "rank %d (%s) ended with %s%s, not what its behaviour allows" % (
                e["rank"], b.kind, e["status"], " (stopped by the launcher)" if got[1] else ""))
        if (got[0] == 128 + signal.SIGKILL) != bool(e["killed_by_launcher"]):
            result.fail("report", "rank %d ended with %s, killed_by_launcher %s" % (
                e["rank"], e["status"], e["killed_by_launcher"]))


def _check_report(plan, result, record, stderr, summary):
    if plan.ending in ("success", "caller_kill"):
        return
    if plan.caller == "python":
        text = record.get("message") if plan.ending in ("rank_failure", "timeout") else record.get("report")
        if plan.ending == "rank_failure" and record.get("rank") != plan.primary:
            result.fail("report", "DistributedRuntimeError.rank %s, expected %s" % (record.get("rank"), plan.primary))
        text = text or ""
    else:
        text = stderr
    first, others = parse_report(text)
    expected_others = set(range(plan.ranks)) - {plan.primary}
    if first != plan.primary or set(others) != expected_others:
        result.fail("report", "the report names first %s and lists %d other rank(s) %s, expected %s and %d: %s" % (
            first, len(others), sorted(set(others) ^ expected_others)[:10], plan.primary, len(expected_others),
            text[-800:]))


def _check_logs(plan, result, summary, run_dir, ledger, chaos):
    n = plan.ranks
    written, _pids, _states = read_ledger(ledger, n)
    out = subprocess.run([chaos, "verify", run_dir, str(n)], check=True, stdout=subprocess.PIPE).stdout.decode()
    verified = {}
    for line in out.splitlines():
        r, valid, size = (int(x) for x in line.split())
        verified[r] = (valid, size)
    for e in summary["ranks"]:
        r = e["rank"]
        b = plan.behaviours[r]
        valid, size = verified.get(r, (-1, -1))
        if size < 0:
            result.fail("log", "rank %d has no log file" % r)
            result.bytes_lost += written[r]
            continue
        result.bytes_written += written[r]
        result.bytes_logged += size
        if valid < size:
            result.bytes_corrupt += size - valid
            result.fail("log", "rank %d: log differs from its stream at byte %d of %d" % (r, valid, size))
        if size < written[r]:
            result.bytes_lost += written[r] - size
            result.fail("log", "rank %d: log holds %d bytes, the rank wrote %d" % (r, size, written[r]))
        own = b.own_code()
        if own is not None and _status_code(e) == own and size != written[r]:
            result.fail(
                "log", "rank %d ended by itself but its log holds %d bytes, it wrote %d" % (r, size, written[r])
            )
        if e["output_bytes"] != size:
            result.fail("log", "rank %d: summary output_bytes %d, log file %d bytes" % (r, e["output_bytes"], size))


# ---- many reps --------------------------------------------------------------

class Totals:
    def __init__(self):
        self.reps = 0
        self.ranks = 0
        self.behaviours = collections.Counter()
        self.endings = collections.Counter()
        self.callers = collections.Counter()
        self.survivors = self.bytes_written = self.bytes_logged = self.bytes_lost = self.bytes_corrupt = 0
        self.report_mismatches = 0
        self.failed = []  # RepResult
        self.rep_seconds = []
        self.lock = threading.Lock()

    def add(self, r):
        with self.lock:
            p = r.plan
            self.reps += 1
            self.ranks += p.ranks
            self.endings[p.ending] += 1
            self.callers[p.caller + (" (output_notebook=%s)" % p.output_notebook if p.caller == "python" else "")] += 1
            for b in p.behaviours:
                self.behaviours[b.kind] += 1
                if b.flood:
                    self.behaviours["+flood"] += 1
                if b.daemon:
                    self.behaviours["+daemon (%s)" % ("holding output" if b.daemon == 2 else "on /dev/null")] += 1
                if b.close_after >= 0:
                    self.behaviours["+stdout closed early"] += 1
            self.survivors += r.survivors
            self.bytes_written += r.bytes_written
            self.bytes_logged += r.bytes_logged
            self.bytes_lost += r.bytes_lost
            self.bytes_corrupt += r.bytes_corrupt
            self.report_mismatches += r.report_mismatches
            self.rep_seconds.append(r.seconds)
            if r.failures:
                self.failed.append(r)

    def text(self, wall):
        lines = [
            "reps: %d, ranks started: %d, wall time: %.1f s (%.2f s per rep, slowest %.2f s)" % (
                self.reps, self.ranks, wall, wall / max(1, self.reps), max(self.rep_seconds or [0])),
            "endings: " + ", ".join("%s %d" % kv for kv in sorted(self.endings.items())),
            "callers: " + ", ".join("%s %d" % kv for kv in sorted(self.callers.items())),
            "behaviours: " + ", ".join("%s %d" % kv for kv in sorted(self.behaviours.items())),
            "survivors: %d" % self.survivors,
            "bytes written (ledger): %d, bytes in logs: %d, bytes lost: %d, bytes not in the stream: %d" % (
                self.bytes_written, self.bytes_logged, self.bytes_lost, self.bytes_corrupt),
            "report mismatches: %d" % self.report_mismatches,
            "failed reps: %d%s" % (len(self.failed), (" (seeds: %s)" % ", ".join(
                str(r.plan.seed) for r in self.failed[:20])) if self.failed else ""),
        ]
        return "\n".join(lines)


def describe_failure(r):
    p = r.plan
    head = "FAIL seed %d (%d ranks, ending %s, caller %s, grace %.3f s%s): replay with --seed %d --reps 1" % (
        p.seed, p.ranks, p.ending, p.caller, p.grace,
        ", job_timeout %.3f s" % p.job_timeout if p.job_timeout else "", p.seed)
    body = ["  %s: %s" % f for f in r.failures[:10]]
    if r.kept_dir:
        body.append("  files kept in %s" % r.kept_dir)
    return "\n".join([head] + body)


def run_many(reps, seed, max_ranks=64, jobs=1, progress=None, python=None):
    """Runs `reps` reps with seeds seed, seed+1, ...; returns (Totals, wall seconds)."""
    chaos = chaos_program()
    totals = Totals()
    started = time.monotonic()
    seeds = iter(range(seed, seed + reps))
    seeds_lock = threading.Lock()
    stop = threading.Event()

    def worker():
        while not stop.is_set():
            with seeds_lock:
                s = next(seeds, None)
            if s is None:
                return
            r = run_rep(s, chaos, max_ranks, python=python)
            totals.add(r)
            if progress:
                progress(r, totals)

    threads = [threading.Thread(target=worker) for _ in range(max(1, jobs))]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except KeyboardInterrupt:
        stop.set()  # the reps under way finish, and clean up after themselves
        for t in threads:
            t.join()
        raise
    return totals, time.monotonic() - started
