"""Multi-server jobs for real, across test hosts in network namespaces
(netns_support.py): one `davincirun` per host, as on a cluster, each finding
its server in a shared rank table by its own address, and real PyTorch gloo
training between them with no variable set by hand."""

import os
import re
import sys
import time

import pytest
from conftest import REPO, needs_modules

pytestmark = [pytest.mark.multihost, needs_modules("torch", "sklearn")]

TRAIN = os.path.join(REPO, "examples", "train_digits.py")
EPOCHS = 3


def start_job(hosts, table, extra_args=(), env=None):
    """One davincirun per host, training the digits classifier; returns the Popens."""
    command = ["-r", table, "--", sys.executable, TRAIN, "--epochs", str(EPOCHS), *extra_args]
    return [host.start_davincirun(command, env=env, cwd=host.root) for host in hosts]


def finish(procs, timeout=150):
    """Waits for every agent; returns [(returncode, stdout, stderr)]."""
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        results.append((proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")))
    return results


def first_to_exit(procs, timeout):
    """The first of `procs` to exit (gloo fails on whichever side connects)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                return proc
        time.sleep(0.1)
    raise AssertionError("none of the agents exited within %s s" % timeout)


def epoch_losses(log, rank):
    return [float(x) for x in re.findall(r"rank %d epoch +\d+/%d: train loss ([0-9.]+)" % (rank, EPOCHS), log)]


def check_training(hosts, devices):
    """Every rank trained every epoch with a falling loss; rank 0 saw the
    replicas end identical and a useful accuracy."""
    rank = 0
    for host in hosts:
        for device in range(devices):
            log = host.run_log(rank, device)
            # Each rank reached rank 0 at the address of its server, over the bridge.
            assert "rendezvous tcp://%s:" % hosts[0].address in log, log
            losses = epoch_losses(log, rank)
            assert len(losses) == EPOCHS, log
            assert losses[-1] < losses[0], (rank, losses)
            rank += 1
    first = hosts[0].run_log(0, 0)
    assert "replicas in sync: True" in first, first
    accuracy = re.search(r"final test accuracy: ([0-9.]+) \(\d+ test samples, world size %d\)" % rank, first)
    assert accuracy and float(accuracy.group(1)) > 0.5, first  # chance is 0.10


def run_directory(host):
    return os.readlink(os.path.join(host.log_dir, "latest"))


@pytest.mark.parametrize("count, devices", [(2, 2), (3, 1)])
def test_training_across_hosts_converges_with_nothing_set_by_hand(netns_hosts, tmp_path, count, devices):
    hosts = netns_hosts.hosts[:count]
    table = netns_hosts.rank_table(tmp_path / "table.json", hosts, devices=devices)
    results = finish(start_job(hosts, table))
    for host, (code, out, err) in zip(hosts, results):
        assert code == 0, (host.name, out[-3000:], err[-3000:])
    check_training(hosts, devices)
    # Every server derived the same job id, hence the same run directory name.
    names = {os.path.basename(run_directory(h)) for h in hosts}
    assert len(names) == 1 and names.pop().startswith("job-"), names
    assert not netns_hosts.leftovers()


def test_training_works_where_each_host_name_resolves_to_loopback(netns_hosts, tmp_path):
    """As on a Debian machine, each host's own name resolves to 127.0.1.1:
    gloo, left to itself, would bind there and no other host could reach
    it. GLOO_SOCKET_IFNAME (set by davincirun) makes it bind to eth0."""
    hosts = netns_hosts.hosts[:2]
    for host in hosts:
        host.write_hosts_file(own_address="127.0.1.1")
        assert host.run(["getent", "hosts", host.name]).stdout.split()[0] == "127.0.1.1"
    table = netns_hosts.rank_table(tmp_path / "table.json", hosts, devices=1)
    # The user's own (empty) value is kept: gloo binds to 127.0.1.1 and rank 1
    # cannot reach rank 0 there.
    broken = start_job(hosts, table, env={"GLOO_SOCKET_IFNAME": ""})
    code, _, err = finish([first_to_exit(broken, timeout=90)])[0]
    assert code != 0 and "remote=[127.0.1.1]" in err, err[-3000:]
    for host in hosts:
        host.kill_all()  # the other still waits (the peer channel will end it)
    results = finish(start_job(hosts, table))
    assert [r[0] for r in results] == [0, 0], [r[2][-3000:] for r in results]
    check_training(hosts, 1)


def test_every_host_derives_the_same_job_and_its_own_interface(netns_hosts, tmp_path):
    hosts = netns_hosts.hosts
    table = netns_hosts.rank_table(tmp_path / "table.json", hosts, devices=1)
    seen = {}
    for host in hosts:
        dry = host.run(["davincirun", "--dry-run", "-r", table, "--", "true"])
        assert dry.returncode == 0, dry.stderr
        variables = dict(re.findall(r"^  \+ ([A-Z_]+)=(.*)$", dry.stdout, re.M))
        assert "this machine is server %s: server_id %s matches an address of this machine" % (
            host.address, host.address) in dry.stdout
        assert variables["GLOO_SOCKET_IFNAME"] == "eth0"
        assert variables["NCCL_SOCKET_IFNAME"] == "=eth0"
        assert variables["HCCL_SOCKET_IFNAME"] == "=eth0"
        assert variables["HCCL_IF_IP"] == host.address
        assert variables["MASTER_ADDR"] == hosts[0].address
        seen[host.name] = (variables["JOB_ID"], variables["MASTER_PORT"])
    assert len(set(seen.values())) == 1, seen
    # A variable the user set is the user's, on every host.
    dry = hosts[1].run(["davincirun", "--dry-run", "-r", table, "--", "true"], env={"GLOO_SOCKET_IFNAME": "lo"})
    assert "GLOO_SOCKET_IFNAME=lo" not in dry.stdout  # inherited: not a difference the dry run lists
    assert "+ GLOO_SOCKET_IFNAME" not in dry.stdout
    assert "+ HCCL_IF_IP=%s" % hosts[1].address in dry.stdout


def test_two_jobs_whose_rank_0_share_a_host_train_side_by_side(netns_hosts, tmp_path):
    h1, h2 = netns_hosts.hosts[:2]
    first = netns_hosts.rank_table(tmp_path / "first.json", [h1, h2], device_ids=[0])
    second = netns_hosts.rank_table(tmp_path / "second.json", [h1, h2], device_ids=[1])
    ports = {}
    for name, table in (("first", first), ("second", second)):
        dry = h1.run(["davincirun", "--dry-run", "-r", table, "--", "true"])
        ports[name] = re.search(r"^  \+ MASTER_PORT=(\d+)$", dry.stdout, re.M).group(1)
    assert ports["first"] != ports["second"]

    # Each job has its own log directory on each host: --log-dir after the host's.
    procs = []
    for name, table in (("first", first), ("second", second)):
        for host in (h1, h2):
            log_dir = os.path.join(host.root, name)
            procs.append(host.popen(["davincirun", "--log-dir", log_dir, "-r", table, "--", sys.executable, TRAIN,
                                     "--epochs", str(EPOCHS)], cwd=host.root))
    results = finish(procs)
    assert [r[0] for r in results] == [0, 0, 0, 0], [r[2][-2000:] for r in results]
    jobs = set()
    for name, device in (("first", 0), ("second", 1)):
        for rank, host in enumerate((h1, h2)):
            run = os.path.join(host.root, name, "latest")
            with open(os.path.join(run, "rank_%d.device_%d.log" % (rank, device))) as f:
                log = f.read()
            assert len(epoch_losses(log, rank)) == EPOCHS, log
            assert ":%s" % ports[name] in log  # rendezvous tcp://10.77.0.11:<its port>
            jobs.add((name, os.path.basename(os.readlink(run))))
    assert len({job_id for _, job_id in jobs}) == 2, jobs


def test_master_port_taken_on_the_host_of_rank_0_fails_there_clearly(netns_hosts, tmp_path):
    h1, h2 = netns_hosts.hosts[:2]
    table = netns_hosts.rank_table(tmp_path / "table.json", [h1, h2], devices=1)
    dry = h1.run(["davincirun", "--dry-run", "-r", table, "--", "true"])
    port = int(re.search(r"^  \+ MASTER_PORT=(\d+)$", dry.stdout, re.M).group(1))
    # Something else listens on it on h1 (and only there).
    holder = h1.popen([sys.executable, "-c",
                       "import socket, sys, time\n"
                       "s = socket.socket(); s.bind(('0.0.0.0', %d)); s.listen()\n"
                       "print('listening', flush=True); time.sleep(120)\n" % port])
    assert holder.stdout.readline().strip() == b"listening"
    agent = h1.start_davincirun(["-r", table, "--", sys.executable, TRAIN, "--epochs", "1"])
    code, _, err = finish([agent], timeout=60)[0]
    assert code == 2, err
    assert "MASTER_PORT %d is already in use on this machine" % port in err
    assert "rank 0 listens on it here" in err
    assert not os.listdir(h1.log_dir)  # refused before any run directory was made
