"""Jobs where the kernel's answer is "no": clone(CLONE_PIDFD) and
prctl(PR_SET_CHILD_SUBREAPER) refused, as under qemu-user 7.2 (EINVAL, and
ENOSYS for clone3) and in seccomp-filtered containers (EPERM). Each job runs
under tests/seccomp/refuse_syscalls, a real seccomp filter inherited by the
launcher, its supervisor process and the ranks, through the `davincirun`
command and the Python API: exits are tracked by SIGCHLD instead (recorded in
summary.json, without a console notice), the lost subreaper is announced
once, a failing rank still stops the others, every log is complete, and the
daemons the ranks detached are still found (by the job's tag) and killed."""

import hashlib
import json
import os
import subprocess
import sys
import time

import pytest
from conftest import MARKER_VARIABLE, REPO
from process_model_support import DAVINCIRUN, assert_nothing_survives, needs_cli, stop

TOOL_SOURCE = os.path.join(REPO, "tests", "seccomp", "refuse_syscalls.cpp")
SUBREAPER_NOTICE = "PR_SET_CHILD_SUBREAPER was refused with"
LINES = 3000  # lines each rank writes before its ending


def refuse_syscalls():
    """Path of refuse_syscalls, compiled once per version of its source into
    build/seccomp/<sha256>/ (as tests/fault compiles its rank program)."""
    with open(TOOL_SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    target = os.path.join(REPO, "build", "seccomp", digest, "refuse_syscalls")
    if not os.access(target, os.X_OK):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = "%s.%d.tmp" % (target, os.getpid())
        subprocess.run(["c++", "-O2", "-std=c++17", "-o", tmp, TOOL_SOURCE], check=True)
        os.replace(tmp, target)  # atomic: a concurrent build of the same source is harmless
    return target


def under_filter(errno_name, subreaper=True):
    """argv prefix: what follows runs with CLONE_PIDFD (and the subreaper
    flag) refused with `errno_name`; clone3 is refused with ENOSYS, as under
    qemu-user and Docker's default profile."""
    argv = [refuse_syscalls(), "--clone-pidfd=" + errno_name, "--clone3=ENOSYS"]
    if subreaper:
        argv.append("--subreaper=" + errno_name)
    return argv + ["--"]


# argv: STATE_DIR LINES. Each rank detaches a daemon (double fork and setsid(), so
# it is re-parented away from its rank and out of its process group and
# session), writes LINES numbered lines, then rank 1 exits 3 once rank 0 is
# ready, and rank 0 sleeps until it is stopped.
RANK_SCRIPT = r"""
import os, sys, time
state, lines = sys.argv[1], int(sys.argv[2])
rank = os.environ["RANK_ID"]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        fd = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):
            os.dup2(fd, target)
        with open(os.path.join(state, "daemon.%s.tmp" % rank), "w") as f:
            f.write(str(os.getpid()))
        os.rename(os.path.join(state, "daemon.%s.tmp" % rank), os.path.join(state, "daemon." + rank))
        time.sleep(600)
    os._exit(0)
while not os.path.exists(os.path.join(state, "daemon." + rank)):
    time.sleep(0.01)
for i in range(lines):
    print("rank %s line %d" % (rank, i))
sys.stdout.flush()
open(os.path.join(state, "ready." + rank), "w").close()
if rank == "1":
    while not os.path.exists(os.path.join(state, "ready.0")):
        time.sleep(0.01)
    sys.exit(3)
time.sleep(600)
"""

# argv[1]: JSON keyword arguments of start_and_wait_distributed_train plus
# "command". Prints one JSON line: what the exception or the result says.
API_CALLER = r"""
import json, sys
from davincirunsdk import DistributedRuntimeError, start_and_wait_distributed_train
kwargs = json.loads(sys.argv[1])
command = kwargs.pop("command")
try:
    start_and_wait_distributed_train(command, **kwargs)
    out = {"raised": False}
except DistributedRuntimeError as e:
    r = e.result
    out = {"raised": True, "rank": e.rank, "exit_code": e.exit_code, "message": str(e), "tracking": r.tracking,
           "tracking_fallback": r.tracking_fallback, "child_subreaper": r.child_subreaper,
           "leftovers": r.leftover_processes_killed,
           "ranks": [[x.rank, x.status, x.terminated_by_launcher, x.log_path] for x in r.ranks]}
print(json.dumps(out), flush=True)
"""


class RankJob:
    def __init__(self, tmp_path):
        self.state = tmp_path / "state"
        self.state.mkdir()
        self.log_dir = tmp_path / "log"
        script = tmp_path / "rank.py"
        script.write_text(RANK_SCRIPT)
        self.command = [sys.executable, str(script), str(self.state), str(LINES)]

    def daemons(self):
        return [int((self.state / ("daemon.%d" % r)).read_text()) for r in range(2)]

    def summary(self):
        with open(self.log_dir / "latest" / "summary.json") as f:
            return json.load(f)


def run(argv, cwd, timeout=60):
    proc = subprocess.Popen(argv, cwd=str(cwd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        stop(proc)
    return proc.returncode, out, err


def check_complete_logs(log_paths):
    for rank, path in enumerate(log_paths):
        with open(path) as f:
            assert f.read() == "".join("rank %d line %d\n" % (rank, i) for i in range(LINES))


def check_last_words(console):
    """Each rank's last line reached the console (a console that falls
    behind may skip older lines, never the newest)."""
    for r in range(2):
        assert "[rank %d] rank %d line %d\n" % (r, r, LINES - 1) in console


def cli(job, table, job_env, *prefix):
    return list(prefix) + [DAVINCIRUN, "--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE]), "-r", table,
                           "-l", str(job.log_dir), "--grace-period", "5", "--"] + job.command


@needs_cli
@pytest.mark.parametrize("errno_name", ["EINVAL", "EPERM"])
def test_cli_falls_back_and_still_stops_everything(tmp_path, rank_table, job_env, errno_name):
    job = RankJob(tmp_path)
    start = time.monotonic()
    code, out, err = run(cli(job, rank_table(2), job_env, *under_filter(errno_name)), tmp_path)
    assert time.monotonic() - start < 5  # SIGTERM stopped rank 0 at once, no drain timeout waited for
    assert code == 3, err
    assert "rank 1 (pid " in err and "failed with exit code 3" in err
    # The lost subreaper is said once, naming the errno; the tracking fallback is not.
    assert err.count(SUBREAPER_NOTICE) == 1, err
    assert SUBREAPER_NOTICE + " " + errno_name in err
    assert "CLONE_PIDFD" not in err + out
    summary = job.summary()
    assert summary["process_tracking"] == "sigchld"
    assert "CLONE_PIDFD" in summary["process_tracking_fallback"] and errno_name in summary["process_tracking_fallback"]
    assert summary["child_subreaper"] is False
    assert summary["first_failure"] == 1 and summary["stop_reason"] == "rank_failed"
    stopped, failed = summary["ranks"]
    assert failed["exit_code"] == 3 and not failed["terminated_by_launcher"]
    assert stopped["signal"] == 15 and stopped["terminated_by_launcher"] and not stopped["killed_by_launcher"]
    check_complete_logs([r["log"] for r in summary["ranks"]])
    check_last_words(out)
    # The daemons went to init, yet the job's tag found them.
    assert summary["leftover_processes_killed"] == 2
    assert_nothing_survives(job_env[MARKER_VARIABLE], also=job.daemons() + [r["pid"] for r in summary["ranks"]])


def test_api_falls_back_and_still_stops_everything(tmp_path, rank_table, job_env):
    job = RankJob(tmp_path)
    kwargs = {"command": job.command, "log_dir": str(job.log_dir), "rank_table": rank_table(2), "env": job_env,
              "grace_period": 5}
    caller = tmp_path / "caller.py"
    caller.write_text(API_CALLER)
    code, out, err = run(under_filter("EINVAL") + [sys.executable, str(caller), json.dumps(kwargs)], tmp_path)
    assert code == 0, err
    lines = out.splitlines()
    got = json.loads(lines[-1])
    assert got["raised"] and (got["rank"], got["exit_code"]) == (1, 3)
    assert "rank 1" in got["message"] and "exit code 3" in got["message"]
    assert got["tracking"] == "sigchld" and "CLONE_PIDFD" in got["tracking_fallback"]
    assert got["child_subreaper"] is False and got["leftovers"] == 2
    (rank0, status0, stopped0, log0), (rank1, status1, stopped1, log1) = got["ranks"]
    assert status0 == "signal 15 (SIGTERM)" and stopped0
    assert status1 == "exit code 3" and not stopped1
    check_complete_logs([log0, log1])
    assert (out + err).count(SUBREAPER_NOTICE + " EINVAL") == 1, out + err
    assert "CLONE_PIDFD" not in "\n".join(lines[:-1]) + err
    check_last_words(out)
    assert_nothing_survives(job_env[MARKER_VARIABLE], also=job.daemons())


@needs_cli
def test_only_the_pidfd_clone_refused_says_nothing_and_loses_nothing(tmp_path, rank_table, job_env):
    job = RankJob(tmp_path)
    code, out, err = run(cli(job, rank_table(2), job_env, *under_filter("EINVAL", subreaper=False)), tmp_path)
    assert code == 3, err
    assert SUBREAPER_NOTICE not in err and "CLONE_PIDFD" not in err
    summary = job.summary()
    assert summary["process_tracking"] == "sigchld" and "CLONE_PIDFD" in summary["process_tracking_fallback"]
    assert summary["child_subreaper"] is True
    assert summary["leftover_processes_killed"] == 2  # found by ancestry: the subreaper got them back
    check_complete_logs([r["log"] for r in summary["ranks"]])
    assert_nothing_survives(job_env[MARKER_VARIABLE], also=job.daemons())


@needs_cli
def test_a_kernel_that_accepts_both_records_no_fallback(tmp_path, rank_table, job_env, monkeypatch):
    monkeypatch.delenv("DAVINCIRUN_PROCESS_TRACKING", raising=False)
    job = RankJob(tmp_path)
    code, out, err = run(cli(job, rank_table(2), job_env), tmp_path)
    assert code == 3, err
    assert SUBREAPER_NOTICE not in err
    summary = job.summary()
    assert summary["process_tracking"] == "pidfd" and summary["process_tracking_fallback"] is None
    assert summary["child_subreaper"] is True and summary["leftover_processes_killed"] == 2
    assert_nothing_survives(job_env[MARKER_VARIABLE], also=job.daemons())


@needs_cli
def test_forced_pidfd_tracking_names_the_refusal_and_starts_nothing(tmp_path, rank_table, job_env, monkeypatch):
    monkeypatch.setenv("DAVINCIRUN_PROCESS_TRACKING", "pidfd")
    job = RankJob(tmp_path)
    code, out, err = run(cli(job, rank_table(2), job_env, *under_filter("EPERM")), tmp_path)
    assert code == 1, err
    assert "CLONE_PIDFD" in err and "seccomp" in err and "sigchld" in err, err
    assert not (job.state / "daemon.0").exists()  # no rank ran
    assert_nothing_survives(job_env[MARKER_VARIABLE])
