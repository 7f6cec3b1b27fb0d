"""MindSpore for real (its CPU wheel, scripts/mindspore_env.sh): the
dynamic-cluster launch mode trains examples/mindspore/train_digits.py with a
scheduler and two workers, from a shell and from a notebook kernel; a worker,
the scheduler or the launcher killed mid-training ends the whole job at
once; and rank-table mode, which MindSpore cannot use on the CPU, fails in
seconds with MindSpore's own message and a hint naming dynamic-cluster mode."""

import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest
from conftest import MARKER_VARIABLE, REPO, processes_with_marker
from log_watch import wait_for_text

from davincirunsdk import DistributedRuntimeError, start_and_wait_distributed_train, start_distributed_train

pytestmark = pytest.mark.mindspore

EXAMPLE = os.path.join(REPO, "examples", "mindspore", "train_digits.py")
DAVINCIRUN = shutil.which("davincirun")
needs_cli = pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH (pip install . first)")

# 20 epochs (the example's default) reach 0.9667 on the 360 test samples,
# the same in every run (graph mode on the CPU is deterministic); chance is 0.10.
ACCURACY_THRESHOLD = 0.93
# Long enough never to finish before it is killed; the kill tests end it
# after the second epoch, and job_timeout bounds a test that goes wrong.
ENDLESS = ["--epochs", "5000"]
STOP_BOUND = 1.0  # seconds from a kill to every other member of the job gone


def cli(args, job_env, cwd):
    """argv of davincirun in dynamic-cluster mode, with the test's marker for every member."""
    marker = ["--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE])]
    return [DAVINCIRUN] + marker + ["--launch-mode", "dynamic-cluster"] + list(args)


def members(marker):
    """{pid: (MS_ROLE, RANK_ID)} of the live processes carrying `marker`."""
    found = {}
    for pid in processes_with_marker(marker):
        try:
            with open("/proc/%d/environ" % pid, "rb") as f:
                env = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
        except OSError:
            continue
        found[pid] = (env.get(b"MS_ROLE", b"").decode(), env.get(b"RANK_ID", b"").decode())
    return found


def wait_until_gone(marker, timeout=10.0):
    """Seconds until no process carrying `marker` is left (fails beyond `timeout`)."""
    start = time.monotonic()
    while processes_with_marker(marker):
        assert time.monotonic() - start < timeout, "still alive: %s" % members(marker)
        time.sleep(0.005)
    return time.monotonic() - start


def kill_member(marker, role, rank):
    """SIGKILLs the one member with MS_ROLE `role` and RANK_ID `rank`; returns (pid, time.time() of the kill)."""
    [pid] = [pid for pid, member in members(marker).items() if member == (role, str(rank))]
    os.kill(pid, signal.SIGKILL)
    return pid, time.time()


def read_summary(run_dir):
    with open(os.path.join(run_dir, "summary.json")) as f:
        return json.load(f)


def scheduler_entry(summary):
    [entry] = [r for r in summary["ranks"] if r.get("role") == "scheduler"]
    return entry


def final_lines(text, rank):
    """(accuracy, checksum) a worker printed at its end."""
    accuracy = re.search(r"rank %d final test accuracy: ([0-9.]+) \(360 test samples\)" % rank, text)
    checksum = re.search(r"rank %d parameter checksum: ([0-9a-f]{64})" % rank, text)
    assert accuracy and checksum, text[-3000:]
    return float(accuracy.group(1)), checksum.group(1)


# ---------------------------------------------------------------- training


@pytest.mark.slow
@needs_cli
def test_cli_trains_two_workers_and_a_scheduler_from_a_rank_table(tmp_path, rank_table, job_env, mindspore_python):
    """The shell way: davincirun --launch-mode dynamic-cluster -r TABLE python train_digits.py."""
    started = time.monotonic()
    proc = subprocess.run(
        cli(["-r", rank_table(2), mindspore_python, EXAMPLE, "--save-dir", str(tmp_path)], job_env, tmp_path),
        cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        universal_newlines=True, timeout=300,
    )
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    run_dir = os.path.realpath(str(tmp_path / "log" / "latest"))

    # The scheduler ran the same script, its output in scheduler.log and live as [sched].
    with open(os.path.join(run_dir, "scheduler.log"), errors="replace") as f:
        scheduler_log = f.read()
    assert "MetaServerNode" in scheduler_log  # MindSpore's scheduler side of init()
    sched_lines = [line for line in out.splitlines() if line.startswith("[sched] ")]
    assert sched_lines and any("MetaServerNode" in line for line in sched_lines)
    assert "final test accuracy" not in scheduler_log  # it never trained

    # Both workers trained every epoch, to the same accuracy and the same parameters.
    results = {}
    for rank in range(2):
        with open(os.path.join(run_dir, "rank_%d.device_%d.log" % (rank, rank)), errors="replace") as f:
            log = f.read()
        assert len(re.findall(r"rank %d epoch +\d+/20: loss" % rank, log)) == 20
        assert "[rank %d] rank %d epoch 20/20: loss" % (rank, rank) in out
        # MindSpore's own view of the cluster matches the identity davincirun gave.
        assert "rank %d/2: RANK_ID=%d DEVICE_ID=%d" % (rank, rank, rank) in log
        results[rank] = final_lines(log, rank)
    assert results[0][0] > ACCURACY_THRESHOLD, results
    assert results[0] == results[1]
    import numpy as np

    replicas = [np.load(str(tmp_path / ("params_rank%d.npz" % rank))) for rank in range(2)]
    assert sorted(replicas[0].files) == sorted(replicas[1].files) and len(replicas[0].files) == 4
    for name in replicas[0].files:
        assert np.array_equal(replicas[0][name], replicas[1][name]), name

    summary = read_summary(run_dir)
    sched = scheduler_entry(summary)
    assert (sched["rank"], sched["exit_code"]) == (-1, 0)
    assert sorted(r["rank"] for r in summary["ranks"] if r.get("role") == "rank") == [0, 1]
    print("dynamic-cluster training through the CLI: %.1f s, accuracy %.4f" % (elapsed, results[0][0]))


@pytest.mark.slow
@pytest.mark.notebook
def test_notebook_cell_trains_with_the_scheduler_shown(tmp_path, rank_table, job_env, mindspore_python):
    """The notebook way: a cell of a real kernel calls start_and_wait_distributed_train(...,
    launch_mode="dynamic-cluster"); the kernel imports davincirunsdk from its venv,
    the members run the MindSpore venv's python. One kernel: what is particular
    to MindSpore here is the scheduler member, not the kernel (test_notebook.py
    runs both ipykernel versions)."""
    from notebook_support import KERNEL_NAMES, cell_displays, cell_errors, cell_text, checked_kernel, execute_notebook

    kernel_name = checked_kernel(KERNEL_NAMES[0])
    call = (
        "from davincirunsdk import start_and_wait_distributed_train\n"
        "code = start_and_wait_distributed_train([%r, %r, '--epochs', '10'], rank_table=%r, log_dir=%r, env=%r,\n"
        "                                        launch_mode='dynamic-cluster', output_notebook=True)\n"
        "print('returned', code)" % (mindspore_python, EXAMPLE, rank_table(2), str(tmp_path / "log"), job_env)
    )
    nb = execute_notebook([call], kernel_name, cwd=tmp_path, timeout=300)
    assert cell_errors(nb.cells[0]) == []
    lines = cell_text(nb.cells[0], displays=False, ansi=False).splitlines()
    assert lines[-1] == "returned 0"
    assert any(line.startswith("[sched] ") and "MetaServerNode" in line for line in lines)
    text = "\n".join(lines)
    results = [final_lines(text, rank) for rank in range(2)]
    for rank in range(2):
        assert any(line.startswith("[rank %d] rank %d epoch 10/10: loss" % (rank, rank)) for line in lines)
    assert results[0] == results[1] and results[0][0] > 0.9
    # The status view has the scheduler's row and says so in its headline.
    [view] = cell_displays(nb.cells[0])
    headline = view["text/plain"].splitlines()[0]
    assert "2 rank(s) of 2 and the scheduler" in headline and "first failure" not in headline, headline
    assert processes_with_marker(job_env[MARKER_VARIABLE]) == []


# ---------------------------------------------------------------- failures


def test_worker_killed_stops_the_scheduler_and_the_other_worker(tmp_path, rank_table, job_env, mindspore_python):
    marker = job_env[MARKER_VARIABLE]
    job = start_distributed_train(
        [mindspore_python, EXAMPLE] + ENDLESS, rank_table=rank_table(2), log_dir=str(tmp_path / "log"),
        env=job_env, launch_mode="dynamic-cluster", output_notebook=False, job_timeout=120,
    )
    try:
        wait_for_text(os.path.join(job.run_dir, "rank_1.device_1.log"), "rank 1 epoch  2/")
        assert sorted(members(marker).values()) == [("MS_SCHED", "0"), ("MS_WORKER", "0"), ("MS_WORKER", "1")]
        _, killed_at = kill_member(marker, "MS_WORKER", 1)
        gone_after = wait_until_gone(marker)
        with pytest.raises(DistributedRuntimeError) as info:
            job.wait()
    finally:
        job.terminate()
    assert gone_after < STOP_BOUND
    error = info.value
    assert (error.rank, error.role, error.signal) == (1, "rank", signal.SIGKILL)
    assert "rank 1" in str(error) and "SIGKILL" in str(error)
    # The supervisor's record: the others ended within the bound of the kill.
    summary = read_summary(job.run_dir)
    assert summary["first_failure"] == 1
    others = [r for r in summary["ranks"] if r["rank"] != 1]
    assert len(others) == 2 and scheduler_entry(summary) in others
    assert all(r["terminated_by_launcher"] for r in others), others
    assert max(r["ended"] for r in others) - killed_at < STOP_BOUND, (killed_at, others)
    print("worker SIGKILLed: the rest gone after %.3f s" % gone_after)


@needs_cli
def test_scheduler_killed_stops_the_workers_and_names_the_scheduler(tmp_path, rank_table, job_env, mindspore_python):
    marker = job_env[MARKER_VARIABLE]
    proc = subprocess.Popen(
        cli(["-r", rank_table(2), "--job-timeout", "120", mindspore_python, EXAMPLE] + ENDLESS, job_env, tmp_path),
        cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        universal_newlines=True,
    )
    try:
        wait_for_text(str(tmp_path / "log" / "latest" / "rank_1.device_1.log"), "rank 1 epoch  2/")
        pid, _ = kill_member(marker, "MS_SCHED", 0)
        gone_after = wait_until_gone(marker)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert gone_after < STOP_BOUND
    assert proc.returncode == 128 + signal.SIGKILL, err
    assert "scheduler (pid %d) failed with signal 9 (SIGKILL)" % pid in err, err
    assert "rank 0 (pid" in err and "rank 1 (pid" in err and "stopped by the launcher (SIGTERM)" in err
    summary = read_summary(str(tmp_path / "log" / "latest"))
    assert summary["first_failure"] == "scheduler"
    sched = scheduler_entry(summary)
    assert sched["signal"] == signal.SIGKILL and not sched["killed_by_launcher"]
    workers = [r for r in summary["ranks"] if r.get("role") == "rank"]
    assert len(workers) == 2 and all(r["terminated_by_launcher"] for r in workers)
    assert max(r["ended"] for r in workers) - sched["ended"] < STOP_BOUND
    print("scheduler SIGKILLed: the workers gone after %.3f s" % gone_after)


@needs_cli
def test_launcher_killed_leaves_no_member_of_the_job(tmp_path, rank_table, job_env, mindspore_python):
    marker = job_env[MARKER_VARIABLE]
    proc = subprocess.Popen(
        cli(["-r", rank_table(2), mindspore_python, EXAMPLE] + ENDLESS, job_env, tmp_path),
        cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_text(str(tmp_path / "log" / "latest" / "rank_1.device_1.log"), "rank 1 epoch  2/")
        assert len(members(marker)) == 3
        proc.kill()
        proc.wait()
        gone_after = wait_until_gone(marker)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert gone_after < STOP_BOUND
    print("launcher SIGKILLed: the job gone after %.3f s" % gone_after)


def test_rank_table_mode_on_a_cpu_machine_hints_at_dynamic_cluster(tmp_path, rank_table, job_env, mindspore_python):
    """The default mode gives MindSpore no MS_ROLE: init() on the CPU refuses to
    run (it only knows dynamic clusters there). The job ends in seconds, the
    error quoting MindSpore."""
    started = time.monotonic()
    with pytest.raises(DistributedRuntimeError) as info:
        start_and_wait_distributed_train(
            [mindspore_python, EXAMPLE], rank_table=rank_table(2), log_dir=str(tmp_path / "log"), env=job_env,
            output_notebook=False, job_timeout=120,
        )
    elapsed = time.monotonic() - started
    assert elapsed < 30  # about 5 s here: importing MindSpore, then init() refuses at once
    error = info.value
    assert error.rank in (0, 1) and error.exit_code == 1
    assert "mindspore.communication.init()" in str(error) and "without using 'mpirun'" in str(error)
    # MindSpore's words send the user to mpirun; the report says what works here.
    assert error.hint and "--launch-mode dynamic-cluster" in error.hint
    assert "\nhint: MindSpore reads a rank table only on NPUs" in str(error)
    # No scheduler in this mode: the job is the table's two ranks.
    summary = read_summary(str(tmp_path / "log" / "latest"))
    assert [r["rank"] for r in summary["ranks"]] == [0, 1]
    assert all(r.get("role", "rank") == "rank" for r in summary["ranks"])
