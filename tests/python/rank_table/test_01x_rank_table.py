"""init_rank_table() as davincirunsdk 0.1.x used it: with no variable set
it finds the platform's table (DEFAULT_RANK_TABLE_PATHS), it exports to one
file per process, removed when the process exits; and 0.1.x's classes
RankTableV0 / RankTableV1 / Group / Instance / Device show a parsed table."""

import json
import os
import subprocess
import sys

import pytest

from davincirunsdk import rank_table as rank_table_module
from davincirunsdk.errors import LaunchConfigError, RankTableError
from davincirunsdk.rank_table import Device, Group, Instance, RankTableV0, RankTableV1, init_rank_table

V0_TABLE = {
    "status": "completed", "group_count": "1",
    "group_list": [{"group_name": "demo", "device_count": "3", "instance_count": "2", "instance_list": [
        {"pod_name": "job-demo-1", "server_id": "127.0.0.1", "devices": [
            {"device_id": "1", "device_ip": "192.0.2.11"}, {"device_id": "2", "device_ip": "192.0.2.12"}]},
        {"pod_name": "job-demo-0", "server_id": "127.0.0.1", "devices": [
            {"device_id": "0", "device_ip": "192.0.2.10"}]}]}],
}
VARIABLES = ("RANK_TABLE_FILE", "RANK_TABLE_FILE_V_1_0", "RANK_SIZE", "RANK_START", "MA_CURRENT_HOST_IP",
             "BATCH_TASK_CURRENT_INSTANCE")


@pytest.fixture
def clean_env(monkeypatch):
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MA_CURRENT_INSTANCE_NAME", "job-demo-1")
    return monkeypatch


@pytest.fixture
def platform_table(tmp_path, clean_env):
    """The 0.1 table where the platform puts it, DEFAULT_RANK_TABLE_PATHS pointed there."""
    path = tmp_path / "user" / "config" / "jobstart_hccl.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(V0_TABLE))
    clean_env.setattr(rank_table_module, "DEFAULT_RANK_TABLE_PATHS", (str(tmp_path / "missing.json"), str(path)))
    return path


def test_the_default_path_is_the_one_0_1_x_read():
    assert rank_table_module.DEFAULT_RANK_TABLE_PATHS == ("/user/config/jobstart_hccl.json",)


def test_no_variable_reads_the_first_default_path_that_exists(platform_table):
    env = init_rank_table(wait_timeout=0)
    assert (env["RANK_SIZE"], env["RANK_START"], env["MA_CURRENT_HOST_IP"]) == ("3", "1", "127.0.0.1")
    with open(os.environ["RANK_TABLE_FILE"]) as f:
        exported = json.load(f)
    assert exported["version"] == "1.0" and len(exported["server_list"][0]["device"]) == 3


def test_no_variable_and_no_default_path_is_nothing_to_do(tmp_path, clean_env):
    clean_env.setattr(rank_table_module, "DEFAULT_RANK_TABLE_PATHS", (str(tmp_path / "missing.json"),))
    assert init_rank_table(wait_timeout=0) is False
    assert "RANK_TABLE_FILE" not in os.environ


def test_every_call_of_a_process_exports_to_the_same_file(platform_table):
    first = init_rank_table(wait_timeout=0)["RANK_TABLE_FILE"]
    second = init_rank_table(wait_timeout=0)["RANK_TABLE_FILE"]
    assert first == second and os.path.basename(first) == "hccl.json"
    assert sorted(os.listdir(os.path.dirname(first))) == ["hccl.json"]  # nothing else left beside it


def test_the_file_is_private_stable_and_removed_when_the_process_exits(tmp_path, rank_table):
    temp = tmp_path / "tmp"
    temp.mkdir()
    code = ("import json, os\nos.umask(0)\nfrom davincirunsdk import init_rank_table\n"
            "paths = [init_rank_table(wait_timeout=0)['RANK_TABLE_FILE'] for _ in range(3)]\n"
            "modes = [os.stat(p).st_mode & 0o777 for p in (paths[0], os.path.dirname(paths[0]))]\n"
            "print(json.dumps([paths, modes, sorted(os.listdir(os.path.dirname(paths[0])))]))\n")
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    env.update(TMPDIR=str(temp), RANK_TABLE_FILE=rank_table(2))
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", code], env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        runs.append(json.loads(proc.stdout))
    for paths, modes, listing in runs:
        assert len(set(paths)) == 1 and os.path.dirname(os.path.dirname(paths[0])) == str(temp)
        assert os.path.basename(os.path.dirname(paths[0])).startswith("davincirun-rank-table-")
        assert modes == [0o600, 0o700] and listing == ["hccl.json"]
        assert not os.path.exists(os.path.dirname(paths[0]))  # removed at exit
    assert runs[0][0][0] != runs[1][0][0]  # a place of its own for each process
    assert os.listdir(str(temp)) == []


def test_rank_table_v0_shows_the_parsed_table(platform_table):
    table = RankTableV0(str(platform_table))
    assert (table.status, table.group_count, table.get_device_num()) == ("completed", 1, 3)
    (group,) = table.group_list
    assert isinstance(group, Group) and (group.group_name, group.device_count, group.instance_count) == ("demo", 3, 2)
    # Pods in the order of their number, as 0.1.x sorted them; ranks follow.
    assert [i.pod_name for i in group.instance_list] == ["job-demo-0", "job-demo-1"]
    assert [(d.device_id, d.device_ip, d.rank_id) for d in group.instance_list[1].devices] == [
        ("1", "192.0.2.11", "1"), ("2", "192.0.2.12", "2")]
    # Converted to 1.0 at once, into this process's exported file.
    assert table.get_rank_table_path() == rank_table_module._exported_table.export_path()
    assert table.rank_table["version"] == "1.0" and table.get_server("127.0.0.1")["device"][0]["rank_id"] == "0"
    assert table.get_server("192.0.2.99") is None
    current = table.get_current_instance()  # MA_CURRENT_INSTANCE_NAME=job-demo-1
    assert isinstance(current, Instance) and current.pod_name == "job-demo-1"
    assert [d.device_id for d in current.devices] == ["1", "2"]
    assert rank_table_module.set_rank_env(table)["RANK_START"] == "1"  # 0.1.x passed its objects there too
    with pytest.raises(RankTableError, match="RankTableV1"):
        RankTableV0(os.environ["RANK_TABLE_FILE"])


def test_rank_table_v1_and_the_records(rank_table, clean_env):
    path = rank_table(2)
    table = RankTableV1(path)
    assert (table.get_rank_table_path(), table.get_device_num()) == (path, 2)
    assert table.rank_table["server_list"][0]["server_id"] == "127.0.0.1"
    instance = RankTableV1.convert_server_to_instance(table.get_server("127.0.0.1"))
    assert [(d.device_id, d.rank_id) for d in instance.devices] == [("0", "0"), ("1", "1")]
    assert table.get_current_instance().server_id == "127.0.0.1"
    assert RankTableV1.wait_for_available(path) is True
    device = Device("3", "192.0.2.3", "")
    assert Instance("p-0", "s", [{"device_id": "3", "device_ip": "192.0.2.3"}]).devices[0].__dict__ == device.__dict__
    with pytest.raises(RankTableError):
        RankTableV1(str(rank_table(0, name="bad.json")) + ".missing")


def test_a_machine_not_in_the_table_is_a_typed_error(tmp_path, clean_env):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"version": "1.0", "server_count": "2", "status": "completed", "server_list": [
        {"server_id": "203.0.113.1", "device": [{"device_id": "0", "device_ip": "10.0.0.1", "rank_id": "0"}]},
        {"server_id": "203.0.113.2", "device": [{"device_id": "0", "device_ip": "10.0.0.2", "rank_id": "1"}]}]}))
    with pytest.raises(LaunchConfigError):
        RankTableV1(str(path)).get_current_instance()  # 0.1.x took the first server
