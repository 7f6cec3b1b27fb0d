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
that none is left, and job_env checks again."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import MARKER_VARIABLE, processes_with_marker
from process_model_support import (
    CALLER_SCRIPT,
    GRACE,
    GROUP_LEAVER,
    Job,
    assert_nothing_survives,
    start_caller,
    stop,
)

from davincirunsdk import DistributedRuntimeError, start_and_wait_distributed_train, start_distributed_train


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
