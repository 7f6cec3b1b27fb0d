"""davincirun under real job engines across test hosts (netns_support.py):
Slurm (slurmctld here, one slurmd per host: slurm_support.py) and Open MPI
(mpirun, with an rsh agent that enters the target host's namespaces instead
of ssh: mpi_support.py). One davincirun per host, as the engines start it;
each finds its server by its address, or by the engine's index when the
table names servers otherwise."""

import os
import re
import sys
import time

import pytest
from conftest import REPO, needs_modules

pytestmark = [pytest.mark.multihost, needs_modules("torch", "sklearn")]

TRAIN = os.path.join(REPO, "examples", "train_digits.py")
EPOCHS = 3

# One agent per node, its own log and lock directories named after the node
# (the engines start the same command everywhere, on one file system here).
NODE_SCRIPT = """#!/bin/sh
node_dir="{root}/$(hostname)"
mkdir -p "$node_dir/locks"
export DAVINCIRUN_LOCK_DIR="$node_dir/locks"
exec davincirun --log-dir "$node_dir/log" "$@"
"""

# A rank that traps SIGTERM: the handler takes a while, then records that it
# finished. Stopped any other way (SIGKILL), it leaves no record.
TRAPPING_RANK = """
import os, signal, sys, time
def stop(signum, frame):
    time.sleep(2)
    with open(os.path.join(sys.argv[1], "handler-finished.%s" % os.environ["RANK"]), "w") as f:
        f.write("ok")
    os._exit(143)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def node_script(tmp_path):
    path = tmp_path / "node.sh"
    path.write_text(NODE_SCRIPT.format(root=tmp_path))
    path.chmod(0o755)
    return str(path)


def tables(network, tmp_path, devices=1):
    """Two tables of the same hosts: servers named by their addresses (found
    by address), and by names with host_ip (found by the engine's index)."""
    by_address = network.rank_table(tmp_path / "by_address.json", network.hosts, devices=devices)
    by_name = network.rank_table(tmp_path / "by_name.json", network.hosts, devices=devices,
                                 server_ids=["node-%s" % h.name for h in network.hosts])
    return {"address": by_address, "engine index": by_name}


def node_log(tmp_path, host, rank, device=0):
    with open(tmp_path / host.name / "log" / "latest" / ("rank_%d.device_%d.log" % (rank, device))) as f:
        return f.read()


def check_training(tmp_path, hosts):
    for rank, host in enumerate(hosts):
        log = node_log(tmp_path, host, rank)
        losses = [float(x) for x in re.findall(r"epoch +\d+/%d: train loss ([0-9.]+)" % EPOCHS, log)]
        assert len(losses) == EPOCHS and losses[-1] < losses[0], log
        assert "rendezvous tcp://%s:" % hosts[0].address in log, log
    assert "replicas in sync: True" in node_log(tmp_path, hosts[0], 0)


def running(host, needle):
    """Pids on `host` whose command line contains `needle`."""
    found = []
    for pid in host.pids():
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                if needle.encode() in f.read():
                    found.append(pid)
        except OSError:
            pass
    return found


def wait_gone(hosts, needle, timeout):
    """Seconds until no process matching `needle` is left on any host; fails after `timeout`."""
    start = time.monotonic()
    while any(running(h, needle) for h in hosts):
        assert time.monotonic() - start < timeout, {h.name: running(h, needle) for h in hosts}
        time.sleep(0.05)
    return time.monotonic() - start


# -- Slurm --


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    from netns_support import Network
    from slurm_support import SlurmCluster, require_slurm

    require_slurm()
    root = tmp_path_factory.mktemp("slurm-cluster")
    network = Network(2, root / "hosts", machine_address=True)
    cluster = None
    try:
        cluster = SlurmCluster(network, root / "slurm", kill_wait=10)
        yield cluster
    finally:
        if cluster:
            cluster.close()
        network.close()


@pytest.mark.parametrize("identity", ["address", "engine index"])
def test_srun_trains_across_two_nodes(slurm, tmp_path, identity):
    hosts = slurm.network.hosts
    table = tables(slurm.network, tmp_path)[identity]
    node = node_script(tmp_path)
    dry = slurm.srun(["-N2", "--ntasks-per-node=1", "-K", node, "--dry-run", "-r", table, "--", "true"])
    out, err = dry.communicate(timeout=60)
    assert dry.returncode == 0, err
    reason = "SLURM_NODEID 1, SLURM_STEP_NUM_NODES 2 is the position" if identity == "engine index" else (
        "server_id %s matches an address of this machine" % hosts[1].address)
    assert reason in out.decode(), out.decode()
    assert out.decode().count("+ GLOO_SOCKET_IFNAME=eth0") == 2

    proc = slurm.srun(["-N2", "--ntasks-per-node=1", "-K", node, "-r", table, "--", sys.executable, TRAIN,
                       "--epochs", str(EPOCHS)])
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, (out.decode()[-3000:], err.decode()[-3000:])
    check_training(tmp_path, hosts)


def test_a_rank_failing_on_one_node_ends_the_step_everywhere(slurm, tmp_path):
    hosts = slurm.network.hosts
    table = tables(slurm.network, tmp_path)["address"]
    proc = slurm.srun(["-N2", "--ntasks-per-node=1", "-K", node_script(tmp_path), "-r", table, "--",
                       sys.executable, TRAIN, "--epochs", "50", "--fail-at-epoch", "2", "--fail-rank", "1"])
    out, err = proc.communicate(timeout=180)
    assert proc.returncode != 0
    assert "rank 1: injected failure at epoch 2" in node_log(tmp_path, hosts[1], 1)
    # The step is over: no rank and no agent is left on either node.
    wait_gone(hosts, TRAIN, timeout=5)
    wait_gone(hosts, "davincirun", timeout=5)


def test_scancel_leaves_a_rank_trapping_sigterm_its_handler(slurm, tmp_path):
    """scancel: Slurm sends SIGTERM to every process of the step at once
    (agent, supervisor, ranks), SIGKILL after KillWait (10 s). The agent must
    take that as one stop and give the ranks their grace period (10 s), so a
    rank whose SIGTERM handler needs 2 s finishes it."""
    hosts = slurm.network.hosts
    table = tables(slurm.network, tmp_path)["address"]
    rank = tmp_path / "trapping_rank.py"
    rank.write_text(TRAPPING_RANK)
    proc = slurm.srun(["-N2", "--ntasks-per-node=1", "-K", "-J", "trap-" + tmp_path.name, node_script(tmp_path),
                       "-r", table, "--", sys.executable, str(rank), str(tmp_path)])
    ready = 0
    deadline = time.monotonic() + 60
    while ready < 2 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        assert line, proc.stderr.read().decode()
        ready += line.rstrip().endswith(b"ready")
    assert ready == 2
    job = slurm.jobs()
    assert len(job) == 1, job
    assert slurm.command(["scancel", job[0]]).returncode == 0
    proc.communicate(timeout=60)
    for r in range(2):
        assert (tmp_path / ("handler-finished.%d" % r)).exists(), "rank %d was killed inside its handler" % r
    wait_gone(hosts, str(rank), timeout=5)
    # Slurm lists the job while it completes (epilog, accounting) for a moment.
    deadline = time.monotonic() + 20
    while slurm.jobs() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not slurm.jobs()


# -- Open MPI --


@pytest.fixture
def mpi_hosts(tmp_path):
    """Two test hosts, torn down after the test."""
    from mpi_support import require_mpirun
    from netns_support import Network

    require_mpirun()
    network = Network(2, tmp_path / "hosts")
    yield network
    network.close()


def mpirun(network, tmp_path, command, timeout=180):
    """mpirun (on h1) of `command` once per host; returns (returncode, stdout, stderr) as bytes."""
    from mpi_support import mpirun_argv

    proc = network.hosts[0].popen(mpirun_argv(network, tmp_path, command), cwd=str(tmp_path))
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


@pytest.mark.parametrize("identity", ["address", "engine index"])
def test_mpirun_trains_with_one_agent_per_host(mpi_hosts, tmp_path, identity):
    hosts = mpi_hosts.hosts
    table = tables(mpi_hosts, tmp_path)[identity]
    node = node_script(tmp_path)
    code, out, err = mpirun(mpi_hosts, tmp_path, [node, "--dry-run", "-r", table, "--", "true"])
    assert code == 0, (out, err)
    reason = "OMPI_COMM_WORLD_RANK 1, OMPI_COMM_WORLD_SIZE 2 is the position" if identity == "engine index" else (
        "server_id %s matches an address of this machine" % hosts[1].address)
    assert reason in out.decode(), out.decode()

    code, out, err = mpirun(mpi_hosts, tmp_path, [node, "-r", table, "--", sys.executable, TRAIN, "--epochs",
                                                  str(EPOCHS)])
    assert code == 0, (out.decode()[-3000:], err.decode()[-3000:])
    check_training(tmp_path, hosts)


def test_a_rank_failing_under_mpirun_ends_the_job_everywhere(mpi_hosts, tmp_path):
    hosts = mpi_hosts.hosts
    table = tables(mpi_hosts, tmp_path)["address"]
    code, out, err = mpirun(mpi_hosts, tmp_path, [node_script(tmp_path), "-r", table, "--", sys.executable, TRAIN,
                                                  "--epochs", "50", "--fail-at-epoch", "2", "--fail-rank", "1"])
    assert code != 0
    assert "rank 1: injected failure at epoch 2" in node_log(tmp_path, hosts[1], 1)
    wait_gone(hosts, TRAIN, timeout=5)
    wait_gone(hosts, "davincirun", timeout=5)


def test_no_terminal_escapes_in_mpirun_output(mpi_hosts, tmp_path):
    """mpirun gives each process a pseudo-terminal for its output; davincirun
    must still print plain lines: no colours, no status line."""
    table = tables(mpi_hosts, tmp_path)["address"]
    code, out, err = mpirun(mpi_hosts, tmp_path, [node_script(tmp_path), "-r", table, "--", sys.executable, "-c",
                                                  "import os\nfor i in range(3): print('line', i, os.environ['RANK'])"])
    assert code == 0, (out, err)
    assert b"\x1b" not in out + err, (out + err)[:2000]
    assert out.count(b"line 2") == 2, out
