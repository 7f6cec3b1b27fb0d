"""MindSpore's dynamic-cluster launch mode on real processes, with small
scripts in the roles MindSpore gives them (tests/python/frameworks/test_mindspore.py
trains with MindSpore itself): the scheduler is a member of the job, the
variables each role gets, ports, and the plans made without a rank table."""

import json
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest
from conftest import MARKER_VARIABLE, assert_gone, python_command

from davincirunsdk import (
    DistributedRuntimeError,
    LaunchConfigError,
    OptionTypeError,
    start_and_wait_distributed_train,
    start_distributed_train,
)

DAVINCIRUN = shutil.which("davincirun")

# Each process prints its role's variables as JSON, then acts by role.
ROLE_SCRIPT = (
    "import json, os, sys, time\n"
    "names = ['MS_ROLE', 'MS_NODE_ID', 'MS_SCHED_HOST', 'MS_SCHED_PORT', 'MS_WORKER_NUM', 'RANK_ID',\n"
    "         'RANK_SIZE', 'DEVICE_ID', 'RANK', 'MASTER_PORT', 'JOB_ID', 'ASCEND_PROCESS_LOG_PATH']\n"
    "seen = {n: os.environ.get(n) for n in names}\n"
    "seen['plog_dir_made'] = os.path.isdir(os.environ.get('ASCEND_PROCESS_LOG_PATH', ''))\n"
    "print('VARS ' + json.dumps(seen), flush=True)\n"
    "role = 'SCHED' if os.environ.get('MS_ROLE') == 'MS_SCHED' else os.environ['RANK_ID']\n"
    "action = os.environ.get('ACTION_' + role)\n"
    "if action == 'fail':\n"
    "    time.sleep(0.3)\n"
    "    print('about to fail', flush=True)\n"
    "    sys.exit(7)\n"
    "if action == 'sleep':\n"
    "    time.sleep(120)\n"
)


def variables(run_dir):
    """{log file name: the VARS its process printed}."""
    out = {}
    for name in os.listdir(run_dir):
        if name.endswith(".log"):
            with open(os.path.join(run_dir, name)) as f:
                for line in f:
                    if line.startswith("VARS "):
                        out[name] = json.loads(line[5:])
    return out


def test_workers_and_the_scheduler_get_their_roles(tmp_path, rank_table, job_env):
    job = start_distributed_train(python_command(ROLE_SCRIPT), log_dir=str(tmp_path / "log"), rank_table=rank_table(2),
                                  env=job_env, output_notebook=False, launch_mode="dynamic-cluster")
    assert job.wait() == 0
    seen = variables(job.run_dir)
    assert sorted(seen) == ["rank_0.device_0.log", "rank_1.device_1.log", "scheduler.log"]
    sched = seen["scheduler.log"]
    port = sched["MS_SCHED_PORT"]
    assert sched["MS_ROLE"] == "MS_SCHED" and sched["RANK_ID"] == "0" and sched["RANK_SIZE"] == "2"
    assert sched["MS_WORKER_NUM"] == "2" and sched["MS_SCHED_HOST"] == "127.0.0.1"
    assert sched["DEVICE_ID"] is None and sched["RANK"] is None and sched["MS_NODE_ID"] is None
    # CANN's plog files of each process land in the run directory, the scheduler's apart.
    assert sched["ASCEND_PROCESS_LOG_PATH"] == os.path.join(job.run_dir, "ascend", "process_log", "scheduler")
    assert not sched["plog_dir_made"]  # named, not made: CANN makes its log directory itself
    for rank in (0, 1):
        worker = seen["rank_%d.device_%d.log" % (rank, rank)]
        assert worker["MS_ROLE"] == "MS_WORKER"
        assert worker["MS_NODE_ID"] == worker["RANK_ID"] == str(rank)
        assert worker["MS_SCHED_PORT"] == port and worker["MS_WORKER_NUM"] == "2"
        assert worker["JOB_ID"] == sched["JOB_ID"] == job.job_id
    with open(os.path.join(job.run_dir, "summary.json")) as f:
        summary = json.load(f)
    roles = [(r["role"], r["rank"]) for r in summary["ranks"]]
    assert roles == [("rank", 0), ("rank", 1), ("scheduler", -1)]


def test_a_scheduler_failing_alone_fails_the_job(tmp_path, rank_table, job_env):
    """With numpy 2 and MindSpore 2.10 the scheduler's exit status was the
    only sign of trouble: every worker exited 0."""
    env = dict(job_env, ACTION_SCHED="fail")
    with pytest.raises(DistributedRuntimeError) as info:
        start_and_wait_distributed_train(python_command(ROLE_SCRIPT), log_dir=str(tmp_path / "log"),
                                         rank_table=rank_table(2), env=env, output_notebook=False,
                                         launch_mode="dynamic-cluster", random_cache_dir=False)
    error = info.value
    assert (error.role, error.rank, error.exit_code) == ("scheduler", -1, 7)
    assert str(error).startswith("distributed training failed: scheduler (pid ")
    assert "exit code 7" in str(error) and "about to fail" in str(error)
    assert error.log_file.endswith("/scheduler.log")


def test_a_failed_worker_stops_the_scheduler_at_once(tmp_path, rank_table, job_env):
    env = dict(job_env, ACTION_SCHED="sleep", ACTION_0="sleep", ACTION_1="fail")
    job = start_distributed_train(python_command(ROLE_SCRIPT), log_dir=str(tmp_path / "log"), rank_table=rank_table(2),
                                  env=env, output_notebook=False, launch_mode="dynamic-cluster")
    with pytest.raises(DistributedRuntimeError) as info:
        job.wait()
    result = info.value.result
    failed = result.ranks[result.first_failure]
    assert (failed.role, failed.rank) == ("rank", 1)
    scheduler = [r for r in result.ranks if r.role == "scheduler"][0]
    assert scheduler.terminated_by_launcher and scheduler.signal == signal.SIGTERM
    assert scheduler.ended - failed.ended < 1.0
    assert_gone(job.pids)


def test_a_killed_scheduler_stops_the_workers_at_once(tmp_path, rank_table, job_env):
    env = dict(job_env, ACTION_SCHED="sleep", ACTION_0="sleep", ACTION_1="sleep")
    job = start_distributed_train(python_command(ROLE_SCRIPT), log_dir=str(tmp_path / "log"), rank_table=rank_table(2),
                                  env=env, output_notebook=False, launch_mode="dynamic-cluster")
    scheduler_pid = job.pids[-1]
    time.sleep(0.5)
    os.kill(scheduler_pid, signal.SIGKILL)
    with pytest.raises(DistributedRuntimeError) as info:
        job.wait()
    error = info.value
    assert (error.role, error.signal) == ("scheduler", signal.SIGKILL)
    workers = [r for r in error.result.ranks if r.role == "rank"]
    assert all(w.terminated_by_launcher and w.ended - error.result.ranks[-1].ended < 1.0 for w in workers)
    assert_gone(job.pids)


@pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH")
def test_the_cli_labels_the_scheduler_and_names_it_in_the_report(tmp_path, rank_table, job_env):
    env = dict(os.environ, ACTION_SCHED="fail")
    proc = subprocess.run(
        [DAVINCIRUN, "--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE]), "--launch-mode",
         "dynamic-cluster", "-r", rank_table(2)] + python_command(ROLE_SCRIPT),
        cwd=str(tmp_path), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, timeout=60)
    assert proc.returncode == 7, proc.stderr
    assert "[sched] about to fail\n" in proc.stdout
    assert "[rank 0] VARS " in proc.stdout and "[sched] VARS " in proc.stdout
    assert "2 rank(s) and MindSpore's scheduler on server" in proc.stderr
    assert "scheduler (pid " in proc.stderr and "failed with exit code 7" in proc.stderr


def test_a_port_the_user_sets_wins_and_a_taken_one_is_refused(tmp_path, rank_table, job_env):
    holder = socket.socket()
    holder.bind(("0.0.0.0", 0))
    holder.listen(1)
    taken = holder.getsockname()[1]
    try:
        for variable, mode in (("MS_SCHED_PORT", "dynamic-cluster"), ("MASTER_PORT", "rank-table")):
            with pytest.raises(LaunchConfigError) as info:
                start_distributed_train(python_command("pass"), log_dir=str(tmp_path / "log"),
                                        rank_table=rank_table(1), env=dict(job_env, **{variable: str(taken)}),
                                        output_notebook=False, launch_mode=mode)
            assert "%s %d is already in use on this machine" % (variable, taken) in str(info.value)
        assert not (tmp_path / "log").exists()  # nothing was started or created
    finally:
        holder.close()
    free = socket.socket()
    free.bind(("0.0.0.0", 0))
    port = free.getsockname()[1]
    free.close()
    job = start_distributed_train(python_command(ROLE_SCRIPT), log_dir=str(tmp_path / "log"), rank_table=rank_table(1),
                                  env=dict(job_env, MS_SCHED_PORT=str(port)), output_notebook=False,
                                  launch_mode="dynamic-cluster")
    assert job.wait() == 0
    assert {v["MS_SCHED_PORT"] for v in variables(job.run_dir).values()} == {str(port)}


def test_nproc_and_devices_plan_without_a_table(tmp_path, job_env, monkeypatch):
    monkeypatch.delenv("RANK_TABLE_FILE", raising=False)
    monkeypatch.delenv("RANK_TABLE_FILE_V_1_0", raising=False)
    job = start_distributed_train(python_command(ROLE_SCRIPT), log_dir=str(tmp_path / "log"), env=job_env,
                                  output_notebook=False, nproc=2, devices=[5, 3])
    assert job.wait() == 0
    with open(os.path.join(job.run_dir, "rank_table.json")) as f:
        table = json.load(f)
    devices = table["server_list"][0]["device"]
    assert [(d["device_id"], d["rank_id"]) for d in devices] == [("5", "0"), ("3", "1")]
    assert sorted(variables(job.run_dir)) == ["rank_0.device_5.log", "rank_1.device_3.log"]


def test_devices_narrow_a_one_server_table(tmp_path, rank_table, job_env):
    job = start_distributed_train(python_command(ROLE_SCRIPT), log_dir=str(tmp_path / "log"), rank_table=rank_table(4),
                                  env=job_env, output_notebook=False, devices=[3, 1], launch_mode="dynamic-cluster")
    assert job.wait() == 0
    seen = variables(job.run_dir)
    assert sorted(seen) == ["rank_0.device_1.log", "rank_1.device_3.log", "scheduler.log"]
    assert seen["scheduler.log"]["MS_WORKER_NUM"] == "2" and seen["rank_1.device_3.log"]["RANK_SIZE"] == "2"


@pytest.mark.parametrize("keywords, error, words", [
    ({"launch_mode": "msrun"}, LaunchConfigError,
     "launch_mode must be rank-table, dynamic-cluster, tf-config or cm, got 'msrun'"),
    ({"launch_mode": 1}, OptionTypeError, "launch_mode: expected"),
    ({"nproc": "2"}, OptionTypeError, "nproc: expected a number of ranks"),
    ({"nproc": 0}, LaunchConfigError, "nproc must be a number of ranks between 1 and 1024, got 0"),
    ({"devices": "0,1"}, OptionTypeError, "devices: expected a device id or a list of device ids"),
    ({"devices": [9]}, LaunchConfigError, "device 9 is not in the rank table"),
], ids=["mode", "mode-type", "nproc-type", "nproc-range", "devices-type", "devices-unknown"])
def test_bad_launch_mode_nproc_and_devices_start_nothing(tmp_path, rank_table, job_env, keywords, error, words):
    with pytest.raises(error) as info:
        start_distributed_train(python_command("pass"), log_dir=str(tmp_path / "log"), rank_table=rank_table(2),
                                env=job_env, output_notebook=False, **keywords)
    assert words in str(info.value)
    assert not (tmp_path / "log").exists()
