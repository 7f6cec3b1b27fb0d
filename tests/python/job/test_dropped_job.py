"""A job whose handle is dropped keeps running, as in davincirunsdk 0.1.x,
until it ends or the calling process exits; then it is stopped with SIGTERM
and the grace period. running_jobs() finds it again, and a second start on
its devices names it."""

import gc
import json
import os
import signal
import subprocess
import sys
import time
import warnings

import pytest
from conftest import assert_gone, python_command

import davincirunsdk
from davincirunsdk import DeviceBusyError, running_jobs, start_distributed_train

# Each rank writes <dir>/ready.<rank> once it runs, then sleeps. On SIGTERM,
# rank 0 says so and exits 0; rank 1 ignores it (the grace period ends it).
RANK = """\
import os, signal, sys, time
ready_dir = sys.argv[1]
rank = os.environ['RANK_ID']
def on_term(signum, frame):
    print('rank', rank, 'got SIGTERM', flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term if rank == '0' else signal.SIG_IGN)
with open(os.path.join(ready_dir, 'ready.' + rank + '.tmp'), 'w') as f:
    f.write(str(os.getpid()))
os.rename(os.path.join(ready_dir, 'ready.' + rank + '.tmp'), os.path.join(ready_dir, 'ready.' + rank))
print('rank', rank, 'ready', flush=True)
time.sleep(120)
"""


def wait_ready(ready_dir, ranks, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(os.path.exists(os.path.join(str(ready_dir), "ready.%d" % r)) for r in range(ranks)):
            return
        time.sleep(0.05)
    raise AssertionError("the ranks did not start")


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def start(tmp_path, rank_table, job_env, **kwargs):
    ready = tmp_path / "ready"
    ready.mkdir(exist_ok=True)
    return start_distributed_train(
        python_command(RANK) + [str(ready)], log_dir=str(tmp_path / "log"), rank_table=rank_table(2),
        env=job_env, output_notebook=False, grace_period=1, **kwargs
    ), ready


def test_a_dropped_handle_leaves_the_job_running_and_running_jobs_finds_it(tmp_path, rank_table, job_env):
    job, ready = start(tmp_path, rank_table, job_env, random_cache_dir=True)
    job_id, pids, cache = job.job_id, job.pids, job._cache_dir
    wait_ready(ready, 2)
    with pytest.warns(RuntimeWarning, match="job %s keeps running though its handle was dropped" % job_id) as info:
        del job
        gc.collect()
    # gc.collect() may also collect a handle an earlier test dropped: that
    # job's warning is its own.
    mine = [str(w.message) for w in info if job_id in str(w.message)]
    assert len(mine) == 1, [str(w.message) for w in info]
    time.sleep(0.5)  # the old behaviour killed the ranks within 0.1 s
    assert all(alive(pid) for pid in pids)
    again = [j for j in running_jobs() if j.job_id == job_id]
    assert len(again) == 1 and again[0].pids == pids
    # The handle found again works as before: stop, wait, clean up.
    assert again[0].destroy() == 130
    assert_gone(pids)
    assert not os.path.exists(cache)
    assert job_id not in [j.job_id for j in running_jobs()]


def test_the_warning_comes_once_per_job(tmp_path, rank_table, job_env):
    job, ready = start(tmp_path, rank_table, job_env)
    job_id = job.job_id
    with pytest.warns(RuntimeWarning):
        del job
        gc.collect()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = [j for j in running_jobs() if j.job_id == job_id][0]
        del again
        gc.collect()
    assert [str(w.message) for w in caught] == []
    job = [j for j in running_jobs() if j.job_id == job_id][0]
    job.terminate()
    job.wait()


def test_a_second_start_on_its_devices_names_the_dropped_job(tmp_path, rank_table, job_env):
    job, ready = start(tmp_path, rank_table, job_env)
    job_id = job.job_id
    with pytest.warns(RuntimeWarning):
        del job
        gc.collect()
    with pytest.raises(DeviceBusyError) as info:
        start_distributed_train(["true"], log_dir=str(tmp_path / "log2"), rank_table=rank_table(2), env=job_env,
                                output_notebook=False)
    message = str(info.value)
    assert "that is job %s, started by this process" % job_id in message
    assert "davincirunsdk.running_jobs() returns it" in message
    [job] = [j for j in davincirunsdk.running_jobs() if j.job_id == job_id]
    job.destroy()


def test_exiting_stops_a_dropped_job_with_sigterm_and_the_grace_period(tmp_path, rank_table, job_env):
    """A script drops the handle, checks the ranks still run, then ends
    normally: before the interpreter exits, rank 0 gets SIGTERM (and exits
    0), rank 1 ignores it and is killed at the end of the 1 s grace period."""
    ready = tmp_path / "ready"
    ready.mkdir()
    script = (
        "import gc, os, sys, time\n"
        "from davincirunsdk import start_distributed_train\n"
        "job = start_distributed_train([sys.executable, '-c', %r, %r], rank_table=%r, log_dir=%r, env=%r,\n"
        "                              output_notebook=False, grace_period=1)\n"
        "pids = job.pids\n"
        "print(job.run_dir, *pids, flush=True)\n"
        "while len([n for n in os.listdir(%r) if not n.endswith('.tmp')]) < 2:\n"
        "    time.sleep(0.05)\n"
        "del job\n"
        "gc.collect()\n"
        "time.sleep(0.5)\n"
        "print('running' if all(os.path.exists('/proc/%%d' %% p) for p in pids) else 'gone', flush=True)\n"
    ) % (RANK, str(ready), rank_table(2), str(tmp_path / "log"), job_env, str(ready))
    run = subprocess.run([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    first, state = run.stdout.splitlines()
    run_dir, *pids = first.split()
    assert state == "running"  # after the drop, until the script ended
    assert "keeps running though its handle was dropped" in run.stderr
    assert "this process is exiting: stopping job" in run.stderr and "SIGKILL after 1 s" in run.stderr
    assert_gone([int(p) for p in pids])
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    assert summary["stop_reason"] == "requested"
    rank0, rank1 = summary["ranks"]
    assert rank0["exit_code"] == 0 and rank1["signal"] == signal.SIGKILL
    with open(os.path.join(run_dir, "rank_0.device_0.log")) as f:
        assert "rank 0 got SIGTERM" in f.read()
