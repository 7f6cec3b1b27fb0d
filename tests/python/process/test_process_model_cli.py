"""The process model through the `davincirun` command: whatever way a job ends (success, a rank
failure, SIGINT, a SIGKILLed caller, a signal to the supervisor), nothing it started survives;
see test_process_model.py for the promises and the Python API."""

import json
import os
import re
import signal
import subprocess
import time

import pytest
from conftest import MARKER_VARIABLE
from process_model_support import (
    GRACE,
    Job,
    assert_nothing_survives,
    cli_argv,
    needs_cli,
    read_summary,
    run_cli,
    signal_the_cli_supervisor,
    stop,
)


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
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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
    # The job's supervisor process records why the job ended: not a Ctrl-C.
    summary_path = os.path.join(str(job.log_dir), "latest", "summary.json")
    deadline = time.monotonic() + 10
    while not os.path.exists(summary_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    with open(summary_path) as f:
        summary = json.load(f)
    assert (summary["stop_reason"], summary["exit_code"]) == ("launcher_gone", 128 + signal.SIGHUP)


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


def comm():
    """This process's command name, as the kernel keeps it (/proc/self/comm)."""
    with open("/proc/self/comm") as f:
        return f.read().strip()


@needs_cli
def test_cli_sigterm_to_the_supervisor_is_named_and_exits_143(tmp_path, rank_table, job_env, tracking):
    """A platform stopping the job by signalling its supervisor process: every
    rank is stopped, and the outcome names the signal (exit 128 + 15)."""
    job = Job(tmp_path, "sleep", "devnull")
    proc, _, err = signal_the_cli_supervisor(job, rank_table(2), job_env, tmp_path, signal.SIGTERM)
    assert proc.returncode == 128 + signal.SIGTERM, err
    # Ctrl-C at the terminal would now be the first stop request of the user: it kills at once.
    # Which process got it, and from whom: this test's own process, by os.kill().
    me = "its supervisor process got SIGTERM from pid %d" % os.getpid()
    assert ("%s (%s): stopping 2 rank(s) (SIGTERM); SIGKILL in %g s, or at once on Ctrl-C" % (me, comm(), GRACE)) in err
    assert "the job was stopped because %s" % me in err
    summary = read_summary(job)
    assert summary["stop_reason"] == "signaled"
    assert summary["stop_signal_receiver"] == "supervisor"
    assert summary["stop_signal_sender_pid"] == os.getpid()
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
