"""The Python API on real processes: success, fail-fast, crashes, interrupts."""

import hashlib
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest
from conftest import assert_gone, python_command

from davincirunsdk import (
    DistributedRuntimeError,
    LaunchConfigError,
    start_and_wait_distributed_train,
    start_distributed_train,
)

# A rank that sleeps far longer than any test may take: only a stop ends it.
SLEEPER = "import time; time.sleep(120)"

# Rank 1 fails with exit code 3 after printing a last word; the others sleep.
RANK1_FAILS = (
    "import os, sys, time\n"
    "if os.environ['RANK_ID'] == '1':\n"
    "    time.sleep(0.5)\n"
    "    print('rank 1 is about to fail', flush=True)\n"
    "    sys.exit(3)\n"
    "time.sleep(120)\n"
)


def test_each_run_gets_a_new_directory_and_latest_points_to_it(tmp_path, rank_table, job_env):
    log_dir = tmp_path / "log"
    runs = []
    for _ in range(2):
        job = start_distributed_train(
            python_command("print('hi')"), log_dir=str(log_dir), rank_table=rank_table(2), env=job_env,
            output_notebook=False,
        )
        assert job.wait() == 0
        runs.append(job.run_dir)
    assert runs[0] != runs[1]
    assert all(os.path.isdir(r) for r in runs)
    assert os.path.realpath(str(log_dir / "latest")) == os.path.realpath(runs[1])


def test_the_supervisor_pid_stays_known_after_the_job_ended(tmp_path, rank_table, job_env):
    # The handle once read it from a job that a short rank had already
    # ended and reaped (-1): DistributedJob.supervisor_pid is read at start.
    job = start_distributed_train(["true"], log_dir=str(tmp_path / "log"), rank_table=rank_table(1), env=job_env,
                                  output_notebook=False)
    assert job.wait() == 0
    assert job.supervisor_pid > 0
    assert job._core.supervisor_pid == job.supervisor_pid  # the core's too, after the end


def test_one_rank_fails_the_others_are_stopped(tmp_path, rank_table, job_env):
    start = time.monotonic()
    job = start_distributed_train(
        python_command(RANK1_FAILS), log_dir=str(tmp_path / "log"), rank_table=rank_table(4), env=job_env,
        output_notebook=False,
    )
    with pytest.raises(DistributedRuntimeError) as info:
        job.wait()
    elapsed = time.monotonic() - start
    error = info.value
    assert isinstance(error, RuntimeError)
    assert (error.rank, error.exit_code, error.signal, error.returncode) == (1, 3, None, 3)
    assert error.log_file == os.path.join(job.run_dir, "rank_1.device_1.log")
    assert "rank 1 is about to fail" in error.log_tail
    message = str(error)
    assert "rank 1" in message and "exit code 3" in message and error.log_file in message
    assert "rank 1 is about to fail" in message
    # The sleepers would take 120 s; fail-fast ends them right away.
    assert elapsed < 30
    others = [r for r in error.result.ranks if r.rank != 1]
    assert all(r.terminated_by_launcher and r.signal == signal.SIGTERM for r in others)
    assert error.result.stop_reason == "rank_failed"
    assert_gone(job.pids)

    import json

    summary_path = os.path.join(job.run_dir, "summary.json")
    assert os.stat(summary_path).st_mode & 0o777 == 0o600
    with open(summary_path) as f:
        summary = json.load(f)
    assert summary["first_failure"] == 1 and summary["exit_code"] == 3 and not summary["success"]
    assert summary["stop_reason"] == "rank_failed" and summary["job_id"] == job.job_id
    assert [r["pid"] for r in summary["ranks"]] == job.pids
    assert summary["ranks"][1]["exit_code"] == 3 and summary["ranks"][1]["signal"] is None
    assert summary["ranks"][0]["signal"] == signal.SIGTERM and summary["ranks"][0]["terminated_by_launcher"]
    assert all(r["ended"] >= r["started"] > 0 for r in summary["ranks"])


def test_raise_exception_false_returns_the_first_failure_code(tmp_path, rank_table, job_env):
    code = start_and_wait_distributed_train(
        python_command(RANK1_FAILS), log_dir=str(tmp_path / "log"), rank_table=rank_table(3), env=job_env,
        output_notebook=False, raise_exception=False,
    )
    assert code == 3


def test_rank_killed_by_sigsegv(tmp_path, rank_table, job_env):
    code = (
        "import os, signal, time\n"
        "if os.environ['RANK_ID'] == '2':\n"
        "    os.kill(os.getpid(), signal.SIGSEGV)\n"
        "time.sleep(120)\n"
    )
    with pytest.raises(DistributedRuntimeError) as info:
        start_and_wait_distributed_train(
            python_command(code), log_dir=str(tmp_path / "log"), rank_table=rank_table(4), env=job_env,
            output_notebook=False,
        )
    error = info.value
    assert (error.rank, error.exit_code, error.signal, error.returncode) == (2, None, 11, 139)
    assert "SIGSEGV" in str(error)


def test_crashing_rank_log_is_byte_identical(tmp_path, rank_table, job_env):
    size = 50 * 1024 * 1024
    code = (
        "import os, random, time\n"
        "if os.environ['RANK_ID'] != '0':\n"
        "    time.sleep(120)\n"
        "data = random.Random(1234).getrandbits(%d * 8).to_bytes(%d, 'little')\n"
        "view = memoryview(data)\n"
        "while view:\n"
        "    view = view[os.write(1, view[:1 << 20]):]\n"
        "os.abort()\n" % (size, size)
    )
    with pytest.raises(DistributedRuntimeError) as info:
        start_and_wait_distributed_train(
            python_command(code), log_dir=str(tmp_path / "log"), rank_table=rank_table(2), env=job_env,
            output_notebook=False,
        )
    error = info.value
    assert error.rank == 0 and error.signal == signal.SIGABRT
    # Random.randbytes() is getrandbits() in this form, and only from 3.9 on.
    expected = hashlib.sha256(random.Random(1234).getrandbits(size * 8).to_bytes(size, "little")).hexdigest()
    with open(error.log_file, "rb") as f:
        written = f.read()
    assert len(written) == size
    assert hashlib.sha256(written).hexdigest() == expected
    assert error.result.ranks[0].output_bytes == size


def test_live_output_is_prefixed_by_rank(tmp_path, rank_table, job_env, capsys):
    code = "import os\nprint('hello from', os.environ['RANK_ID'])\nprint('bye', end='')\n"
    assert start_and_wait_distributed_train(
        python_command(code), log_dir=str(tmp_path / "log"), rank_table=rank_table(3), env=job_env,
        output_notebook=True,
    ) == 0
    out = capsys.readouterr().out.splitlines()
    for rank in range(3):
        assert "[rank %d] hello from %d" % (rank, rank) in out
        assert "[rank %d] bye" % rank in out  # the unterminated last line is shown whole


def _pids_of(run_dir):
    import json

    with open(os.path.join(run_dir, "summary.json")) as f:
        return [rank["pid"] for rank in json.load(f)["ranks"]]


def test_ranks_to_show_limits_live_output_not_the_logs(tmp_path, rank_table, job_env, capsys):
    code = "import os\nprint('hello from', os.environ['RANK_ID'])\n"
    assert start_and_wait_distributed_train(
        python_command(code), log_dir=str(tmp_path / "log"), rank_table=rank_table(3), env=job_env,
        output_notebook=True, ranks_to_show=[1],
    ) == 0
    out = capsys.readouterr().out
    assert "[rank 1] hello from 1" in out
    assert "[rank 0]" not in out and "[rank 2]" not in out
    run_dir = os.path.realpath(str(tmp_path / "log" / "latest"))
    # After the run, the summary as text: every rank, its last line (from its
    # log file, also for the ranks not shown live), and where the logs are.
    summary = out[out.index("davincirun job "):].splitlines()
    assert summary[0].endswith(": 3 rank(s) of 3 on server 127.0.0.1, succeeded in %s" % summary[0].split(" in ")[-1])
    assert [row.split()[:5] + row.split()[-3:] for row in summary[2:5]] == [
        [str(r), str(r), str(pid), "exited", "0", "hello", "from", str(r)] for r, pid in enumerate(_pids_of(run_dir))]
    assert summary[5] == "logs: " + run_dir
    for rank in range(3):
        with open(os.path.join(run_dir, "rank_%d.device_%d.log" % (rank, rank))) as f:
            assert f.read() == "hello from %d\n" % rank


@pytest.mark.parametrize("ranks", [[5], [-1], ["x"]])
def test_ranks_to_show_outside_the_world_is_refused(tmp_path, rank_table, job_env, ranks):
    with pytest.raises(LaunchConfigError, match="ranks_to_show"):
        start_and_wait_distributed_train(["true"], log_dir=str(tmp_path / "log"), rank_table=rank_table(2),
                                         env=job_env, ranks_to_show=ranks)


def test_output_notebook_false_shows_nothing_live(tmp_path, rank_table, job_env, capsys):
    start_and_wait_distributed_train(
        python_command("print('quiet line')"), log_dir=str(tmp_path / "log"), rank_table=rank_table(2),
        env=job_env, output_notebook=False,
    )
    assert "quiet line" not in capsys.readouterr().out


def test_random_cache_dir_is_fresh_and_removed(tmp_path, rank_table, job_env):
    code = (
        "import os\n"
        "path = os.environ['MS_COMPILER_CACHE_PATH']\n"
        "assert os.path.isdir(path) and not os.listdir(path)\n"
        "print('CACHE=' + path)\n"
    )
    job = start_distributed_train(
        python_command(code), log_dir=str(tmp_path / "log"), rank_table=rank_table(2), env=job_env,
        output_notebook=False, random_cache_dir=True,
    )
    assert job.wait() == 0
    with open(os.path.join(job.run_dir, "rank_0.device_0.log")) as f:
        cache = f.read().split("CACHE=")[1].strip()
    assert not os.path.exists(cache)


@pytest.mark.parametrize("ending", ["failure", "terminate", "interrupt"])
def test_random_cache_dir_is_removed_after_a_failure_or_a_stop(tmp_path, rank_table, job_env, ending):
    code = (
        "import os, sys, time\n"
        "path = os.environ['MS_COMPILER_CACHE_PATH']\n"
        "print('CACHE=' + path, flush=True)\n"
        "open(os.path.join(path, 'kernel_meta_' + os.environ['RANK_ID']), 'w').write('compiled')\n"
        "if os.environ['RANK_ID'] == '1' and %r == 'failure':\n"
        "    while not os.path.exists(os.path.join(path, 'kernel_meta_0')): time.sleep(0.01)\n"
        "    sys.exit(4)  # after rank 0 has printed\n"
        "time.sleep(60)\n" % ending
    )
    job = start_distributed_train(
        python_command(code), log_dir=str(tmp_path / "log"), rank_table=rank_table(2), env=job_env,
        output_notebook=False, random_cache_dir=True,
    )
    log = os.path.join(job.run_dir, "rank_0.device_0.log")
    deadline = time.monotonic() + 20
    while "CACHE=" not in (open(log).read() if os.path.exists(log) else "") and time.monotonic() < deadline:
        time.sleep(0.05)
    cache = open(log).read().split("CACHE=")[1].split()[0]
    if ending == "terminate":
        while not os.path.isfile(os.path.join(cache, "kernel_meta_0")) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert os.path.isfile(os.path.join(cache, "kernel_meta_0"))  # the ranks used it
        job.terminate()
        assert job.wait() == 130
    elif ending == "interrupt":
        timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            job.wait()
        timer.join()
    else:
        with pytest.raises(DistributedRuntimeError):
            job.wait()
    assert not os.path.exists(cache)


def test_ctrl_c_stops_every_rank_then_raises_keyboard_interrupt(tmp_path, rank_table, job_env):
    job = start_distributed_train(
        python_command(SLEEPER), log_dir=str(tmp_path / "log"), rank_table=rank_table(4), env=job_env,
        output_notebook=False,
    )
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        job.wait()
    timer.join()
    assert time.monotonic() - start < 30
    assert_gone(job.pids)
    assert job.poll() == 130


def test_terminate_stops_the_job(tmp_path, rank_table, job_env):
    job = start_distributed_train(
        python_command(SLEEPER), log_dir=str(tmp_path / "log"), rank_table=rank_table(2), env=job_env,
        output_notebook=False,
    )
    assert job.poll() is None
    job.terminate()
    assert job.wait() == 130  # a stop the caller asked for is not a failure
    assert_gone(job.pids)
    assert all(r.terminated_by_launcher and r.signal == signal.SIGTERM for r in job.result.ranks)


def test_a_failing_display_never_harms_the_job(tmp_path, rank_table, job_env, monkeypatch):
    class BrokenStdout:
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            pass

    monkeypatch.setattr("sys.stdout", BrokenStdout())
    code = "import os\nfor i in range(20000):\n    print('line', i)\n"
    job = start_distributed_train(
        python_command(code), log_dir=str(tmp_path / "log"), rank_table=rank_table(2), env=job_env,
        output_notebook=True,
    )
    assert job.wait() == 0
    for rank in range(2):
        with open(os.path.join(job.run_dir, "rank_%d.device_%d.log" % (rank, rank))) as f:
            assert f.read().count("\n") == 20000


def test_host_ignoring_sigchld_still_gets_every_exit_status(tmp_path, rank_table, job_env):
    """The ranks are children of the job's supervisor process, so a caller
    that ignores SIGCHLD (auto-reaping its own children) loses nothing."""
    old = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        script = "import os, sys; sys.exit(3 if os.environ['RANK_ID'] == '1' else 0)"
        with pytest.raises(DistributedRuntimeError) as info:
            start_and_wait_distributed_train([sys.executable, "-c", script], log_dir=str(tmp_path / "log"),
                                             rank_table=rank_table(2), env=job_env)
    finally:
        signal.signal(signal.SIGCHLD, old)
    assert info.value.rank == 1
    assert info.value.exit_code == 3


def test_job_timeout_stops_every_rank(tmp_path, rank_table, job_env):
    start = time.monotonic()
    with pytest.raises(DistributedRuntimeError, match="timeout") as info:
        start_and_wait_distributed_train(
            python_command(SLEEPER), log_dir=str(tmp_path / "log"), rank_table=rank_table(2), env=job_env,
            output_notebook=False, job_timeout=0.5,
        )
    assert time.monotonic() - start < 30
    result = info.value.result
    assert result.stop_reason == "timed_out" and result.exit_code == 124
    assert_gone([r.pid for r in result.ranks])


def test_ranks_outlive_the_starting_thread_but_not_the_process(tmp_path, rank_table, job_env):
    """Ranks are tied to the job's own thread, not to the Python thread that
    started it; a Python process killed outright takes its ranks with it."""
    from conftest import MARKER_VARIABLE, processes_with_marker

    script = (
        "import sys, threading, time\n"
        "from davincirunsdk import start_distributed_train\n"
        "jobs = []\n"
        "t = threading.Thread(target=lambda: jobs.append(start_distributed_train(\n"
        "    [sys.executable, '-c', 'import time; time.sleep(120)'], log_dir=sys.argv[1], rank_table=sys.argv[2],\n"
        "    env={%r: sys.argv[3]}, output_notebook=False)))\n"
        "t.start(); t.join()\n"
        "print('started', flush=True)\n"
        "time.sleep(120)\n" % MARKER_VARIABLE
    )
    marker = job_env[MARKER_VARIABLE]
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "log"), rank_table(2), marker],
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout.readline().strip() == "started"
        time.sleep(0.5)  # the starting thread is gone; the ranks must still run
        assert len(processes_with_marker(marker)) == 2
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 10
    while processes_with_marker(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with_marker(marker) == []


def test_the_callers_own_state_is_left_alone(tmp_path, rank_table, job_env):
    """The launch functions never change the caller's working directory or
    os.environ, never make it a child subreaper, never install a SIGCHLD
    handler, and never reap a child the caller started itself."""
    import ctypes

    def subreaper():
        value = ctypes.c_int(-1)
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.prctl(37, ctypes.byref(value), 0, 0, 0) == 0  # PR_GET_CHILD_SUBREAPER
        return value.value

    own_child = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(7)"])
    cwd, environ = os.getcwd(), dict(os.environ)
    handler = signal.getsignal(signal.SIGCHLD)
    start_and_wait_distributed_train(
        python_command("print('ok')"), work_dir=str(tmp_path), log_dir=str(tmp_path / "log"),
        rank_table=rank_table(2), env=job_env, output_notebook=False, random_cache_dir=True,
    )
    assert os.getcwd() == cwd
    assert dict(os.environ) == environ
    assert signal.getsignal(signal.SIGCHLD) == handler
    assert subreaper() == 0
    assert own_child.wait(timeout=30) == 7  # still ours to reap, with its status


def test_summary_records_every_rank(tmp_path, rank_table, job_env):
    """summary.json, for tools that read a finished run: per rank its local
    rank, physical and logical device, pid, log file, exit and output size."""
    import json

    done = tmp_path / "rank0-printed"
    code = ("import os, sys, time\nprint('x' * 99, flush=True)\nrank = int(os.environ['RANK_ID'])\n"
            "if rank == 0: open(%r, 'w').close()\n"
            "while rank == 1 and not os.path.exists(%r): time.sleep(0.01)\n"  # fail after rank 0 has ended
            "sys.exit(rank)\n" % (str(done), str(done)))
    job = start_distributed_train(
        python_command(code), log_dir=str(tmp_path / "log"), rank_table=rank_table(device_ids=[6, 2]),
        env=job_env, output_notebook=False,
    )
    assert job.wait(raise_exception=False) == 1
    with open(os.path.join(job.run_dir, "summary.json")) as f:
        summary = json.load(f)
    assert summary["job_id"] == job.job_id and summary["world_size"] == 2
    assert summary["command"] == python_command(code)
    assert summary["first_failure"] == 1 and summary["exit_code"] == 1 and not summary["success"]
    by_rank = {r["rank"]: r for r in summary["ranks"]}
    # Rank 0 runs on physical device 6, rank 1 on 2; logical ids follow the sorted physical ids.
    assert [(by_rank[r]["physical_device_id"], by_rank[r]["logical_device_id"]) for r in (0, 1)] == [(6, 1), (2, 0)]
    for rank, pid in enumerate(job.pids):
        entry = by_rank[rank]
        assert entry["pid"] == pid and entry["local_rank"] == rank
        assert entry["log"] == os.path.join(job.run_dir, "rank_%d.device_%d.log" % (rank, (6, 2)[rank]))
        assert entry["output_bytes"] == 100 and entry["log_error"] is None
        assert entry["started"] <= entry["ended"]
    assert by_rank[0]["exit_code"] == 0 or by_rank[0]["terminated_by_launcher"]
    assert by_rank[1]["exit_code"] == 1 and by_rank[1]["signal"] is None
