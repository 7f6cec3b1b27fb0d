"""The peer channel across real hosts (network namespaces, netns_support.py):
one davincirun per host, ranks joined by PyTorch gloo, and something going
wrong on one host. Without the channel the other hosts learn only through
gloo (5-9 s for a killed rank, 127-129 s for a lost host); with it every
rank on every host is gone within 1 s of a failure, and within the peer
timeout + 1 s of a lost agent or link. Every host's report names the first
failure: its server, rank and cause."""

import os
import re
import signal
import sys
import time

import pytest
from conftest import needs_modules

pytestmark = [pytest.mark.multihost, needs_modules("torch")]

# Joins the job's gloo group, then all-reduces every 50 ms: a job that runs
# until something stops it, as a training loop does.
STEADY = r"""
import os, sys, time
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
print("rank %d pid %d joined world %d" % (rank, os.getpid(), dist.get_world_size()), flush=True)
if sys.argv[1:] == ["fail"] and rank == int(os.environ.get("FAIL_RANK", "-1")):
    time.sleep(2)
    raise RuntimeError("rank %d hit a bad batch" % rank)
t = torch.ones(4)
while True:
    dist.all_reduce(t)
    time.sleep(0.05)
"""

PEER_TIMEOUT = 3.0


def start(hosts, table, script, *args, extra=(), env=None):
    return [h.start_davincirun(["-r", table, "--peer-timeout", str(PEER_TIMEOUT), *extra, "--", sys.executable,
                                str(script), *args], env=env, cwd=h.root) for h in hosts]


def rank_pids(host):
    """The ranks running on `host`: python processes with a RANK_ID."""
    found = {}
    for pid in host.pids():
        try:
            with open("/proc/%d/environ" % pid, "rb") as f:
                env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
            with open("/proc/%d/comm" % pid) as f:
                comm = f.read().strip()
        except OSError:
            continue
        if b"RANK_ID" in env and comm.startswith("python"):
            found[int(env[b"RANK_ID"])] = pid
    return found


def wait_joined(hosts, world, timeout=60):
    """Until every rank of the job runs (and gloo had time to connect)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sum(len(rank_pids(h)) for h in hosts) == world:
            time.sleep(3)
            return
        time.sleep(0.1)
    raise AssertionError("the job's ranks did not start")


def gone_after(hosts, since, timeout):
    """Seconds from `since` until no rank runs on any host."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(rank_pids(h) for h in hosts):
            return time.monotonic() - since
        time.sleep(0.01)
    raise AssertionError("ranks still run %s s later: %s" % (timeout, [rank_pids(h) for h in hosts]))


def reports(procs, timeout=30):
    out = []
    for proc in procs:
        _, err = proc.communicate(timeout=timeout)
        out.append((proc.returncode, err.decode(errors="replace")))
    return out


@pytest.fixture
def job(netns_hosts, tmp_path):
    script = tmp_path / "steady.py"
    script.write_text(STEADY)
    hosts = netns_hosts.hosts
    table = netns_hosts.rank_table(tmp_path / "table.json", hosts, devices=1)
    return hosts, table, script


def test_a_rank_killed_on_one_host_stops_every_host_within_a_second(job):
    hosts, table, script = job
    procs = start(hosts, table, script)
    wait_joined(hosts, 3)
    killed_at = time.monotonic()
    os.kill(rank_pids(hosts[1])[1], signal.SIGKILL)
    assert gone_after(hosts, killed_at, 10) < 1.0
    results = reports(procs)
    assert [code for code, _ in results] == [137, 137, 137], results
    for _, err in (results[0], results[2]):
        expected = "the job was stopped because rank 1 on server %s failed with signal 9 (SIGKILL)" % hosts[1].address
        assert expected in err, err


def test_a_rank_failing_on_one_host_stops_every_host_within_a_second(job):
    hosts, table, script = job
    procs = start(hosts, table, script, "fail", env={"FAIL_RANK": "1"})
    wait_joined(hosts, 3)
    # Rank 1 raises 2 s after joining; time from its own exit.
    deadline = time.monotonic() + 30
    while 1 in rank_pids(hosts[1]) and time.monotonic() < deadline:
        time.sleep(0.005)
    failed_at = time.monotonic()
    assert gone_after(hosts, failed_at, 10) < 1.0
    results = reports(procs)
    assert [code for code, _ in results] == [1, 1, 1], results
    for _, err in (results[0], results[2]):
        assert "the job was stopped because rank 1 on server %s failed with exit code 1" % hosts[1].address in err, err
        assert "RuntimeError: rank 1 hit a bad batch" in err  # the root cause, from h2's log
    assert "rank 1 (pid" in results[1][1] and "RuntimeError: rank 1 hit a bad batch" in results[1][1]


@pytest.mark.parametrize("victim", ["davincirun", "davincirun-supervisor"])
def test_an_agent_killed_on_one_host_stops_every_host_within_a_second(job, victim):
    hosts, table, script = job
    procs = start(hosts, table, script)
    wait_joined(hosts, 3)
    if victim == "davincirun":
        pid = procs[1].pid
    else:
        pid = next(p for p in hosts[1].pids() if open("/proc/%d/comm" % p).read().startswith("davincirun-sup"))
    killed_at = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    assert gone_after(hosts, killed_at, 10) < 1.0
    results = reports([procs[0], procs[2]])
    for code, err in results:
        assert code == 1, err
        assert "the job was stopped because" in err and hosts[1].address in err, err


def test_a_cut_link_stops_every_host_within_the_peer_timeout(job):
    hosts, table, script = job
    procs = start(hosts, table, script)
    wait_joined(hosts, 3)
    cut_at = time.monotonic()
    hosts[2].cut_link()
    took = gone_after(hosts, cut_at, PEER_TIMEOUT + 10)
    assert took < PEER_TIMEOUT + 1.0, took
    results = reports(procs)
    # The two hosts still connected lost h3; h3 lost the hub.
    for code, err in results[:2]:
        assert code == 1, err
        assert re.search(r"server %s was lost [\d.]+ s after the agents met: no heartbeat from its agent"
                         % re.escape(hosts[2].address), err), err
    code, err = results[2]
    assert code == 1, err
    assert "server %s was lost" % hosts[0].address in err, err
