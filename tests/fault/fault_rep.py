"""Running one rep of the fault run: its files, one caller per server (each
server with its own log and device-lock directories, as separate machines
have), the ending sent to the origin server at the planned moment (once
every rank runs, or once the server is in the state it is held in), then
the checks of fault_checks.py.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import fault_checks
from caller_signals import caller_argv
from fault_expect import expected_end
from fault_plan import RepPlan, write_rank_table
from fault_stream import HERE, read_ledger
from process_scan import MARKER_VARIABLE

CALLER_SCRIPT = os.path.join(HERE, "fault_caller.py")
CALLER_LIMIT = 60.0  # a caller still running this long after its start is a hang
STATE_LIMIT = 30.0  # for the ranks to run, or the origin to reach the state it is held in
# Variables of the driver's environment that would make every rep's job
# alike (its JOB_ID and ports) or hold it: each rep sets its own.
CLEARED = ("DAVINCIRUN_TEST_HOLD", "BATCH_JOB_ID", "JOB_ID", "MA_VJ_NAME", "DAVINCIRUN_PEER_PORT", "DAVINCIRUN_JOB_KEY")


class RepResult:
    def __init__(self, plan):
        self.plan = plan
        self.failures = []  # (check, detail)
        self.survivors = 0
        self.held_locks = 0
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


class ServerRun:
    """One server of a rep: its directories, its caller and what the caller left."""

    def __init__(self, plan, server, base, shared):
        self.plan = plan
        self.server = server
        self.expected = expected_end(plan, server)
        self.dir = os.path.join(base, "server%d" % server.index)
        self.log_dir = os.path.join(self.dir, "log")
        self.lock_dir = os.path.join(self.dir, "locks")
        for d in (self.log_dir, self.lock_dir):
            os.makedirs(d)
        self.path = {name: os.path.join(self.dir, name) for name in (
            "caller.out", "caller.err", "caller.json", "caller_config.json", "waiting", "trigger")}
        self.table = shared["table"]
        self.proc = None
        self.started = 0.0
        self.env = {k: v for k, v in os.environ.items() if k not in CLEARED}
        self.env.update({"DAVINCIRUN_LOCK_DIR": self.lock_dir, MARKER_VARIABLE: shared["marker"]})
        if plan.hold and server.index == plan.origin:
            self.env["DAVINCIRUN_TEST_HOLD"] = "%s:%d" % (plan.hold, plan.hold_ms)

    def argv(self, shared, python):
        plan, command = self.plan, shared["command"]
        timeout = plan.job_timeout if self.server.index == plan.origin else None
        if plan.caller == "python":
            cfg = {
                "command": command, "work_dir": shared["work"], "log_dir": self.log_dir, "rank_table": self.table,
                "output_notebook": plan.output_notebook, "grace_period": plan.grace, "job_timeout": timeout,
                "env": {MARKER_VARIABLE: shared["marker"]}, "ending": plan.ending, "result": self.path["caller.json"],
                "waiting": self.path["waiting"], "trigger": self.path["trigger"],
            }
            with open(self.path["caller_config.json"], "w") as f:
                json.dump(cfg, f)
            return [python, CALLER_SCRIPT, self.path["caller_config.json"]]
        # Several servers: a member keeps trying to reach the hub for the wait timeout.
        wait = "30" if len(plan.servers) > 1 else "0"
        argv = ["davincirun", "-r", self.table, "--server-id", self.server.server_id, "-l", self.log_dir,
                "-w", shared["work"], "--wait-timeout", wait, "--grace-period", str(plan.grace)]
        if timeout is not None:
            argv += ["--job-timeout", str(timeout)]
        return argv + ["--"] + command

    def start(self, shared, python):
        with open(self.path["caller.out"], "wb") as out, open(self.path["caller.err"], "wb") as err:
            self.proc = subprocess.Popen(caller_argv(self.argv(shared, python)), env=self.env, stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=err, start_new_session=True)
        self.started = time.monotonic()

    def journal(self):
        return fault_checks.read_text(os.path.join(self.log_dir, "latest", "events.txt"))

    def send(self, action):
        """The ending (or the second event) `action` to this server's caller."""
        if action == "terminate" and self.plan.caller == "python":
            with open(self.path["trigger"], "w"):
                pass  # the caller calls terminate() (fault_caller.py)
            return
        sig = {"interrupt": signal.SIGINT, "terminate": signal.SIGTERM, "caller_kill": signal.SIGKILL}[action]
        self.proc.send_signal(sig)


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
    table = os.path.join(base, "rank_table.json")
    write_rank_table(table, plan)
    work = os.path.join(base, "work")
    os.mkdir(work)
    plan_file = os.path.join(base, "plan.txt")
    with open(plan_file, "w") as f:
        f.write(plan.plan_text())
    ledger = os.path.join(base, "ledger.bin")
    with open(ledger, "wb") as f:
        f.write(b"\0" * (24 * plan.ranks))
    # One marker for every process of the rep, on every server.
    shared = {"table": table, "work": work, "command": [chaos, plan_file, ledger],
              "marker": "%d-%s" % (plan.seed, os.urandom(6).hex())}
    runs = [ServerRun(plan, s, base, shared) for s in plan.servers]
    try:
        for i in plan.start_order:
            runs[i].start(shared, python)
        _drive(plan, result, runs, ledger)
    finally:
        for run in runs:
            if run.proc is not None and run.proc.poll() is None:
                run.proc.kill()
            if run.proc is not None:
                run.proc.wait()
    fault_checks.check_processes(result, shared["marker"], runs)
    written = read_ledger(ledger, plan.ranks)[0]
    for run in runs:
        fault_checks.check_server(result, run, chaos, written)


def _drive(plan, result, runs, ledger):
    origin = runs[plan.origin]
    ok = True
    if plan.ending in ("interrupt", "terminate", "caller_kill"):
        also = origin.path["waiting"] if (plan.caller, plan.ending) == ("python", "interrupt") else None
        ok = _wait_ready(ledger, plan.ranks, runs, also)
        if not ok:
            result.fail("start", "the ranks did not all start (caller status %s)" % [r.proc.poll() for r in runs])
        elif plan.hold in ("draining", "waiting_for_servers"):
            ok = _wait_journal(result, origin, "-> %s on " % plan.hold)
        if ok:
            time.sleep(plan.delay)
            origin.send(plan.ending)
    if ok and plan.second:
        if _wait_journal(result, origin, "-> killing on "):
            origin.send(plan.second)
    for run in runs:
        try:
            run.proc.wait(timeout=max(0.0, run.started + CALLER_LIMIT - time.monotonic()))
        except subprocess.TimeoutExpired:
            result.fail("hang", "the caller of server %s was still running %.0f s after its start: SIGKILLed" % (
                run.server.server_id, CALLER_LIMIT))


def _wait_ready(ledger, ranks, runs, also=None):
    """Until every rank of the job runs (and `also` exists); False if a caller ended first."""
    deadline = time.monotonic() + STATE_LIMIT
    while time.monotonic() < deadline:
        if any(r.proc.poll() is not None for r in runs):
            return False
        if all(read_ledger(ledger, ranks)[2]) and (also is None or os.path.exists(also)):
            return True
        time.sleep(0.005)
    return False


def _wait_journal(result, run, needle):
    """Until the server's journal holds `needle` (it entered the state held)."""
    deadline = time.monotonic() + STATE_LIMIT
    while time.monotonic() < deadline:
        ended = run.proc.poll() is not None
        if needle in run.journal():
            return True
        if ended:
            break
        time.sleep(0.005)
    result.fail("state", "server %s never logged %r (caller status %s)" % (
        run.server.server_id, needle, run.proc.poll()))
    return False
