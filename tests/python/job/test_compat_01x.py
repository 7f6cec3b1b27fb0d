"""What davincirunsdk 0.1.x code relies on: the davincirunsdk.notebook.sdk
module and its rank-table helpers, RANK_TABLE_FILE_V_1_0, the exception
types it raised, a work_dir it created, the handle's destroy() and
fmk_processes. Real jobs, real processes."""

import errno
import os
import re
import shutil
import signal
import subprocess
import time

import pytest
from conftest import assert_gone, python_command, write_rank_table

import davincirunsdk
from davincirunsdk import (
    CommandNotExecutableError,
    CommandNotFoundError,
    LaunchConfigError,
    NoRankTableError,
    SpawnError,
    start_and_wait_distributed_train,
    start_distributed_train,
)

SLEEPER = "import time; time.sleep(120)"
# A 0.1 table (ModelArts' /user/config/jobstart_hccl.json): two pods on this host.
V0_TABLE = """{
  "status": "completed", "group_count": "1",
  "group_list": [{"group_name": "demo", "device_count": "3", "instance_count": "2", "instance_list": [
    {"pod_name": "job-demo-0", "server_id": "127.0.0.1", "devices": [{"device_id": "0", "device_ip": "192.0.2.10"}]},
    {"pod_name": "job-demo-1", "server_id": "127.0.0.1", "devices": [
      {"device_id": "1", "device_ip": "192.0.2.11"}, {"device_id": "2", "device_ip": "192.0.2.12"}]}]}]
}"""
TABLE_VARIABLES = ("RANK_TABLE_FILE", "RANK_TABLE_FILE_V_1_0")


@pytest.fixture
def no_table_variables(monkeypatch):
    for name in TABLE_VARIABLES + ("RANK_SIZE", "RANK_START", "MA_CURRENT_HOST_IP"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def remove_exported_table():
    path = os.environ["RANK_TABLE_FILE"]
    os.unlink(path)
    os.rmdir(os.path.dirname(path))


def test_the_sdk_module_has_the_names_0_1_x_documented():
    from davincirunsdk.notebook import sdk

    assert sdk.start_distributed_train is davincirunsdk.start_distributed_train
    assert sdk.wait_distributed_train is davincirunsdk.wait_distributed_train
    assert sdk.start_and_wait_distributed_train is davincirunsdk.start_and_wait_distributed_train
    assert sdk.init_rank_table is davincirunsdk.init_rank_table
    assert sdk.set_random_ms_cache_dir is davincirunsdk.set_random_ms_cache_dir
    assert sorted(sdk.__all__) == sorted([
        "generate_rank_table", "get_rank_table", "init_rank_table", "set_random_ms_cache_dir", "set_rank_env",
        "start_and_wait_distributed_train", "start_distributed_train", "wait_distributed_train"])
    from davincirunsdk.notebook.sdk import generate_rank_table, get_rank_table, set_rank_env  # noqa: F401


def test_generate_set_and_get_rank_table(tmp_path, no_table_variables):
    from davincirunsdk.notebook.sdk import generate_rank_table, get_rank_table, set_rank_env

    assert generate_rank_table() is None  # no variable: nothing to do, as 0.1.x
    with pytest.raises(NoRankTableError, match="RANK_TABLE_FILE is not set: call init_rank_table"):
        get_rank_table()
    with pytest.raises(RuntimeError):  # what 0.1.x raised
        get_rank_table()
    with pytest.raises(TypeError, match="expected a RankTable"):
        set_rank_env(str(tmp_path / "table.json"))

    # A 0.1 table in a directory, as ModelArts provides it, read and converted.
    config = tmp_path / "config"
    config.mkdir()
    (config / "jobstart_hccl.json").write_text(V0_TABLE)
    no_table_variables.setenv("RANK_TABLE_FILE", str(config))
    no_table_variables.setenv("MA_CURRENT_INSTANCE_NAME", "job-demo-1")
    table = generate_rank_table(wait_timeout=0)
    assert (table.format, table.world_size) == ("0.1", 3)
    exported = set_rank_env(table)
    try:
        assert exported == {"RANK_TABLE_FILE": os.environ["RANK_TABLE_FILE"], "RANK_SIZE": "3", "RANK_START": "1",
                            "MA_CURRENT_HOST_IP": "127.0.0.1"}
        assert all(os.environ[name] == value for name, value in exported.items())
        again = get_rank_table()  # the exported 1.0 copy
        assert (again.format, again.world_size) == ("1.0", 3)
    finally:
        remove_exported_table()
    # 0.1.x overwrote MA_CURRENT_HOST_IP with the server_id; a value set is kept now.
    no_table_variables.setenv("MA_CURRENT_HOST_IP", "10.9.9.9")
    try:
        assert set_rank_env(table)["MA_CURRENT_HOST_IP"] == "10.9.9.9"
    finally:
        remove_exported_table()


def test_rank_table_file_v_1_0_wins_over_rank_table_file(tmp_path, rank_table, job_env, no_table_variables):
    """0.1.x's davincirun and init_rank_table read RANK_TABLE_FILE_V_1_0 first."""
    from davincirunsdk import init_rank_table

    four = write_rank_table(tmp_path / "four.json", [0, 1, 2, 3])
    no_table_variables.setenv("RANK_TABLE_FILE", four)
    no_table_variables.setenv("RANK_TABLE_FILE_V_1_0", rank_table(2))
    job = start_distributed_train(["true"], log_dir=str(tmp_path / "log"), env=job_env, output_notebook=False)
    assert job.wait() == 0 and len(job.pids) == 2

    env = init_rank_table(wait_timeout=0)
    try:
        assert env["RANK_SIZE"] == "2"
    finally:
        remove_exported_table()

    no_table_variables.delenv("RANK_TABLE_FILE_V_1_0")
    no_table_variables.setenv("RANK_TABLE_FILE", four)
    job = start_distributed_train(["true"], log_dir=str(tmp_path / "log"), env=job_env, output_notebook=False)
    assert job.wait() == 0 and len(job.pids) == 4


def test_the_cli_reads_rank_table_file_v_1_0_first(tmp_path, rank_table, no_table_variables):
    program = shutil.which("davincirun")
    if program is None:
        pytest.skip("davincirun is not on PATH")
    v1 = rank_table(2)
    env = dict(os.environ, RANK_TABLE_FILE=write_rank_table(tmp_path / "four.json", [0, 1, 2, 3]),
               RANK_TABLE_FILE_V_1_0=v1)
    proc = subprocess.run([program, "--dry-run", "true"], cwd=str(tmp_path), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert ("rank table %s (" % v1) in proc.stdout and "+ WORLD_SIZE=2\n" in proc.stdout, proc.stdout


def test_the_ranks_environment_where_it_differs_from_0_1_x(tmp_path, rank_table, job_env, monkeypatch):
    """0.1.x set ASCEND_PROCESS_LOG_PATH and, under ModelArts'
    MA_RUN_MODE_ENV, GLOG_* variables naming directories under /tmp/logdir;
    it set RANK_START only through init_rank_table; JOB_ID fell back to the
    host name; the ranks inherited its stdin. Now: the same variables, their
    directories inside the run directory, RANK_START always, JOB_ID
    job-<8 hex digits>, stdin /dev/null."""
    monkeypatch.setenv("MA_RUN_MODE_ENV", "normal")
    for name in ("ASCEND_PROCESS_LOG_PATH", "GLOG_v", "GLOG_log_dir", "RANK_START", "BATCH_JOB_ID", "MA_VJ_NAME",
                 "JOB_ID"):
        monkeypatch.delenv(name, raising=False)
    code = ("import os\nfor n in ('ASCEND_PROCESS_LOG_PATH', 'GLOG_v', 'GLOG_log_dir', 'RANK_START', 'JOB_ID'):\n"
            "    print(n, os.environ.get(n))\n"
            "print('stdin', os.path.realpath('/proc/self/fd/0'))\n")
    job = start_distributed_train(python_command(code), log_dir=str(tmp_path / "log"), rank_table=rank_table(1),
                                  env=job_env, output_notebook=False)
    assert job.wait() == 0
    assert re.fullmatch(r"job-[0-9a-f]{8}", job.job_id)
    with open(os.path.join(job.run_dir, "rank_0.device_0.log")) as f:
        assert f.read().split("\n")[:6] == [
            "ASCEND_PROCESS_LOG_PATH " + os.path.join(job.run_dir, "ascend", "process_log", "rank_0"), "GLOG_v 1",
            "GLOG_log_dir " + os.path.join(job.run_dir, "mindspore", "log"), "RANK_START 0", "JOB_ID " + job.job_id,
            "stdin /dev/null"]


def test_no_rank_table_is_also_the_runtime_error_0_1_x_raised(tmp_path, job_env, no_table_variables):
    with pytest.raises(NoRankTableError) as info:
        start_and_wait_distributed_train(["true"], log_dir=str(tmp_path / "log"), env=job_env)
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, LaunchConfigError)
    assert info.value.option == "rank_table"
    assert "no rank table" in str(info.value)


def test_command_not_found_is_also_a_file_not_found_error(tmp_path, rank_table, job_env):
    with pytest.raises(FileNotFoundError) as info:
        start_and_wait_distributed_train(["davincirun-no-such-program-xyz"], log_dir=str(tmp_path / "log"),
                                         rank_table=rank_table(2), env=job_env)
    error = info.value
    assert isinstance(error, CommandNotFoundError) and isinstance(error, SpawnError)
    assert (error.errno, error.os_errno, error.exit_code) == (errno.ENOENT, errno.ENOENT, 127)
    # The message stays the launcher's (OSError's own str() would be "[Errno 2] ...").
    assert str(error).startswith("rank 0: ") and "davincirun-no-such-program-xyz" in str(error)


def test_a_command_without_execute_permission_is_also_a_permission_error(tmp_path, rank_table, job_env):
    script = tmp_path / "train.sh"
    script.write_text("echo hi\n")
    script.chmod(0o644)
    with pytest.raises(PermissionError) as info:
        start_and_wait_distributed_train([str(script)], log_dir=str(tmp_path / "log"), rank_table=rank_table(1),
                                         env=job_env)
    error = info.value
    assert isinstance(error, CommandNotExecutableError) and isinstance(error, SpawnError)
    assert (error.errno, error.exit_code) == (errno.EACCES, 126)
    assert str(script) in str(error)


def test_a_missing_work_dir_is_created(tmp_path, rank_table, job_env):
    work = tmp_path / "new" / "work"
    code = "import os; print(os.getcwd())"
    job = start_distributed_train(python_command(code), str(work), str(tmp_path / "log"), rank_table=rank_table(1),
                                  env=job_env, output_notebook=False)
    assert job.wait() == 0
    with open(os.path.join(job.run_dir, "rank_0.device_0.log")) as f:
        assert f.read().strip() == str(work)
    # A start that fails takes back the directories it made.
    other = tmp_path / "other" / "work"
    with pytest.raises(davincirunsdk.RankTableError):
        start_distributed_train(["true"], str(other), str(tmp_path / "log"), rank_table=str(tmp_path / "none.json"),
                                env=job_env, wait_timeout=0)
    assert not (tmp_path / "other").exists()


def test_destroy_and_fmk_processes(tmp_path, rank_table, job_env):
    job = start_distributed_train(python_command(SLEEPER), log_dir=str(tmp_path / "log"), rank_table=rank_table(2),
                                  env=job_env, output_notebook=False, grace_period=1)
    processes = job.fmk_processes
    assert [(p.rank, p.device_id, p.pid) for p in processes] == [(0, 0, job.pids[0]), (1, 1, job.pids[1])]
    assert [p.poll() for p in processes] == [None, None]
    assert job.destroy() == 130  # terminate, then wait; no exception
    assert [p.returncode for p in processes] == [-signal.SIGTERM, -signal.SIGTERM]
    assert_gone(job.pids)
    assert job.destroy() == 130  # over already: nothing more to do

    failing = start_distributed_train(python_command("import sys; sys.exit(3)"), log_dir=str(tmp_path / "log"),
                                      rank_table=rank_table(1), env=job_env, output_notebook=False)
    while failing.poll() is None:
        time.sleep(0.05)
    assert failing.destroy() == 3  # as 0.1.x's destroy(): never raises
    assert failing.fmk_processes[0].poll() == 3


def test_wait_distributed_train_destroy_when_finished_false(tmp_path, rank_table, job_env):
    """0.1.x's pattern wait(destroy_when_finished=False), then destroy()."""
    from davincirunsdk.notebook.sdk import wait_distributed_train

    job = start_distributed_train(python_command("print('ok')"), log_dir=str(tmp_path / "log"),
                                  rank_table=rank_table(1), env=job_env, output_notebook=False)
    with pytest.warns(UserWarning, match="destroy_when_finished=False has no effect"):
        assert wait_distributed_train(job, destroy_when_finished=False) == 0
    assert job.destroy() == 0


def test_output_notebook_default_shows_lines_where_0_1_x_showed_none(tmp_path, rank_table, job_env, capsys):
    """0.1.x's default output_notebook=False tailed nothing into a notebook;
    the default (None) now shows every rank's lines."""
    start_and_wait_distributed_train(python_command("print('hello')"), log_dir=str(tmp_path / "log"),
                                     rank_table=rank_table(1), env=job_env)
    assert "[rank 0] hello" in capsys.readouterr().out
