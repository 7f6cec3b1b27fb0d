"""The Python API's configuration side: bad arguments and tables start nothing, the table the
ranks read, identity and pods, the 0.1.x helpers."""

import os
import signal
import sys
import threading
import time

import pytest
from conftest import assert_gone, python_command

import davincirunsdk
from davincirunsdk import (
    LaunchConfigError,
    RankTableError,
    SpawnError,
    start_and_wait_distributed_train,
    start_distributed_train,
)

ENV_NAMES = [
    "RANK_TABLE_FILE", "RANK_ID", "RANK_SIZE", "RANK_START", "DEVICE_ID", "ASCEND_DEVICE_ID", "JOB_ID",
    "HCCL_CONNECT_TIMEOUT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
    "MASTER_PORT", "PYTHONUNBUFFERED", "MS_COMPILER_CACHE_PATH", "MA_CURRENT_HOST_IP", "MS_ROLE",
]
PRINT_ENV = "import os\nfor n in %r:\n    print(n + '=' + os.environ.get(n, '<unset>'))\n" % (ENV_NAMES,)


def read_env_log(path):
    with open(path) as f:
        return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)


V0_TWO_PODS_ONE_HOST = """{
  "status": "completed", "group_count": "1",
  "group_list": [{"group_name": "demo", "device_count": "4", "instance_count": "2", "instance_list": [
    {"pod_name": "job-demo-1", "server_id": "127.0.0.1", "devices": [
      {"device_id": "2", "device_ip": "192.0.2.12"}, {"device_id": "3", "device_ip": "192.0.2.13"}]},
    {"pod_name": "job-demo-0", "server_id": "127.0.0.1", "devices": [
      {"device_id": "0", "device_ip": "192.0.2.10"}, {"device_id": "1", "device_ip": "192.0.2.11"}]}]}]
}"""


def test_success_sets_rank_environment_and_logs(tmp_path, rank_table, job_env, monkeypatch):
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    table = rank_table(4)
    job = start_distributed_train(
        python_command(PRINT_ENV), log_dir=str(tmp_path / "log"), rank_table=table, env=job_env,
        output_notebook=False,
    )
    assert job.wait() == 0
    logs = sorted(name for name in os.listdir(job.run_dir) if name.endswith(".log"))
    assert logs == ["rank_%d.device_%d.log" % (r, r) for r in range(4)]
    envs = [read_env_log(os.path.join(job.run_dir, name)) for name in logs]
    for rank, env in enumerate(envs):
        assert env["RANK_ID"] == env["RANK"] == env["LOCAL_RANK"] == str(rank)
        assert env["DEVICE_ID"] == env["ASCEND_DEVICE_ID"] == str(rank)
        assert env["RANK_SIZE"] == env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == "4"
        assert env["RANK_START"] == "0"
        # A normalized copy the job owns, in its run directory.
        assert env["RANK_TABLE_FILE"] == os.path.join(job.run_dir, "rank_table.json")
        assert env["MASTER_ADDR"] == "127.0.0.1"
        assert 0 < int(env["MASTER_PORT"]) < 65536
        assert env["HCCL_CONNECT_TIMEOUT"] == "1800"
        # Nobody watches (output_notebook=False): Python keeps its buffer.
        assert env["PYTHONUNBUFFERED"] == "<unset>"
        assert env["JOB_ID"] == job.job_id
        assert env["MS_COMPILER_CACHE_PATH"] == "<unset>"  # random_cache_dir is off here
        assert env["MA_CURRENT_HOST_IP"] == "127.0.0.1"  # the table's server_id
    assert len({e["MASTER_PORT"] for e in envs}) == 1
    assert_gone(job.pids)


def test_inherited_environment_and_defaults(tmp_path, rank_table, job_env, monkeypatch):
    monkeypatch.setenv("HCCL_CONNECT_TIMEOUT", "600")
    monkeypatch.setenv("RANK", "7")  # e.g. a Kubernetes pod's rank: must be overwritten
    monkeypatch.setenv("LOCAL_RANK", "{0,1,2,3}")
    monkeypatch.setenv("MASTER_PORT", "29123")
    monkeypatch.setenv("MS_ROLE", "MS_WORKER")  # left by a platform launcher: must not reach the ranks
    env = dict(job_env, RANK_SIZE="99", EXTRA_VAR="from-env")
    with pytest.warns(UserWarning, match="RANK_SIZE has no effect"):
        job = start_distributed_train(
            python_command(PRINT_ENV + "print('EXTRA_VAR=' + os.environ['EXTRA_VAR'])"),
            log_dir=str(tmp_path / "log"), rank_table=rank_table(2), env=env, output_notebook=False,
        )
    assert job.wait() == 0
    for rank in range(2):
        got = read_env_log(os.path.join(job.run_dir, "rank_%d.device_%d.log" % (rank, rank)))
        assert got["HCCL_CONNECT_TIMEOUT"] == "600"
        assert got["RANK"] == got["LOCAL_RANK"] == str(rank)
        assert got["RANK_SIZE"] == "2"  # identity wins over env=
        assert got["MASTER_PORT"] == "29123"
        assert got["MS_ROLE"] == "<unset>"
        assert got["EXTRA_VAR"] == "from-env"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(grace_period=1e20), "grace_period"),
        (dict(command=[sys.executable, "-c", "print('a\\0b')", "a\0b"]), "NUL"),
        (dict(command="python 'unbalanced"), "cannot split"),
    ],
)
def test_bad_arguments_start_nothing(tmp_path, rank_table, job_env, kwargs, message):
    args = dict(command=["true"], log_dir=str(tmp_path / "log"), rank_table=rank_table(2))
    args.update(kwargs)
    args["env"] = dict(job_env, **args.get("env", {}))
    with pytest.raises((LaunchConfigError, ValueError), match=message):
        start_and_wait_distributed_train(args.pop("command"), **args)
    assert not (tmp_path / "log").exists()


def test_table_still_being_written_is_refused(tmp_path, job_env):
    table = tmp_path / "initializing.json"
    table.write_text('{"version": "1.0", "status": "initializing", "server_list": '
                     '[{"server_id": "127.0.0.1", "device": [{"device_id": "0", "rank_id": "0"}]}]}')
    with pytest.raises(LaunchConfigError, match="initializing"):
        start_and_wait_distributed_train(["true"], log_dir=str(tmp_path / "log"), rank_table=str(table), env=job_env,
                                         wait_timeout=0)
    with pytest.raises(RankTableError, match="timed out after 1 s") as info:
        start_and_wait_distributed_train(["true"], log_dir=str(tmp_path / "log"), rank_table=str(table), env=job_env,
                                         wait_timeout=1)
    assert str(table) in str(info.value)
    assert not (tmp_path / "log").exists()


def test_command_not_found_starts_nothing(tmp_path, rank_table, job_env):
    with pytest.raises(SpawnError) as info:
        start_and_wait_distributed_train(
            ["davincirun-no-such-program-xyz"], log_dir=str(tmp_path / "log"), rank_table=rank_table(2),
            env=job_env,
        )
    assert info.value.exit_code == 127
    assert "davincirun-no-such-program-xyz" in str(info.value)
    # A job that never ran leaves no run directory (and no `latest` link) behind.
    assert os.listdir(str(tmp_path / "log")) == []


def test_invalid_rank_table_is_a_typed_error(tmp_path, job_env):
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": "1.0", "server_list": [{"server_id": "a", "device": '
                   '[{"device_id": "0", "rank_id": "x"}]}]}')
    with pytest.raises(RankTableError) as info:
        start_and_wait_distributed_train(["true"], log_dir=str(tmp_path / "log"), rank_table=str(bad), env=job_env)
    assert info.value.pointer == "/server_list/0/device/0/rank_id"
    assert '"x"' in str(info.value)
    assert isinstance(info.value, ValueError)
    assert not (tmp_path / "log").exists()  # nothing was created


def test_no_rank_table_is_a_config_error(tmp_path, monkeypatch, job_env):
    monkeypatch.delenv("RANK_TABLE_FILE", raising=False)
    with pytest.raises(LaunchConfigError, match="RANK_TABLE_FILE"):
        start_and_wait_distributed_train(["true"], log_dir=str(tmp_path / "log"), env=job_env)


def test_rank_table_from_environment_and_string_command(tmp_path, rank_table, job_env, monkeypatch):
    monkeypatch.setenv("RANK_TABLE_FILE", rank_table(2))
    monkeypatch.chdir(tmp_path)
    assert start_and_wait_distributed_train("true", env=job_env, output_notebook=False) == 0
    assert os.path.isdir(tmp_path / "log" / "latest")


def test_compat_import_paths():
    from davincirunsdk.notebook.exception import DistributedRuntimeError as Compat

    assert Compat is davincirunsdk.DistributedRuntimeError
    assert issubclass(Compat, RuntimeError)


def test_env_for_an_identity_variable_warns(tmp_path, rank_table, job_env):
    with pytest.warns(UserWarning, match="RANK_ID has no effect"):
        code = start_and_wait_distributed_train(
            ["true"], log_dir=str(tmp_path / "log"), rank_table=rank_table(1), env=dict(job_env, RANK_ID="5"),
            output_notebook=False,
        )
    assert code == 0


def test_set_random_ms_cache_dir_context(tmp_path, rank_table, job_env, monkeypatch):
    from davincirunsdk import set_random_ms_cache_dir, wait_distributed_train

    monkeypatch.delenv("MS_COMPILER_CACHE_PATH", raising=False)
    with set_random_ms_cache_dir() as path:
        assert os.environ["MS_COMPILER_CACHE_PATH"] == path and os.path.isdir(path)
        job = start_distributed_train(
            python_command("import os; print('CACHE=' + os.environ['MS_COMPILER_CACHE_PATH'])"),
            log_dir=str(tmp_path / "log"), rank_table=rank_table(1), env=job_env, output_notebook=False,
        )
        assert wait_distributed_train(job) == 0
    assert "MS_COMPILER_CACHE_PATH" not in os.environ and not os.path.exists(path)
    with open(os.path.join(job.run_dir, "rank_0.device_0.log")) as f:
        assert f.read().strip() == "CACHE=" + path

    monkeypatch.setenv("MS_COMPILER_CACHE_PATH", str(tmp_path / "mine"))
    with set_random_ms_cache_dir() as path:
        assert path is None and os.environ["MS_COMPILER_CACHE_PATH"] == str(tmp_path / "mine")


def test_ranks_read_a_normalized_private_copy_of_the_table(tmp_path, job_env):
    """RANK_TABLE_FILE may name a directory; integers become decimal strings
    (what HCCL accepts) in a 0600 copy inside the run directory."""
    config = tmp_path / "config"
    config.mkdir()
    (config / "hccl.json").write_text(
        '{"version": "1.0", "server_list": [{"server_id": "127.0.0.1", "vendor": "kept", '
        '"device": [{"device_id": 0, "rank_id": 0}, {"device_id": 1, "rank_id": 1}]}]}')
    job = start_distributed_train(["true"], log_dir=str(tmp_path / "log"), rank_table=str(config), env=job_env,
                                  output_notebook=False)
    assert job.wait() == 0
    copy = os.path.join(job.run_dir, "rank_table.json")
    assert os.stat(copy).st_mode & 0o777 == 0o600
    import json

    with open(copy) as f:
        table = json.load(f)
    assert table["server_list"][0]["device"][1] == {"device_id": "1", "rank_id": "1"}
    assert table["server_list"][0]["vendor"] == "kept"
    assert table["status"] == "completed" and table["version"] == "1.0"


def test_v0_table_two_pods_on_one_host_each_starts_its_own_devices(tmp_path, job_env, monkeypatch):
    table = tmp_path / "jobstart_hccl.json"
    table.write_text(V0_TWO_PODS_ONE_HOST)
    monkeypatch.delenv("BATCH_TASK_CURRENT_INSTANCE", raising=False)
    monkeypatch.delenv("MA_CURRENT_INSTANCE_NAME", raising=False)
    with pytest.raises(LaunchConfigError, match="job-demo-0, job-demo-1"):
        start_and_wait_distributed_train(["true"], log_dir=str(tmp_path / "log"), rank_table=str(table), env=job_env)

    monkeypatch.setenv("MA_CURRENT_INSTANCE_NAME", "job-demo-1")
    job = start_distributed_train(python_command(PRINT_ENV), log_dir=str(tmp_path / "log"), rank_table=str(tmp_path),
                                  env=job_env, output_notebook=False)
    assert job.wait() == 0
    logs = sorted(n for n in os.listdir(job.run_dir) if n.endswith(".log"))
    assert logs == ["rank_2.device_2.log", "rank_3.device_3.log"]
    for rank in (2, 3):
        env = read_env_log(os.path.join(job.run_dir, "rank_%d.device_%d.log" % (rank, rank)))
        assert env["RANK_ID"] == str(rank) and env["RANK_SIZE"] == "4" and env["RANK_START"] == "2"
        assert env["LOCAL_RANK"] == str(rank - 2) and env["LOCAL_WORLD_SIZE"] == "2"
        assert env["DEVICE_ID"] == str(rank - 2)  # this container sees only devices 2 and 3
    import json

    with open(os.path.join(job.run_dir, "rank_table.json")) as f:
        copy = json.load(f)
    assert copy["version"] == "1.0" and len(copy["server_list"]) == 1
    assert [d["rank_id"] for d in copy["server_list"][0]["device"]] == ["0", "1", "2", "3"]


def test_init_rank_table_converts_and_sets_the_environment(tmp_path, monkeypatch):
    from davincirunsdk import init_rank_table

    monkeypatch.delenv("RANK_TABLE_FILE", raising=False)
    assert init_rank_table() is False
    config = tmp_path / "config"
    config.mkdir()
    (config / "jobstart_hccl.json").write_text(V0_TWO_PODS_ONE_HOST)
    for name in ("RANK_SIZE", "RANK_START", "MA_CURRENT_HOST_IP"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MA_CURRENT_INSTANCE_NAME", "job-demo-1")
    monkeypatch.setenv("RANK_TABLE_FILE", str(config))
    env = init_rank_table(wait_timeout=0)
    path = os.environ["RANK_TABLE_FILE"]
    assert env["RANK_TABLE_FILE"] == path and path.endswith(".json") and os.stat(path).st_mode & 0o777 == 0o600
    assert (env["RANK_SIZE"], env["RANK_START"], env["MA_CURRENT_HOST_IP"]) == ("4", "2", "127.0.0.1")
    import json

    with open(path) as f:
        table = json.load(f)
    assert table["version"] == "1.0" and table["server_list"][0]["server_id"] == "127.0.0.1"
    os.unlink(path)
    os.rmdir(os.path.dirname(path))


def test_ctrl_c_while_waiting_for_the_rank_table(tmp_path, job_env):
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        start_and_wait_distributed_train(["true"], log_dir=str(tmp_path / "log"),
                                         rank_table=str(tmp_path / "not_written_yet.json"), env=job_env,
                                         wait_timeout=60)
    timer.join()
    assert time.monotonic() - start < 5  # honoured at the next retry, not at the 60 s timeout
    assert not (tmp_path / "log").exists()
