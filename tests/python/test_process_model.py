"""The process model: whatever way a job ends, nothing it started survives.

Every rank here forks a child that calls setsid() and forks a grandchild, so
the grandchild is out of the rank's process group and session and is
re-parented once the middle process exits. The promises, each checked from
the Python API and from the `davincirun` command:

- after success, a rank failure, an interrupt (terminate(), Ctrl-C) and a
  SIGKILLed caller, no rank and no descendant of a rank is left alive;
- a grandchild keeping the rank's stdout open does not keep the job from
  finishing;
- a rank ignoring SIGTERM is SIGKILLed after the grace period and reported so.

Every process of a job carries the job_env marker; each test asserts itself
that none is left, and job_env checks again.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import MARKER_VARIABLE, processes_with_marker

from davincirunsdk import DistributedRuntimeError, start_and_wait_distributed_train, start_distributed_train

DAVINCIRUN = shutil.which("davincirun")
needs_cli = pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH (pip install . first)")

GRACE = 1  # seconds between SIGTERM and SIGKILL in every job here
SURVIVOR_TIMEOUT = 5.0  # how long a process of an ended job may take to disappear


@pytest.fixture(params=["pidfd", "sigchld"])
def tracking(request, monkeypatch):
    """The launcher's process-tracking mode; inherited by every subprocess."""
    monkeypatch.setenv("DAVINCIRUN_PROCESS_TRACKING", request.param)
    return request.param


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
import json, signal, sys, time

signal.signal(signal.SIGINT, signal.default_int_handler)  # even if SIGINT was ignored by our parent
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


def restore_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # davincirun keeps a SIGINT ignored at its start


def read_summary(job):
    with open(job.log_dir / "latest" / "summary.json") as f:
        return json.load(f)


# --------------------------------------------------------------- Python API


def test_api_success_leaves_no_descendant(tmp_path, rank_table, job_env, tracking):
    job = Job(tmp_path, "ok", "devnull")
    handle = start_distributed_train(job.command, log_dir=str(job.log_dir), rank_table=rank_table(2), env=job_env,
                                     grace_period=GRACE, output_notebook=False)
    assert handle.wait() == 0
    job.check_grandchildren(2)
    for r in range(2):
        with open(os.path.join(handle.run_dir, "rank_%d.device_%d.log" % (r, r))) as f:
            assert "rank %d done" % r in f.read()
    assert_nothing_survives(job_env[MARKER_VARIABLE], also=handle.pids + job.grandchild_pids(2))


def test_api_rank_failure_leaves_no_descendant(tmp_path, rank_table, job_env, tracking):
    job = Job(tmp_path, "fail", "devnull")
    with pytest.raises(DistributedRuntimeError) as info:
        start_and_wait_distributed_train(job.command, log_dir=str(job.log_dir), rank_table=rank_table(2),
                                         env=job_env, grace_period=GRACE, output_notebook=False)
    error = info.value
    assert (error.rank, error.exit_code) == (1, 3)
    assert error.result.ranks[0].terminated_by_launcher
    job.check_grandchildren(2)
    assert_nothing_survives(job_env[MARKER_VARIABLE],
                            also=[r.pid for r in error.result.ranks] + job.grandchild_pids(2))


def test_api_terminate_leaves_no_descendant(tmp_path, rank_table, job_env, tracking):
    job = Job(tmp_path, "sleep", "devnull")
    handle = start_distributed_train(job.command, log_dir=str(job.log_dir), rank_table=rank_table(2), env=job_env,
                                     grace_period=GRACE, output_notebook=False)
    try:
        job.wait_ready(2)
    finally:
        handle.terminate()
    assert handle.wait() == 130
    assert all(r.terminated_by_launcher for r in handle.result.ranks)
    assert_nothing_survives(job_env[MARKER_VARIABLE], also=handle.pids + job.grandchild_pids(2))


def test_api_keyboard_interrupt_in_caller_leaves_no_descendant(tmp_path, rank_table, job_env, tracking):
    job = Job(tmp_path, "sleep", "devnull")
    proc = start_caller(job, rank_table(2), job_env)
    try:
        job.wait_ready(2, proc)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        stop(proc)
    assert proc.returncode == 42, err
    assert json.loads(out.splitlines()[-1])["outcome"] == "KeyboardInterrupt"
    assert_nothing_survives(job_env[MARKER_VARIABLE], also=job.grandchild_pids(2))


@pytest.mark.parametrize("stdio", ["devnull", "none"], ids=["setsid_grandchild", "ranks_only"])
def test_api_caller_sigkill_leaves_no_descendant(tmp_path, rank_table, job_env, tracking, stdio):
    marker = job_env[MARKER_VARIABLE]
    job = Job(tmp_path, "sleep", stdio)
    proc = start_caller(job, rank_table(2), job_env)
    try:
        job.wait_ready(2, proc)
        expected = 2 if stdio == "none" else 4  # at least the ranks and their grandchildren
        deadline = time.monotonic() + 10
        while len(processes_with_marker(marker)) < expected and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(processes_with_marker(marker)) >= expected
    finally:
        stop(proc)  # SIGKILL: the caller gets no chance to clean up
    assert proc.returncode == -signal.SIGKILL
    assert_nothing_survives(marker, also=job.grandchild_pids(2))


def test_api_grandchild_holding_stdout_does_not_hang_the_job(tmp_path, rank_table, job_env, tracking):
    """Run in a caller subprocess so that a hanging job cannot hang the suite."""
    job = Job(tmp_path, "ok", "inherit")
    start = time.monotonic()
    proc = start_caller(job, rank_table(2), job_env)
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        stop(proc)
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, err
    report = json.loads(out.splitlines()[-1])
    assert (report["outcome"], report["code"]) == ("returned", 0)
    assert elapsed < 15
    job.check_grandchildren(2)
    assert_nothing_survives(job_env[MARKER_VARIABLE], also=job.grandchild_pids(2))


def test_api_rank_ignoring_sigterm_is_killed_after_the_grace_period(tmp_path, rank_table, job_env, tracking):
    job = Job(tmp_path, "ignore_term", "none")
    start = time.monotonic()
    with pytest.raises(DistributedRuntimeError) as info:
        start_and_wait_distributed_train(job.command, log_dir=str(job.log_dir), rank_table=rank_table(2),
                                         env=job_env, grace_period=GRACE, output_notebook=False)
    assert time.monotonic() - start < 15
    error = info.value
    assert (error.rank, error.exit_code) == (1, 3)
    stubborn, failed = error.result.ranks
    assert stubborn.terminated_by_launcher and stubborn.killed_by_launcher
    assert stubborn.signal == signal.SIGKILL
    assert GRACE - 0.1 <= stubborn.ended - failed.ended < GRACE + 5
    assert not failed.killed_by_launcher
    assert "killed" in str(error)
    assert_nothing_survives(job_env[MARKER_VARIABLE], also=[r.pid for r in error.result.ranks])


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


@pytest.mark.parametrize("where", ["child", "session"])
@pytest.mark.parametrize("term", ["obey", "ignore"])
def test_api_a_rank_that_left_its_process_group_is_still_stopped(tmp_path, rank_table, job_env, tracking, where,
                                                                 term):
    """Stopping signals a rank's process group; a rank that moved to another
    group (setpgid) must still get SIGTERM, and SIGKILL after the grace."""
    command = [sys.executable, "-c", GROUP_LEAVER, where, term, str(tmp_path / "moved")]
    start = time.monotonic()
    with pytest.raises(DistributedRuntimeError) as info:
        start_and_wait_distributed_train(command, log_dir=str(tmp_path / "log"), rank_table=rank_table(2),
                                         env=job_env, grace_period=GRACE, output_notebook=False)
    assert time.monotonic() - start < 15
    moved, failed = info.value.result.ranks
    assert (info.value.rank, info.value.exit_code) == (1, 3)
    assert moved.terminated_by_launcher
    assert moved.signal == (signal.SIGKILL if term == "ignore" else signal.SIGTERM)
    assert moved.killed_by_launcher == (term == "ignore")
    assert_nothing_survives(job_env[MARKER_VARIABLE], also=[moved.pid, failed.pid])


# ------------------------------------------------------------------- the CLI


@needs_cli
def test_cli_success_leaves_no_descendant(tmp_path, rank_table, job_env, tracking):
    job = Job(tmp_path, "ok", "devnull")
    code, out, err = run_cli(job, rank_table(2), job_env)
    assert code == 0, err
    for r in range(2):
        assert "[rank %d] rank %d done\n" % (r, r) in out
    job.check_grandchildren(2)
    assert_nothing_survives(job_env[MARKER_VARIABLE], also=job.grandchild_pids(2))


@needs_cli
def test_cli_rank_failure_leaves_no_descendant(tmp_path, rank_table, job_env, tracking):
    job = Job(tmp_path, "fail", "devnull")
    code, out, err = run_cli(job, rank_table(2), job_env)
    assert code == 3, err
    assert "rank 1" in err and "exit code 3" in err
    job.check_grandchildren(2)
    assert_nothing_survives(job_env[MARKER_VARIABLE], also=job.grandchild_pids(2))


@needs_cli
def test_cli_sigint_leaves_no_descendant(tmp_path, rank_table, job_env, tracking):
    job = Job(tmp_path, "sleep", "devnull")
    proc = subprocess.Popen(cli_argv(job, rank_table(2), job_env), cwd=str(tmp_path), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=restore_sigint)
    try:
        job.wait_ready(2, proc)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        stop(proc)
    assert proc.returncode == 130, err
    assert_nothing_survives(job_env[MARKER_VARIABLE], also=job.grandchild_pids(2))


@needs_cli
@pytest.mark.parametrize("stdio", ["devnull", "none"], ids=["setsid_grandchild", "ranks_only"])
def test_cli_caller_sigkill_leaves_no_descendant(tmp_path, rank_table, job_env, tracking, stdio):
    job = Job(tmp_path, "sleep", stdio)
    proc = subprocess.Popen(cli_argv(job, rank_table(2), job_env), cwd=str(tmp_path), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        job.wait_ready(2, proc)
    finally:
        stop(proc)  # SIGKILL: davincirun gets no chance to clean up
    assert proc.returncode == -signal.SIGKILL
    assert_nothing_survives(job_env[MARKER_VARIABLE], also=job.grandchild_pids(2))


@needs_cli
def test_cli_grandchild_holding_stdout_does_not_hang_the_job(tmp_path, rank_table, job_env, tracking):
    job = Job(tmp_path, "ok", "inherit")
    start = time.monotonic()
    code, out, err = run_cli(job, rank_table(2), job_env)
    assert time.monotonic() - start < 15
    assert code == 0, err
    assert "[rank 0] rank 0 done\n" in out and "[rank 1] rank 1 done\n" in out
    job.check_grandchildren(2)
    assert_nothing_survives(job_env[MARKER_VARIABLE], also=job.grandchild_pids(2))


@needs_cli
def test_cli_rank_ignoring_sigterm_is_killed_after_the_grace_period(tmp_path, rank_table, job_env, tracking):
    job = Job(tmp_path, "ignore_term", "none")
    start = time.monotonic()
    code, out, err = run_cli(job, rank_table(2), job_env)
    assert time.monotonic() - start < 15
    assert code == 3, err
    assert any("rank 0" in line and "killed" in line for line in err.splitlines()), err
    summary = read_summary(job)
    stubborn, failed = summary["ranks"]
    assert stubborn["killed_by_launcher"] and stubborn["signal"] == signal.SIGKILL
    assert GRACE - 0.1 <= stubborn["ended"] - failed["ended"] < GRACE + 5
    assert summary["first_failure"] == 1 and failed["exit_code"] == 3
    assert_nothing_survives(job_env[MARKER_VARIABLE], also=[r["pid"] for r in summary["ranks"]])


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


@needs_cli
def test_cli_sigterm_to_the_supervisor_is_named_and_exits_143(tmp_path, rank_table, job_env, tracking):
    """A platform stopping the job by signalling its supervisor process: every
    rank is stopped, and the outcome names the signal (exit 128 + 15)."""
    job = Job(tmp_path, "sleep", "devnull")
    proc, _, err = signal_the_cli_supervisor(job, rank_table(2), job_env, tmp_path, signal.SIGTERM)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "the job supervisor got signal 15 (SIGTERM): stopping every rank" in err
    assert "the job was stopped by signal 15 (SIGTERM) to its supervisor process" in err
    summary = read_summary(job)
    assert summary["stop_reason"] == "signaled"
    assert all(r["signal"] == signal.SIGTERM and r["terminated_by_launcher"] for r in summary["ranks"])
    assert_nothing_survives(job_env[MARKER_VARIABLE], also=job.grandchild_pids(2))


@needs_cli
def test_cli_supervisor_sigkill_still_leaves_no_descendant(tmp_path, rank_table, job_env, tracking):
    """The supervisor process itself SIGKILLed (e.g. `pkill -9 davincirun`
    reaching it): its ranks die with it (PR_SET_PDEATHSIG), and the launcher
    kills what they started by the job's DAVINCIRUN_JOB_TAG, then says so."""
    job = Job(tmp_path, "sleep", "devnull")
    proc, supervisor, err = signal_the_cli_supervisor(job, rank_table(2), job_env, tmp_path, signal.SIGKILL)
    assert proc.returncode != 0
    assert "job supervisor process (pid %d) ended with signal 9" % supervisor in err
    # the 2 daemons, and maybe a rank not yet gone from its parent's death
    assert re.search(r"; [2-4] more process\(es\) of the job were still running and are killed", err), err
    assert_nothing_survives(job_env[MARKER_VARIABLE], also=job.grandchild_pids(2))


def test_api_caller_sigkill_still_removes_the_cache_dir(tmp_path, rank_table, job_env, tracking, monkeypatch):
    """random_cache_dir=True: the per-job compiler cache is removed by the
    supervisor process, so even a SIGKILLed caller (a kernel restart) leaves
    none behind."""
    cache_root = tmp_path / "tmp"
    cache_root.mkdir()
    monkeypatch.setenv("TMPDIR", str(cache_root))  # make_cache_dir() falls back to the temp dir
    job = Job(tmp_path, "sleep", "none")
    kwargs = {"command": job.command, "log_dir": str(job.log_dir), "rank_table": rank_table(2), "env": job_env,
              "grace_period": GRACE, "random_cache_dir": True}
    script = tmp_path / "caller.py"
    script.write_text(CALLER_SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), json.dumps(kwargs)], cwd=str(tmp_path),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        job.wait_ready(2, proc)
        assert len(os.listdir(cache_root)) == 1  # the job's cache dir exists while it runs
    finally:
        stop(proc)
    assert_nothing_survives(job_env[MARKER_VARIABLE])
    deadline = time.monotonic() + 5
    while os.listdir(cache_root) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.listdir(cache_root) == []
