"""The flags msrun and torchrun users type, given to davincirun: each is
taken as ours with one line saying so, or refused (exit 2) with a message
naming what does its work here. The real command."""

import shutil
import subprocess
import sys

import pytest

DAVINCIRUN = shutil.which("davincirun")
pytestmark = pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH (pip install . first)")

PRINT_RANK = [sys.executable, "-c", "import os; print('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'])"]


def run(tmp_path, *args):
    return subprocess.run([DAVINCIRUN, *args], cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=60)


@pytest.mark.parametrize("flag", ["--local_worker_num", "--nproc_per_node", "--nproc-per-node"])
def test_ranks_per_machine_is_taken_as_nproc(tmp_path, flag):
    proc = run(tmp_path, flag, "2", "-l", str(tmp_path / "log"), *PRINT_RANK)
    assert proc.returncode == 0, proc.stderr
    assert "[rank 1] rank 1 of 2\n" in proc.stdout
    assert proc.stderr.count("%s (" % flag) == 1
    assert "is taken as --nproc: the number of ranks on this machine" in proc.stderr


def test_msrun_log_dir_and_cluster_time_out_are_taken_as_ours(tmp_path):
    proc = run(tmp_path, "--nproc", "1", "--log_dir", str(tmp_path / "mslog"), "--cluster_time_out=30",
               "--join", "True", *PRINT_RANK)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "mslog" / "latest" / "rank_0.device_0.log").exists()
    assert "--log_dir (msrun and torchrun's flag) is taken as --log-dir" in proc.stderr
    assert "--cluster_time_out (msrun's flag) is taken as --wait-timeout" in proc.stderr
    assert "--join (msrun's flag) is not needed: davincirun always waits for every rank" in proc.stderr
    # msrun's --join takes a value, True or False; the command after it is not eaten.
    assert "[rank 0] rank 0 of 1\n" in proc.stdout


def test_join_without_a_value_leaves_the_command_alone(tmp_path):
    proc = run(tmp_path, "--nproc", "1", "-l", str(tmp_path / "log"), "--join", *PRINT_RANK)
    assert proc.returncode == 0, proc.stderr
    assert "[rank 0] rank 0 of 1\n" in proc.stdout


@pytest.mark.parametrize(
    "flag, says",
    [
        ("--master_addr", "the master is rank 0's server in the rank table"),
        ("--master-port", "set MASTER_PORT in the environment of every server"),
        ("--master_port", "MS_SCHED_PORT with --launch-mode dynamic-cluster"),
        ("--node_rank", "--server-id names it"),
        ("--worker_num", "--nproc N starts N ranks on this machine"),
        ("--nnodes", "run davincirun once on each of them"),
    ],
)
def test_flags_that_mean_nothing_here_are_refused_naming_ours(tmp_path, flag, says):
    proc = run(tmp_path, "--nproc", "1", flag, "1", *PRINT_RANK)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("davincirun: %s is " % flag), proc.stderr
    assert "'s flag, not davincirun's: here " in proc.stderr and says in proc.stderr
    assert proc.stderr.count("\n") == 1


def test_quiet_leaves_the_notes_out(tmp_path):
    proc = run(tmp_path, "-q", "--nproc_per_node", "1", "-l", str(tmp_path / "log"), *PRINT_RANK)
    assert proc.returncode == 0 and proc.stderr == ""
