"""What the process-model tests share: the rank program (a rank whose
child setsid()s and forks a grandchild), the caller program, and checks that
nothing of a job survives."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import MARKER_VARIABLE, processes_with_marker

DAVINCIRUN = shutil.which("davincirun")


needs_cli = pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH (pip install . first)")


GRACE = 1  # seconds between SIGTERM and SIGKILL in every job here


SURVIVOR_TIMEOUT = 5.0  # how long a process of an ended job may take to disappear


# argv: SCENARIO STDIO STATE_DIR
#   SCENARIO: ok (print, exit 0) | fail (rank 1 exits 3 once every rank is
#             ready, the others sleep) | sleep | ignore_term (as fail, but
#             rank 0 ignores SIGTERM)
#   STDIO:    devnull (grandchild redirects its stdio to /dev/null) |
#             inherit (grandchild keeps the rank's stdout/stderr) | none (no grandchild)
# Files in STATE_DIR: grandchild.<rank> = "pid pgid sid" of the grandchild;
# ready.<rank> = "pid pgid" of the rank, written once its grandchild exists.
RANK_SCRIPT = r'''
import os, signal, sys, time

scenario, stdio, state = sys.argv[1], sys.argv[2], sys.argv[3]
rank = os.environ["RANK_ID"]
size = int(os.environ["RANK_SIZE"])


def publish(name, text):
    tmp = os.path.join(state, name + ".tmp.%d" % os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, os.path.join(state, name))


def wait_for(names, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(os.path.exists(os.path.join(state, n)) for n in names):
            return
        time.sleep(0.02)
    sys.exit("rank %s: timed out waiting for %s" % (rank, names))


if stdio != "none":
    middle = os.fork()
    if middle == 0:
        try:
            os.setsid()  # a new session and process group: out of the rank's
            if os.fork() == 0:
                if stdio == "devnull":
                    fd = os.open(os.devnull, os.O_RDWR)
                    for target in (0, 1, 2):
                        os.dup2(fd, target)
                    if fd > 2:
                        os.close(fd)
                publish("grandchild." + rank, "%d %d %d" % (os.getpid(), os.getpgid(0), os.getsid(0)))
                time.sleep(600)
        finally:
            os._exit(0)  # the middle process exits at once: the grandchild is re-parented
    os.waitpid(middle, 0)
    wait_for(["grandchild." + rank])

if scenario == "ignore_term" and rank == "0":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
publish("ready." + rank, "%d %d" % (os.getpid(), os.getpgid(0)))

if scenario == "ok":
    print("rank %s done" % rank, flush=True)
    sys.exit(0)
if scenario in ("fail", "ignore_term") and rank == "1":
    wait_for(["ready.%d" % r for r in range(size)])
    print("rank 1 fails", flush=True)
    sys.exit(3)
time.sleep(600)
'''


# A Python caller that is itself signalled or killed. argv[1]: JSON with the
# keyword arguments of start_and_wait_distributed_train. Prints one JSON line.
CALLER_SCRIPT = r'''
import json, sys, time
from davincirunsdk import start_and_wait_distributed_train

kwargs = json.loads(sys.argv[1])
command = kwargs.pop("command")
start = time.monotonic()
try:
    code = start_and_wait_distributed_train(command, output_notebook=False, **kwargs)
except KeyboardInterrupt:
    print(json.dumps({"outcome": "KeyboardInterrupt", "elapsed": time.monotonic() - start}), flush=True)
    sys.exit(42)
print(json.dumps({"outcome": "returned", "code": code, "elapsed": time.monotonic() - start}), flush=True)
'''


class Job:
    """Paths and argv of one test job."""

    def __init__(self, tmp_path, scenario, stdio):
        self.tmp_path = tmp_path
        self.state = tmp_path / "state"
        self.state.mkdir()
        self.log_dir = tmp_path / "log"
        script = tmp_path / "rank.py"
        script.write_text(RANK_SCRIPT)
        self.stdio = stdio
        self.command = [sys.executable, str(script), scenario, stdio, str(self.state)]

    def read(self, name):
        return [int(x) for x in (self.state / name).read_text().split()]

    def wait_ready(self, n, proc=None, timeout=20.0):
        """Waits until every rank (and its grandchild) is running; checks the
        grandchildren really left the ranks' process groups."""
        names = ["ready.%d" % r for r in range(n)]
        deadline = time.monotonic() + timeout
        while not all((self.state / name).exists() for name in names):
            if proc is not None and proc.poll() is not None:
                pytest.fail("the caller ended (status %s) before every rank was ready" % proc.returncode)
            assert time.monotonic() < deadline, "ranks not ready after %.0f s" % timeout
            time.sleep(0.02)
        self.check_grandchildren(n)

    def check_grandchildren(self, n):
        if self.stdio == "none":
            return
        for r in range(n):
            _, gc_pgid, gc_sid = self.read("grandchild.%d" % r)
            _, rank_pgid = self.read("ready.%d" % r)
            assert gc_pgid != rank_pgid and gc_sid == gc_pgid  # setsid(): its own session and group

    def grandchild_pids(self, n):
        return [self.read("grandchild.%d" % r)[0] for r in range(n)] if self.stdio != "none" else []


def describe(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        with open("/proc/%d/stat" % pid, "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return "pid %d (ppid %s, pgid %s, sid %s): %s" % (
            pid, fields[1].decode(), fields[2].decode(), fields[3].decode(), cmdline)
    except OSError:
        return "pid %d (gone)" % pid


def assert_nothing_survives(marker, also=(), timeout=SURVIVOR_TIMEOUT):
    """Polls for up to `timeout` s until no process carries `marker` (and none
    of `also` is alive); kills and reports any survivor."""

    def alive():
        found = set(processes_with_marker(marker))
        for pid in also:
            try:
                with open("/proc/%d/stat" % pid, "rb") as f:
                    if f.read().rsplit(b")", 1)[1].split()[0] != b"Z":
                        found.add(pid)
            except OSError:
                pass
        return sorted(found)

    deadline = time.monotonic() + timeout
    left = alive()
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = alive()
    details = [describe(pid) for pid in left]
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert left == [], "still alive %.0f s later: %s" % (timeout, "; ".join(details))


def stop(proc):
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def start_caller(job, table, job_env, grace_period=GRACE):
    kwargs = {"command": job.command, "log_dir": str(job.log_dir), "rank_table": table, "env": job_env,
              "grace_period": grace_period}
    script = job.tmp_path / "caller.py"
    script.write_text(CALLER_SCRIPT)
    return subprocess.Popen([sys.executable, str(script), json.dumps(kwargs)], cwd=str(job.tmp_path),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def cli_argv(job, table, job_env, *options):
    return ([DAVINCIRUN, "--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE]), "-r", table,
             "-l", str(job.log_dir), "--grace-period", str(GRACE)] + list(options) + ["--"] + job.command)


def run_cli(job, table, job_env, timeout=60):
    proc = subprocess.Popen(cli_argv(job, table, job_env), cwd=str(job.tmp_path), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        stop(proc)
    return proc.returncode, out, err


def read_summary(job):
    with open(job.log_dir / "latest" / "summary.json") as f:
        return json.load(f)


# A rank that leaves the process group it was started in: rank 0 joins the
# group of a child of its own (argv[1] "child") or the supervisor's (argv[1]
# "session": the group of its session leader), optionally ignoring SIGTERM
# (argv[2] "ignore"); rank 1 exits 3 once rank 0 has moved.
GROUP_LEAVER = r"""
import os, signal, sys, time
where, term, ready = sys.argv[1], sys.argv[2], sys.argv[3]
if os.environ["RANK_ID"] == "1":
    while not os.path.exists(ready):
        time.sleep(0.01)
    sys.exit(3)
if term == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if where == "child":
    child = os.fork()
    if child == 0:
        os.setpgid(0, 0)
        time.sleep(120)
        os._exit(0)
    os.setpgid(child, child)
    os.setpgid(0, child)
else:
    os.setpgid(0, os.getsid(0))
assert os.getpgid(0) != os.getpid()
open(ready, "w").close()
time.sleep(120)
"""


def signal_the_cli_supervisor(job, table, job_env, tmp_path, signo):
    """Runs `davincirun` on `job` and sends `signo` to its supervisor process
    once the ranks are up; returns (the finished Popen, the supervisor's pid,
    its stderr)."""
    proc = subprocess.Popen(cli_argv(job, table, job_env), cwd=str(tmp_path), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        job.wait_ready(2, proc)
        with open("/proc/%d/task/%d/children" % (proc.pid, proc.pid)) as f:
            supervisor = int(f.read().split()[0])  # the CLI's only child
        os.kill(supervisor, signo)
        _, err = proc.communicate(timeout=30)
    finally:
        stop(proc)
    return proc, supervisor, err
