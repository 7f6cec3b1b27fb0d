"""The launch modes for TensorFlow on real processes (small scripts that
print what they were given; tests/python/frameworks/test_tensorflow.py trains
with TensorFlow itself), with two "servers" on this machine's loopback
(127.0.0.1 holds rank 0, 127.0.0.2 rank 1), each a davincirun of its own:
cm gives CANN's CM_* variables and none of the rank table's, tf-config gives
each rank its TF_CONFIG, alike on both servers, and no mode passes on the
launcher's own TF_CONFIG or CM_* variables."""

import json
import os
import subprocess
import sys

import pytest

from davincirunsdk import start_distributed_train

SERVERS = ["127.0.0.1", "127.0.0.2"]
NAMES = ["CM_CHIEF_IP", "CM_CHIEF_PORT", "CM_CHIEF_DEVICE", "CM_WORKER_IP", "CM_WORKER_SIZE", "RANK_TABLE_FILE",
         "RANK_ID", "RANK_SIZE", "DEVICE_ID", "TF_CONFIG", "RANK", "JOB_ID"]
SCRIPT = "import json, os\nprint('VARS ' + json.dumps({n: os.environ.get(n) for n in %r}), flush=True)\n" % NAMES


def two_server_table(path):
    # Rank 0 is the second device of its server: its logical id is 1.
    path.write_text(json.dumps({
        "version": "1.0", "server_count": "2", "status": "completed",
        "server_list": [
            {"server_id": SERVERS[0], "device": [{"device_id": "4", "device_ip": "192.168.1.4", "rank_id": "1"},
                                                 {"device_id": "5", "device_ip": "192.168.1.5", "rank_id": "0"}]},
            {"server_id": SERVERS[1], "device": [{"device_id": "0", "device_ip": "192.168.2.1", "rank_id": "2"},
                                                 {"device_id": "1", "device_ip": "192.168.2.2", "rank_id": "3"}]}]}))
    return path


def run_two_servers(tmp_path, mode, env=None):
    """Both servers' davincirun to their end; {rank: the variables it printed}."""
    table = two_server_table(tmp_path / "table.json")
    script = tmp_path / "vars.py"
    script.write_text(SCRIPT)
    procs = [subprocess.Popen(["davincirun", "-r", str(table), "--server-id", server, "-l", str(tmp_path / server),
                               "--launch-mode", mode, sys.executable, str(script)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
             for server in SERVERS]
    seen = {}
    for proc in procs:
        out = proc.communicate(timeout=60)[0].decode(errors="replace")
        assert proc.returncode == 0, out
        for line in out.splitlines():
            if "VARS " in line:
                values = json.loads(line.split("VARS ", 1)[1])
                seen[int(values["RANK"])] = values
    assert sorted(seen) == [0, 1, 2, 3]
    return seen


def test_cm_gives_canns_variables_and_none_of_the_rank_tables(tmp_path):
    env = dict(os.environ, RANK_TABLE_FILE="/inherited/hccl.json", RANK_ID="7", RANK_SIZE="9",
               CM_CHIEF_IP="10.9.9.9")
    seen = run_two_servers(tmp_path, "cm", env)
    ports = {v["CM_CHIEF_PORT"] for v in seen.values()}
    assert len(ports) == 1 and 20000 <= int(ports.pop()) <= 31999  # derived alike on both servers
    for rank, values in seen.items():
        assert values["CM_CHIEF_IP"] == "127.0.0.1"
        assert values["CM_CHIEF_DEVICE"] == "1"  # rank 0: physical device 5, logical 1 of {4, 5}
        assert values["CM_WORKER_IP"] == SERVERS[rank // 2]
        assert values["CM_WORKER_SIZE"] == "4"
        assert values["RANK_TABLE_FILE"] is None and values["RANK_ID"] is None and values["RANK_SIZE"] is None
        assert values["TF_CONFIG"] is None
        # Logical ids: ranks 1 and 0 on devices 4 and 5 of the first server, 2 and 3 on 0 and 1 of the second.
        assert values["DEVICE_ID"] == {0: "1", 1: "0", 2: "0", 3: "1"}[rank]


def test_tf_config_lists_every_rank_alike_on_every_server(tmp_path):
    env = dict(os.environ, TF_CONFIG='{"cluster": {"chief": ["elsewhere:1"]}}')  # the launcher's own: not passed on
    seen = run_two_servers(tmp_path, "tf-config", env)
    configs = {rank: json.loads(values["TF_CONFIG"]) for rank, values in seen.items()}
    cluster = configs[0]["cluster"]
    assert list(cluster) == ["worker"]
    workers = cluster["worker"]
    assert [w.split(":")[0] for w in workers] == ["127.0.0.1", "127.0.0.1", "127.0.0.2", "127.0.0.2"]
    ports = [int(w.split(":")[1]) for w in workers]
    assert ports[1] == ports[0] + 1 and ports[2] == ports[0] and ports[3] == ports[0] + 1  # per server, from one base
    for rank, config in configs.items():
        assert config == {"cluster": cluster, "task": {"type": "worker", "index": rank}}
        assert seen[rank]["RANK_ID"] == str(rank) and seen[rank]["RANK_TABLE_FILE"]  # rank-table mode's variables stay
        assert seen[rank]["CM_CHIEF_IP"] is None


def test_rank_table_mode_passes_on_no_tf_config_or_cm_variables(tmp_path, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {}}')
    monkeypatch.setenv("CM_WORKER_SIZE", "64")
    job = start_distributed_train([sys.executable, "-c", SCRIPT], nproc=1, log_dir=str(tmp_path),
                                  output_notebook=False)
    assert job.wait() == 0
    with open(os.path.join(job.run_dir, "rank_0.device_0.log")) as f:
        (line,) = [line for line in f if line.startswith("VARS ")]
    values = json.loads(line[5:])
    assert values["TF_CONFIG"] is None and values["CM_WORKER_SIZE"] is None


@pytest.mark.parametrize("mode, said", [
    ("tf-config", "launch mode tf-config: TF_CONFIG's cluster {\"worker\":[\"127.0.0.1:"),
    ("cm", "launch mode cm: CANN's chief at 127.0.0.1:"),
])
def test_dry_run_says_what_the_mode_sets(tmp_path, mode, said):
    out = subprocess.run(["davincirun", "--dry-run", "--nproc", "2", "--launch-mode", mode, "-l", str(tmp_path),
                          "python", "train.py"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert said in out.stdout
    if mode == "cm":
        assert "RANK_TABLE_FILE, RANK_ID and RANK_SIZE are not set" in out.stdout
        assert "  + CM_WORKER_SIZE=2" in out.stdout and "RANK_ID=" not in out.stdout


def test_an_unknown_mode_names_every_mode(tmp_path):
    out = subprocess.run(["davincirun", "--nproc", "1", "--launch-mode", "tf", "true"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2
    assert "rank-table, dynamic-cluster, tf-config or cm, got 'tf'" in out.stderr
