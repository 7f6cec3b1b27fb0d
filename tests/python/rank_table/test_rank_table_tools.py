"""Rank tables made by hand: this machine's (``davincirun --write-rank-table``,
``write_rank_table``) from a fake system root, and several servers' merged
(``davincirun --merge-rank-tables``, ``merge_rank_tables``)."""

import json
import os
import shutil
import stat
import subprocess
import warnings

import pytest

import davincirunsdk
from davincirunsdk import LaunchConfigError, OptionTypeError, RankTableError, merge_rank_tables, write_rank_table

DAVINCIRUN = shutil.which("davincirun")
needs_cli = pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH (pip install . first)")


def fake_root(path, devices, hccn=None, others=("davinci_manager", "davinci_hdc")):
    """A system root with dev/davinci<N> as regular files (and look-alikes
    that are not NPUs) and, when given, etc/hccn.conf."""
    (path / "dev").mkdir(parents=True)
    (path / "etc").mkdir()
    for name in ["davinci%d" % d for d in devices] + list(others):
        (path / "dev" / name).write_text("")
    if hccn is not None:
        (path / "etc" / "hccn.conf").write_text(hccn)
    return str(path)


def hccn_for(devices, net):
    """hccn_tool's lines: an address (192.<net>.<d>.1) and its neighbours per device."""
    lines = ["# NPU network"]
    for d in devices:
        lines += ["address_%d=192.%d.%d.1" % (d, net, d), "netmask_%d=255.255.255.0" % d,
                  "gateway_%d=192.%d.%d.254" % (d, net, d), ""]
    return "\n".join(lines)


def cli(*args, cwd):
    return subprocess.run([DAVINCIRUN] + list(args), cwd=str(cwd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=60, text=True)


@needs_cli
def test_the_cli_writes_this_machines_table(tmp_path):
    root = fake_root(tmp_path / "root", [3, 0, 1, 2], hccn_for([0, 1, 2, 3], 1))
    proc = cli("--write-rank-table", "hccl.json", "--system-root", root, "--server-id", "10.0.0.11", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ("davincirun: wrote rank table hccl.json: server 10.0.0.11 (given), devices 0,1,2,3 "
                           "as ranks 0-3\n")
    written = tmp_path / "hccl.json"
    assert stat.S_IMODE(written.stat().st_mode) == 0o644
    assert json.loads(written.read_text()) == {
        "version": "1.0",
        "server_count": "1",
        "server_list": [{
            "server_id": "10.0.0.11",
            "device": [{"device_id": str(d), "device_ip": "192.1.%d.1" % d, "rank_id": str(d)} for d in range(4)],
            "host_nic_ip": "reserve",
        }],
        "status": "completed",
    }
    table = davincirunsdk.load_rank_table(str(written))
    assert table.world_size == 4 and table.servers[0].server_id == "10.0.0.11"

    # Without --server-id: this machine's address, and the message says why it is that one.
    proc = cli("--write-rank-table", "auto.json", "--system-root", root, "--devices", "2", cwd=tmp_path)
    if proc.returncode != 0:  # a machine with no IPv4 address but loopback
        assert "--server-id" in proc.stderr
        return
    server_id = json.loads((tmp_path / "auto.json").read_text())["server_list"][0]["server_id"]
    assert ("server %s (the address of " % server_id in proc.stderr
            or "server %s (the first IPv4 address of this machine" % server_id in proc.stderr)
    assert not server_id.startswith("127.")


@needs_cli
def test_the_cli_warns_of_devices_without_an_address(tmp_path):
    root = fake_root(tmp_path / "root", [0, 1])
    proc = cli("--write-rank-table", "hccl.json", "--system-root", root, "--server-id", "n1", "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("davincirun: warning: there is no %s/etc/hccn.conf (devices 0, 1 have no "
                                  "address): listed without device_ip." % root)
    assert "wrote" not in proc.stderr  # -q
    devices = json.loads((tmp_path / "hccl.json").read_text())["server_list"][0]["device"]
    assert devices == [{"device_id": "0", "rank_id": "0"}, {"device_id": "1", "rank_id": "1"}]


@needs_cli
def test_the_cli_refuses_what_it_cannot_write(tmp_path):
    root = fake_root(tmp_path / "root", [0], "address_0=192.1.0\n")
    proc = cli("--write-rank-table", "hccl.json", "--system-root", root, "--server-id", "n1", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == ("davincirun: %s/etc/hccn.conf:1: the address of device 0 is not an IP address: "
                           "'192.1.0'\n" % root)
    empty = fake_root(tmp_path / "empty", [])
    proc = cli("--write-rank-table", "hccl.json", "--system-root", empty, cwd=tmp_path)
    assert proc.returncode == 2 and "no NPU on this machine: no %s/dev/davinci<N>" % empty in proc.stderr
    proc = cli("--write-rank-table", "hccl.json", "--system-root", empty, "python", "train.py", cwd=tmp_path)
    assert proc.returncode == 2 and "--write-rank-table takes no command" in proc.stderr
    proc = cli("--write-rank-table", "a.json", "--merge-rank-tables", "b.json", "c.json", cwd=tmp_path)
    assert proc.returncode == 2 and "give one" in proc.stderr
    proc = cli("--merge-rank-tables", "out.json", cwd=tmp_path)
    assert proc.returncode == 2 and "needs the tables to merge" in proc.stderr
    assert not (tmp_path / "hccl.json").exists()


@needs_cli
def test_the_cli_merges_in_argument_order(tmp_path):
    tables = []
    for index, (server_id, devices) in enumerate([("10.0.0.2", [0, 1, 2, 3]), ("10.0.0.1", [4, 5])]):
        root = fake_root(tmp_path / ("root%d" % index), devices, hccn_for(devices, index + 1))
        name = "hccl_%d.json" % index
        assert cli("--write-rank-table", name, "--system-root", root, "--server-id", server_id, "-q",
                   cwd=tmp_path).returncode == 0
        tables.append(name)
    proc = cli("-v", "--merge-rank-tables", "all.json", *tables, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == (
        "davincirun: wrote rank table all.json: 2 server(s) from 2 table(s), ranks 0-5 in the order the tables "
        "were given\ndavincirun: server 10.0.0.2: ranks 0-3\ndavincirun: server 10.0.0.1: ranks 4-5\n")
    merged = json.loads((tmp_path / "all.json").read_text())
    assert merged["server_count"] == "2" and merged["status"] == "completed" and merged["version"] == "1.0"
    assert [(s["server_id"], [(d["device_id"], d["rank_id"]) for d in s["device"]]) for s in merged["server_list"]] \
        == [("10.0.0.2", [("0", "0"), ("1", "1"), ("2", "2"), ("3", "3")]), ("10.0.0.1", [("4", "4"), ("5", "5")])]
    assert stat.S_IMODE((tmp_path / "all.json").stat().st_mode) == 0o644

    # The same server twice: refused, naming both files; nothing written.
    proc = cli("--merge-rank-tables", "twice.json", tables[0], "all.json", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == ("davincirun: unusable rank table: all.json: /server_list/0/server_id: server 10.0.0.2 is "
                           "also in hccl_0.json (/server_list/0/server_id): each server's table can be merged once\n")
    assert not (tmp_path / "twice.json").exists()


def test_write_rank_table_from_python(tmp_path):
    root = fake_root(tmp_path / "root", [0, 1, 2], "address_1=192.168.1.1\n")
    with pytest.warns(UserWarning, match=r"devices 0, 2 have no address_<N> line in .*/etc/hccn.conf"):
        table = write_rank_table(tmp_path / "hccl.json", server_id="node1", system_root=tmp_path / "root")
    assert table.world_size == 3 and table.servers[0].server_id == "node1"
    assert [d.device_ip for d in table.servers[0].devices] == [None, "192.168.1.1", None]
    assert davincirunsdk.load_rank_table(str(tmp_path / "hccl.json")).world_size == 3

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = write_rank_table(str(tmp_path / "one.json"), server_id="node1", devices=1, system_root=root)
    assert [(d.device_id, d.rank_id) for d in table.servers[0].devices] == [(1, 0)]

    with pytest.raises(LaunchConfigError, match=r"devices: device 7 is not on this machine") as info:
        write_rank_table(tmp_path / "x.json", server_id="node1", devices=[7], system_root=root)
    assert info.value.option == "devices"
    with pytest.raises(LaunchConfigError, match="server_id is longer than 64 bytes") as info:
        write_rank_table(tmp_path / "x.json", server_id="n" * 65, system_root=root)
    assert info.value.option == "server_id"
    with pytest.raises(OptionTypeError, match="devices: expected a device id"):
        write_rank_table(tmp_path / "x.json", devices="0", system_root=root)
    with pytest.raises(OptionTypeError, match="server_id: expected a str"):
        write_rank_table(tmp_path / "x.json", server_id=11, system_root=root)
    with pytest.raises(davincirunsdk.LauncherSystemError, match="No such file or directory") as info:
        write_rank_table(tmp_path / "no" / "x.json", server_id="node1", system_root=root)
    assert isinstance(info.value, OSError)
    assert not os.path.exists(tmp_path / "x.json")


def test_merge_rank_tables_from_python(tmp_path):
    paths = []
    for index, server_id in enumerate(["10.0.0.1", "10.0.0.2", "10.0.0.3"]):
        root = fake_root(tmp_path / ("root%d" % index), [0, 1], hccn_for([0, 1], index))
        paths.append(tmp_path / ("t%d.json" % index))
        write_rank_table(paths[-1], server_id=server_id, system_root=root)
    merged = merge_rank_tables(tmp_path / "all.json", [paths[2], str(paths[0]), paths[1]])
    assert [(s.server_id, s.rank_start) for s in merged.servers] == [("10.0.0.3", 0), ("10.0.0.1", 2), ("10.0.0.2", 4)]
    assert davincirunsdk.load_rank_table(str(tmp_path / "all.json")).world_size == 6

    with pytest.raises(RankTableError) as info:
        merge_rank_tables(tmp_path / "again.json", [paths[0], tmp_path / "all.json"])
    assert info.value.kind == "duplicate" and info.value.source == str(tmp_path / "all.json")
    assert str(paths[0]) in str(info.value)
    assert not (tmp_path / "again.json").exists()

    bare = fake_root(tmp_path / "bare", [0])
    with pytest.warns(UserWarning):
        write_rank_table(tmp_path / "bare.json", server_id="10.0.0.9", system_root=bare)
    with pytest.raises(RankTableError, match="device 0 has no device_ip") as info:
        merge_rank_tables(tmp_path / "out.json", [paths[0], tmp_path / "bare.json"])
    assert info.value.kind == "missing" and info.value.pointer == "/server_list/0/device/0/device_ip"

    with pytest.raises(OptionTypeError, match="inputs: expected a list of paths"):
        merge_rank_tables(tmp_path / "out.json", str(paths[0]))
    with pytest.raises(OptionTypeError, match="inputs: no rank table to merge"):
        merge_rank_tables(tmp_path / "out.json", [])
