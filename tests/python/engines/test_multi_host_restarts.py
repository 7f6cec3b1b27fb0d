"""Restarts across real hosts (network namespaces, netns_support.py): PyTorch
DDP training of examples/train_digits.py, one rank on each of two hosts,
with a checkpoint per epoch on storage both hosts share (as a cluster's
shared file system). A rank SIGKILLed on the second host restarts the
job on both, which resumes and ends as a run never interrupted ends; the
second host's davincirun SIGKILLed and started again rejoins the job's
next attempt, which ends the same way."""

import os
import re
import signal
import sys
import time

import pytest
from conftest import REPO, needs_modules
from log_watch import wait_for_text
from test_multi_host import finish

pytestmark = [pytest.mark.multihost, pytest.mark.slow, needs_modules("torch", "sklearn")]

TRAIN = os.path.join(REPO, "examples", "train_digits.py")
EPOCHS = 8
RESTARTS = ("--max-restarts", "2", "--restart-delay", "0.2")


def start(host, table, checkpoint, logs, *options):
    """davincirun on `host`, its logs in <host root>/<logs> (a --log-dir after the host's wins)."""
    return host.start_davincirun(["--log-dir", os.path.join(host.root, logs), *options, "-r", table, "--",
                                  sys.executable, TRAIN, "--epochs", str(EPOCHS), "--checkpoint", checkpoint],
                                 cwd=host.root)


def last_log(host, logs, rank):
    """Rank `rank`'s log of the last attempt in the host's latest run in `logs`."""
    run = os.path.join(host.root, logs, "latest")
    names = sorted((n for n in os.listdir(run) if n.startswith("rank_%d." % rank)), key=lambda n: (len(n), n))
    with open(os.path.join(run, names[-1])) as f:
        return f.read()


def outcome(log):
    """The accuracy line and the parameter checksum rank 0 printed."""
    accuracy = re.search(r"^final test accuracy: .*$", log, re.M).group(0)
    return accuracy, float(re.search(r"parameter checksum: (\S+)", log).group(1))


@pytest.fixture
def two_hosts(netns_hosts, tmp_path):
    hosts = netns_hosts.hosts[:2]
    table = netns_hosts.rank_table(tmp_path / "table.json", hosts, devices=1)
    # The run never interrupted, for what every restarted run must end with.
    results = finish([start(h, table, str(tmp_path / "plain-ckpt"), "plain") for h in hosts], timeout=300)
    assert [r[0] for r in results] == [0, 0], [r[2][-3000:] for r in results]
    expected = outcome(last_log(hosts[0], "plain", 0))
    for host in hosts:
        host.kill_all()
    yield hosts, table, expected
    assert not netns_hosts.leftovers()


def rank_1_past_checkpoint_3(host):
    """Rank 1's pid once rank 0's checkpoint holds epoch 3 or later. Rank 0 saves an epoch after
    printing it, so rank 1's line of epoch 3 can come before that save; its line of epoch 4 cannot,
    as epoch 4's gradients are averaged with rank 0, which starts epoch 4 after the save."""
    deadline = time.monotonic() + 60
    while not os.path.isdir(os.path.join(host.root, "restarted", "latest")):
        assert time.monotonic() < deadline, "no run directory"
        time.sleep(0.05)
    path = os.path.join(os.path.realpath(os.path.join(host.root, "restarted", "latest")), "rank_1.device_0.log")
    wait_for_text(path, "rank 1 epoch  4/%d" % EPOCHS, timeout=180.0)
    with open(path) as f:
        return int(re.search(r", pid (\d+)", f.read()).group(1))


def check_resumed(hosts, expected):
    resumed = last_log(hosts[0], "restarted", 0)
    match = re.search(r"rank 0: resumed after epoch (\d+) from .* \(restart 1\)", resumed)
    assert match and int(match.group(1)) >= 3, resumed[-2000:]
    assert "epoch  1/%d" % EPOCHS not in resumed
    accuracy, checksum = outcome(resumed)
    assert accuracy == expected[0] and "replicas in sync: True" in resumed, (accuracy, expected)
    assert checksum == pytest.approx(expected[1], rel=1e-5), (checksum, expected)


def test_a_rank_killed_on_the_second_host_restarts_both_hosts_which_resume(two_hosts, tmp_path):
    hosts, table, expected = two_hosts
    procs = [start(h, table, str(tmp_path / "ckpt"), "restarted", *RESTARTS) for h in hosts]
    killed_at = None
    try:
        os.kill(rank_1_past_checkpoint_3(hosts[1]), signal.SIGKILL)
        killed_at = time.monotonic()
    finally:
        results = finish(procs, timeout=300)
    assert [r[0] for r in results] == [0, 0], [r[2][-3000:] for r in results]
    hub_err = results[0][2]
    assert "attempt 1 of 3: rank 1 on server %s failed with signal 9 (SIGKILL)" % hosts[1].address in hub_err, hub_err
    assert "restarting the job in 0.2 s (attempt 2 of 3)" in hub_err
    assert killed_at is not None
    check_resumed(hosts, expected)


def test_the_second_hosts_davincirun_killed_and_started_again_rejoins_the_job(two_hosts, tmp_path):
    hosts, table, expected = two_hosts
    checkpoint = str(tmp_path / "ckpt")
    hub, member = [start(h, table, checkpoint, "restarted", *RESTARTS) for h in hosts]
    rank_1_past_checkpoint_3(hosts[1])
    member.kill()  # SIGKILL: its supervisor stops the rank and leaves the job
    member.wait()
    assert hosts[1].wait_empty(30) == []  # as an engine restarting the server's container
    again = start(hosts[1], table, checkpoint, "again", *RESTARTS)
    results = finish([hub, again], timeout=300)
    assert [r[0] for r in results] == [0, 0], [r[2][-3000:] for r in results]
    hub_err = results[0][2]
    assert "server %s left the job: davincirun is gone" % hosts[1].address in hub_err, hub_err
    assert "server %s rejoined the job (attempt 2)" % hosts[1].address in hub_err, hub_err
    check_resumed(hosts, expected)
