"""torchrun's worker contract under davincirun: every variable torch 2.x's
local elastic agent gives a worker, read with os.environ[...] as public
scripts do; torch.distributed's env:// rendezvous and elastic's @record
working unchanged; the failure report reading the error file @record
wrote; OMP_NUM_THREADS as torchrun sets it. Real ranks, real torch (gloo
on the CPU)."""

import json
import os
import subprocess
import sys

import pytest
from conftest import needs_modules

from davincirunsdk import DistributedRuntimeError, start_and_wait_distributed_train

DAVINCIRUN = "davincirun"

# The names torch 2.x's LocalElasticAgent._start_workers sets for a worker
# (torch/distributed/elastic/agent/server/local_elastic_agent.py), plus the
# error file its multiprocessing layer adds (elastic/multiprocessing/api.py).
TORCHRUN_NAMES = (
    "RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE", "WORLD_SIZE",
    "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCHELASTIC_ERROR_FILE",
)

# Indexes every name as scripts written for torchrun do (KeyError if one is missing).
READ_ALL = (
    "import json, os; names = %r; "
    "print('CONTRACT ' + json.dumps({n: os.environ[n] for n in names + ('OMP_NUM_THREADS', 'JOB_ID')}), flush=True)"
    % (TORCHRUN_NAMES,)
)


def contract_lines(run_dir):
    found = {}
    for name in sorted(os.listdir(run_dir)):
        if name.endswith(".log") and name.startswith("rank_"):
            with open(os.path.join(run_dir, name)) as f:
                for line in f:
                    if line.startswith("CONTRACT "):
                        values = json.loads(line[len("CONTRACT "):])
                        found[int(values["RANK"])] = values
    return found


def test_every_torchrun_variable_is_there_with_its_meaning_here(tmp_path, rank_table, job_env, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    table = rank_table(2)  # one server, devices 0 and 1
    code = start_and_wait_distributed_train([sys.executable, "-c", READ_ALL], rank_table=table,
                                            log_dir=str(tmp_path / "log"), env=job_env, output_notebook=False)
    assert code == 0
    run_dir = str(tmp_path / "log" / "latest")
    ranks = contract_lines(run_dir)
    assert sorted(ranks) == [0, 1]
    for rank, env in ranks.items():
        assert env["GROUP_RANK"] == "0" and env["GROUP_WORLD_SIZE"] == "1"
        assert env["ROLE_NAME"] == "default"
        assert env["ROLE_RANK"] == str(rank) and env["ROLE_WORLD_SIZE"] == "2"
        assert env["LOCAL_RANK"] == str(rank) and env["LOCAL_WORLD_SIZE"] == "2"
        assert env["TORCHELASTIC_RUN_ID"] == env["JOB_ID"]
        assert env["TORCHELASTIC_RESTART_COUNT"] == "0" and env["TORCHELASTIC_MAX_RESTARTS"] == "0"
        assert env["TORCHELASTIC_USE_AGENT_STORE"] == "False"
        assert env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"
        # One error file per rank, beside its log, in the run directory.
        assert env["TORCHELASTIC_ERROR_FILE"] == os.path.join(
            os.path.realpath(run_dir), "rank_%d.device_%d.error.json" % (rank, rank))
        assert env["OMP_NUM_THREADS"] == "1"  # two ranks, unset: torchrun's default
    with open(os.path.join(run_dir, "summary.json")) as f:
        notes = json.load(f)["notes"]
    assert len(notes) == 1 and notes[0].startswith("OMP_NUM_THREADS=1 for each rank")


def test_a_value_the_user_set_wins_and_no_note_is_given(tmp_path, rank_table, job_env, monkeypatch):
    monkeypatch.setenv("ROLE_NAME", "trainer")
    monkeypatch.setenv("GROUP_RANK", "7")  # another launch's: replaced
    env = dict(job_env, OMP_NUM_THREADS="3")
    code = start_and_wait_distributed_train([sys.executable, "-c", READ_ALL], rank_table=rank_table(2),
                                            log_dir=str(tmp_path / "log"), env=env, output_notebook=False)
    assert code == 0
    ranks = contract_lines(str(tmp_path / "log" / "latest"))
    assert {r["OMP_NUM_THREADS"] for r in ranks.values()} == {"3"}
    assert {r["ROLE_NAME"] for r in ranks.values()} == {"trainer"}
    assert {r["GROUP_RANK"] for r in ranks.values()} == {"0"}
    with open(tmp_path / "log" / "latest" / "summary.json") as f:
        assert json.load(f)["notes"] == []


def test_the_cli_says_the_omp_default_once(tmp_path, rank_table, job_env):
    env = dict(os.environ, **job_env)
    env.pop("OMP_NUM_THREADS", None)
    proc = subprocess.run([DAVINCIRUN, "-r", rank_table(2), "-l", str(tmp_path / "log"), sys.executable, "-c",
                           "import os; print(os.environ['OMP_NUM_THREADS'])"],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("OMP_NUM_THREADS=1 for each rank, as torchrun sets it") == 1, proc.stderr
    assert "[rank 0] 1\n" in proc.stdout and "[rank 1] 1\n" in proc.stdout
    # Said at the start: before any rank's line, on one stream.
    both = subprocess.run([DAVINCIRUN, "-r", rank_table(2), "-l", str(tmp_path / "log"), "sh", "-c", "echo up"],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    lines = both.stdout.splitlines()
    note = [i for i, line in enumerate(lines) if "OMP_NUM_THREADS=1 for each rank" in line]
    ranks = [i for i, line in enumerate(lines) if line.startswith("[rank ")]
    assert len(note) == 1 and len(ranks) == 2 and note[0] < ranks[0], both.stdout
    quiet = subprocess.run([DAVINCIRUN, "-q", "-r", rank_table(2), "-l", str(tmp_path / "log"), sys.executable, "-c",
                            "pass"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert quiet.returncode == 0 and quiet.stderr == ""
    with open(tmp_path / "log" / "latest" / "events.txt") as f:
        assert "OMP_NUM_THREADS=1 for each rank" in f.read()  # -q keeps it on record


# A DDP step through env:// (which reads MASTER_ADDR, MASTER_PORT, RANK,
# WORLD_SIZE and TORCHELASTIC_USE_AGENT_STORE), main() under elastic's
# @record: rank 1 raises after the collective.
RECORDED = r"""
import os, sys, time
import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

@record
def main():
    dist.init_process_group("gloo")
    t = torch.ones(1) * (dist.get_rank() + 1)
    dist.all_reduce(t)
    print("sum %d threads %d" % (t.item(), torch.get_num_threads()), flush=True)
    if dist.get_rank() == 1:
        raise ValueError("bad shard 17 in " + os.environ["ROLE_NAME"] + " group " + os.environ["GROUP_RANK"])
    # Rank 0 waits off the network until the launcher stops it. Waiting in a
    # barrier instead, its gloo met rank 1's sockets closing while rank 1 was
    # still ending, and rank 1 once ended by SIGABRT rather than exit status 1
    # (a loaded machine, two pytest workers): the exit status is the test's.
    time.sleep(120)

main()
"""


@pytest.mark.slow
@needs_modules("torch")
def test_record_writes_the_error_file_and_the_report_reads_it(tmp_path, rank_table, job_env, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    script = tmp_path / "recorded.py"
    script.write_text(RECORDED)
    with pytest.raises(DistributedRuntimeError) as info:
        start_and_wait_distributed_train([sys.executable, str(script)], rank_table=rank_table(2),
                                         log_dir=str(tmp_path / "log"), env=job_env, output_notebook=False)
    error = info.value
    run_dir = tmp_path / "log" / "latest"
    assert error.rank == 1 and error.exit_code == 1
    with open(run_dir / "rank_1.device_1.error.json") as f:
        written = json.load(f)  # torch's own file: its layout is what the report reads
    assert written["message"]["message"] == "ValueError: bad shard 17 in default group 0"
    assert error.root_cause_exception == "ValueError: bad shard 17 in default group 0"
    assert "root cause, from its torch error file:" in str(error), str(error)
    assert 'raise ValueError("bad shard 17 in "' in error.root_cause
    for rank in (0, 1):
        with open(run_dir / ("rank_%d.device_%d.log" % (rank, rank))) as f:
            assert "sum 3 threads 1\n" in f.read()  # the collective ran; one OpenMP thread each
    assert "Connection closed" not in error.root_cause_exception  # rank 0 was stopped, not failed
