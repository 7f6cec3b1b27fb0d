"""A job planned from a format 2.0 rank table (Ascend 950 generation): one
rank per device of this machine's server, the ranks reading a 2.0 copy;
`davincirun --dry-run` on one server and on each of two."""

import json
import os
import re
import shutil
import subprocess

import pytest
from conftest import python_command
from v2_tables import write_v2_table

from davincirunsdk import start_distributed_train

DAVINCIRUN = shutil.which("davincirun")
needs_cli = pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH (pip install . first)")
PRINT_ENV = ("import os\nfor n in ('RANK_TABLE_FILE', 'RANK_ID', 'RANK_SIZE', 'RANK_START', 'DEVICE_ID', "
             "'MASTER_ADDR'):\n    print(n + '=' + os.environ.get(n, '<unset>'))\n")


def dry_run(*args, cwd):
    """`davincirun --dry-run ... true` in an environment naming no server."""
    env = {k: v for k, v in os.environ.items() if k not in ("MA_CURRENT_HOST_IP", "XDL_IP", "POD_IP")}
    return subprocess.run([DAVINCIRUN, "--dry-run"] + list(args) + ["true"], cwd=str(cwd), env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=60)


def values(stdout, name):
    """The values a dry run gives `name`, rank by rank (set or changed)."""
    return re.findall(r"^  [+~] %s=(.*)$" % name, stdout, re.M)


def test_a_job_on_a_2_0_table_runs_its_ranks_on_a_2_0_copy(tmp_path, job_env):
    path = write_v2_table(tmp_path / "hccl.json", [[0, 1]], topo_file_path="/usr/local/Ascend/driver/topo/a.json")
    original = json.loads((tmp_path / "hccl.json").read_text())
    written = json.loads((tmp_path / "hccl.json").read_text())
    written["rank_count"] = "2"  # as a generator may write it
    written["rank_list"][1]["rank_id"] = "1"
    with open(path, "w") as f:
        json.dump(written, f)
    job = start_distributed_train(python_command(PRINT_ENV), log_dir=str(tmp_path / "log"), rank_table=path,
                                  env=job_env, output_notebook=False)
    assert job.wait() == 0
    copy = os.path.join(job.run_dir, "rank_table.json")
    for rank in (0, 1):
        with open(os.path.join(job.run_dir, "rank_%d.device_%d.log" % (rank, rank))) as f:
            env = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
        assert env == {"RANK_TABLE_FILE": copy, "RANK_ID": str(rank), "RANK_SIZE": "2", "RANK_START": "0",
                       "DEVICE_ID": str(rank), "MASTER_ADDR": "127.0.0.1"}
    assert os.stat(copy).st_mode & 0o777 == 0o600
    with open(copy) as f:
        assert json.load(f) == original  # 2.0, its integers JSON integers again, every field kept


@needs_cli
def test_dry_run_on_a_one_server_2_0_table(tmp_path):
    path = write_v2_table(tmp_path / "hccl.json", [[0, 1, 2, 3]])
    proc = dry_run("-r", path, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "(format 2.0), server az0-rack0-pod0 of 1, ranks 0..3 of world size 4\n" in proc.stdout
    assert "rank 3 (local rank 3): physical device 3, logical device 3, log rank_3.device_3.log\n" in proc.stdout

    # Narrowed to some devices, the table stays 2.0 and its ranks are numbered again.
    proc = dry_run("-r", path, "--devices", "1,3", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "(format 2.0), server az0-rack0-pod0 of 1, ranks 0..1 of world size 2\n" in proc.stdout
    assert "rank 1 (local rank 1): physical device 3" in proc.stdout


@needs_cli
def test_dry_run_on_each_server_of_a_2_0_table_grouped_by_host_ip(tmp_path):
    """127.0.0.1 is an address of this machine, 127.0.0.2 is not one it
    lists: found by its address, it is the second server; named, the first."""
    path = write_v2_table(tmp_path / "hccl.json", [[0, 1], [0, 1]], host_ips=["127.0.0.2", "127.0.0.1"])
    proc = dry_run("-r", path, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "(format 2.0), server 127.0.0.1 of 2, ranks 2..3 of world size 4\n" in proc.stdout
    assert "this machine is server 127.0.0.1: server_id 127.0.0.1 matches an address of this machine" in proc.stdout
    assert values(proc.stdout, "MASTER_ADDR") == ["127.0.0.2"] * 2  # the server of rank 0
    assert values(proc.stdout, "RANK_START") == ["2"] * 2
    ports = set(values(proc.stdout, "MASTER_PORT"))
    assert len(ports) == 1

    proc = dry_run("-r", path, "--server-id", "127.0.0.2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "(format 2.0), server 127.0.0.2 of 2, ranks 0..1 of world size 4\n" in proc.stdout
    assert "rank 1 (local rank 1): physical device 1" in proc.stdout
    assert set(values(proc.stdout, "MASTER_PORT")) == ports  # derived alike from the table


@needs_cli
def test_dry_run_on_a_2_0_table_grouped_by_net_layer_0(tmp_path):
    path = write_v2_table(tmp_path / "hccl.json", [[0, 1], [0, 1]])
    proc = dry_run("-r", path, "--server-id", "az0-rack0-pod1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "(format 2.0), server az0-rack0-pod1 of 2, ranks 2..3 of world size 4\n" in proc.stdout
    proc = dry_run("-r", path, cwd=tmp_path)
    assert proc.returncode == 2
    assert "cannot tell which of the 2 servers of the rank table (az0-rack0-pod0, az0-rack0-pod1)" in proc.stderr
