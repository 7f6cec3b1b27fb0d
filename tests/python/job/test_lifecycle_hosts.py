"""Cells of the job's life cycle across two real test hosts (network
namespaces on a bridge, netns_support.py), where servers meet over a real
network rather than this machine's loopback: a failure and a stop told
across hosts, a server that waits for the others stopped there, a member
whose hub never comes, a launcher killed on one host. Each ends with no
process left on either host and both hosts' devices free."""

import os
import signal
import sys
import time

import pytest
from lifecycle_support import RANKS

pytestmark = pytest.mark.multihost


@pytest.fixture
def hosts(tmp_path):
    from netns_support import Network

    network = Network(2, tmp_path / "hosts")
    yield network
    network.close()


class HostJob:
    """One `davincirun` on one test host, running lifecycle_support's rank program."""

    def __init__(self, host, table, script, mode, *options, seconds=None, env=None):
        self.host = host
        argv = ["-r", table, *options, "--", sys.executable, script, mode]
        if seconds is not None:
            argv.append(str(seconds))
        self.proc = host.start_davincirun(argv, env=env)
        self.out = self.err = ""

    def wait(self, timeout=40):
        out, err = self.proc.communicate(timeout=timeout)
        self.out, self.err = out.decode(errors="replace"), err.decode(errors="replace")
        return self.proc.returncode

    def summary(self):
        import json

        with open(os.path.join(self.host.log_dir, "latest", "summary.json")) as f:
            return json.load(f)

    def journal(self):
        with open(os.path.join(self.host.log_dir, "latest", "events.txt")) as f:
            return f.read()


def setup(hosts, tmp_path):
    table = hosts.rank_table(tmp_path / "table.json", hosts.hosts)
    script = str(tmp_path / "ranks.py")
    with open(script, "w") as f:
        f.write(RANKS)
    return table, script


def wait_for(predicate, timeout=20):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    return predicate()


def all_clean(hosts, table):
    """No process left on either host, and a new job could take each host's devices."""
    for host in hosts.hosts:
        assert host.wait_empty(5) == [], host.name
        check = host.run(["davincirun", "--dry-run", "-r", table, "--wait-timeout", "0", "true"])
        assert check.returncode == 0, check.stderr


def journal_has(job, text):
    try:
        return text in job.journal()
    except OSError:
        return False


def test_running_rank_failed_is_told_across_hosts(hosts, tmp_path):
    table, script = setup(hosts, tmp_path)
    a = HostJob(hosts.hosts[0], table, script, "working")
    b = HostJob(hosts.hosts[1], table, script, "fail1", seconds=1.0)
    assert b.wait() == 3, b.err
    assert a.wait() == 3, a.err
    assert "the job was stopped because rank 1 on server %s failed with exit code 3" % hosts.hosts[1].address in a.err
    assert a.summary()["stop_reason"] == "peer_failed"
    assert "running -> stopping on peer_failed" in a.journal()
    all_clean(hosts, table)


def test_waiting_for_servers_stop_request_stops_every_host(hosts, tmp_path):
    table, script = setup(hosts, tmp_path)
    a = HostJob(hosts.hosts[0], table, script, "exit", seconds=0.3)
    b = HostJob(hosts.hosts[1], table, script, "working")
    assert wait_for(lambda: journal_has(a, "-> waiting_for_servers on "))
    a.proc.send_signal(signal.SIGINT)
    assert a.wait() == 130, a.err
    assert b.wait() == 1, b.err
    assert a.summary()["stopped_in"] == "waiting_for_servers"
    assert "while this server waited for server %s (running): stopped waiting" % hosts.hosts[1].address in a.err
    assert b.summary()["stop_reason"] == "peer_stopped"
    assert "server %s was stopped (stop requested)" % hosts.hosts[0].address in b.err
    all_clean(hosts, table)


def test_waiting_for_servers_hub_unreachable_gives_up_at_the_wait_timeout(hosts, tmp_path):
    table, script = setup(hosts, tmp_path)
    b = HostJob(hosts.hosts[1], table, script, "exit", "--wait-timeout", "2", seconds=0.2)
    assert b.wait() == 1, b.err
    summary = b.summary()
    assert (summary["stop_reason"], summary["stopped_in"]) == ("peer_lost", "waiting_for_servers")
    assert "server %s could not be reached: its agent at %s:" % ((hosts.hosts[0].address,) * 2) in b.err
    all_clean(hosts, table)


def test_running_launcher_gone_on_one_host_stops_the_other(hosts, tmp_path):
    table, script = setup(hosts, tmp_path)
    a = HostJob(hosts.hosts[0], table, script, "working")
    b = HostJob(hosts.hosts[1], table, script, "working")
    assert wait_for(lambda: journal_has(a, "running") and journal_has(b, "running"))
    time.sleep(1.0)  # the agents have met
    b.proc.kill()
    sent = time.monotonic()
    assert a.wait() == 1, a.err
    assert time.monotonic() - sent < 3
    assert a.summary()["stop_reason"] == "peer_stopped"
    assert "davincirun is gone" in a.err
    all_clean(hosts, table)
