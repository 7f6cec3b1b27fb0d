"""Format 2.0 rank tables (Ascend 950 generation) through the Python API and
the table tools: loading, errors, which server this machine is, merging and
the files written, which stay 2.0."""

import json
import os
import shutil
import subprocess

import pytest
from conftest import REPO
from v2_tables import write_v2_table

import davincirunsdk
from davincirunsdk import RankTableError, _core, merge_rank_tables

DAVINCIRUN = shutil.which("davincirun")
needs_cli = pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH (pip install . first)")
CORPUS = os.path.join(REPO, "tests", "data", "rank_tables_2_0")


def cli(*args, cwd):
    return subprocess.run([DAVINCIRUN] + list(args), cwd=str(cwd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=60, text=True)


def test_a_2_0_table_loads_with_its_servers_and_local_ids():
    table = davincirunsdk.load_rank_table(os.path.join(CORPUS, "valid", "v2_two_servers_16p.json"))
    assert table.format == "2.0" and table.status == "completed" and table.world_size == 16
    assert [(s.server_id, s.host_ip, s.rank_start) for s in table.servers] == [
        ("10.0.1.11", "10.0.1.11", 0), ("10.0.1.12", "10.0.1.12", 8)]
    device = table.servers[1].devices[3]
    assert (device.rank_id, device.device_id, device.local_id, device.device_ip) == (11, 3, 3, None)

    # The guide's example: no host_ip, so each server is named by its net_layer 0.
    table = davincirunsdk.load_rank_table(os.path.join(CORPUS, "valid", "v2_two_servers_by_layer0.json"))
    assert [(s.server_id, s.host_ip, len(s.devices)) for s in table.servers] == [
        ("az0-rack0-pod0", None, 2), ("az0-rack0-pod1", None, 2)]


def test_a_2_0_error_names_the_value_and_its_pointer():
    with pytest.raises(RankTableError) as info:
        davincirunsdk.load_rank_table(os.path.join(CORPUS, "invalid", "v2_partial_host_ip.json"))
    assert info.value.kind == "missing" and info.value.pointer == "/rank_list/3/host_ip"
    assert "needs every rank's host address" in str(info.value)

    text = json.dumps({"version": "2.0", "rank_count": 1, "rank_list": [
        {"rank_id": 0, "device_id": 0, "local_id": 0, "level_list": [
            {"net_layer": 0, "net_instance_id": "s", "rank_addr_list": [
                {"addr_type": "IPV4", "addr": "10.0.0.300", "ports": ["0/0"]}]}]}]})
    with pytest.raises(RankTableError) as info:
        davincirunsdk.parse_rank_table(text, "t.json")
    assert info.value.kind == "bad_value"
    assert info.value.pointer == "/rank_list/0/level_list/0/rank_addr_list/0/addr"
    assert str(info.value) == ('t.json: /rank_list/0/level_list/0/rank_addr_list/0/addr: "10.0.0.300" is not an '
                               'IPV4 address (expected an IPv4 literal)')


def test_this_machine_is_the_server_of_its_address(tmp_path):
    """127.0.0.1 is an address of every machine: its server is this one,
    wherever it comes in the table; 10.255.255.2 is no address here."""
    path = write_v2_table(tmp_path / "t.json", [[0, 1], [0, 1]], host_ips=["10.255.255.2", "127.0.0.1"])
    table = davincirunsdk.load_rank_table(path)
    local = _core.find_local_server(table)
    assert local.index == 1 and local.server.rank_start == 2
    assert "127.0.0.1" in local.reason
    local = _core.find_local_server(table, "10.255.255.2")
    assert local.index == 0 and "given explicitly" in local.reason

    # Named by their net_layer 0, the servers are told apart by name only.
    path = write_v2_table(tmp_path / "layers.json", [[0, 1], [0, 1]])
    table = davincirunsdk.load_rank_table(path)
    assert _core.find_local_server(table, "az0-rack0-pod1").server.rank_start == 2
    with pytest.raises(davincirunsdk.LaunchConfigError, match="cannot tell which of the 2 servers"):
        _core.find_local_server(table)


def test_init_rank_table_exports_a_2_0_table_as_2_0(tmp_path, monkeypatch):
    path = write_v2_table(tmp_path / "hccl.json", [[0, 1, 2, 3]], topo_file_path="/usr/local/Ascend/driver/topo/a.json")
    for name in ("RANK_SIZE", "RANK_START", "MA_CURRENT_HOST_IP", "RANK_TABLE_FILE_V_1_0"):
        monkeypatch.setenv(name, "")  # so that the variables init_rank_table sets go when the test ends
        monkeypatch.delenv(name)
    monkeypatch.setenv("RANK_TABLE_FILE", path)
    env = davincirunsdk.init_rank_table(wait_timeout=0)
    exported = env["RANK_TABLE_FILE"]
    assert exported != path and os.stat(exported).st_mode & 0o777 == 0o600
    assert (env["RANK_SIZE"], env["RANK_START"]) == ("4", "0")
    with open(exported) as f:
        copy = json.load(f)
    with open(path) as f:
        original = json.load(f)
    assert copy == original  # already as HCCL reads it: nothing to change
    os.unlink(exported)
    os.rmdir(os.path.dirname(exported))


def test_merge_rank_tables_keeps_2_0(tmp_path):
    a = write_v2_table(tmp_path / "a.json", [[0, 1]], host_ips=["10.0.0.1"])
    b = write_v2_table(tmp_path / "b.json", [[2, 3]], host_ips=["10.0.0.2"])
    merged = merge_rank_tables(tmp_path / "all.json", [b, a])
    assert merged.format == "2.0"
    assert [(s.server_id, s.rank_start) for s in merged.servers] == [("10.0.0.2", 0), ("10.0.0.1", 2)]
    written = json.loads((tmp_path / "all.json").read_text())
    assert written["version"] == "2.0" and written["rank_count"] == 4
    assert [(r["rank_id"], r["device_id"], r["host_ip"]) for r in written["rank_list"]] == [
        (0, 2, "10.0.0.2"), (1, 3, "10.0.0.2"), (2, 0, "10.0.0.1"), (3, 1, "10.0.0.1")]


@needs_cli
def test_the_cli_merges_2_0_tables_into_a_2_0_table_and_refuses_a_mix(tmp_path):
    write_v2_table(tmp_path / "a.json", [[0, 1]], host_ips=["10.0.0.1"])
    write_v2_table(tmp_path / "b.json", [[0, 1, 2]], host_ips=["10.0.0.2"])
    proc = cli("-v", "--merge-rank-tables", "all.json", "a.json", "b.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == (
        "davincirun: wrote rank table all.json: 2 server(s) from 2 table(s), ranks 0-4 in the order the tables "
        "were given\ndavincirun: server 10.0.0.1: ranks 0-1\ndavincirun: server 10.0.0.2: ranks 2-4\n")
    merged = json.loads((tmp_path / "all.json").read_text())
    assert merged["version"] == "2.0" and merged["rank_count"] == 5
    assert [r["rank_id"] for r in merged["rank_list"]] == [0, 1, 2, 3, 4]
    assert merged["rank_list"][4]["level_list"][0]["net_instance_id"] == "az0-rack0-pod0"  # b's ranks, as written

    (tmp_path / "v1.json").write_text(json.dumps({"version": "1.0", "server_list": [
        {"server_id": "10.0.0.3", "device": [{"device_id": "0", "device_ip": "192.0.2.1", "rank_id": "0"}]}]}))
    proc = cli("--merge-rank-tables", "mixed.json", "a.json", "v1.json", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == ("davincirun: unusable rank table: v1.json: /version: a format 1.0 table cannot be merged "
                           "with a.json, a format 2.0 table: 2.0 tables merge only with 2.0 tables\n")
    assert not (tmp_path / "mixed.json").exists()
