"""Restarts of a job that spans servers (docs/restarts.md), with two
"servers" on this machine's loopback (127.0.0.1 holds rank 0 and the hub,
127.0.0.2 rank 1), each a davincirun of its own: a failure on either server
restarts both, the hub decides for the job and both keep the same record;
a failure that repeats, restarts used up, a server lost or a stop end both.
Across real hosts, with real training: tests/python/engines/test_multi_host.py."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import assert_gone

SERVERS = ["127.0.0.1", "127.0.0.2"]

# Each rank, in mode "how:R[:seconds]", runs `seconds` (default 0.5) and
# then: "once:R" fails (exit 1) on rank R in the first attempt only;
# "always:R" fails on rank R in every attempt the same way; "new:R" fails on
# rank R every time after a line naming the attempt. The others exit 0.
SCRIPT = r"""
import os, sys, time
rank = int(os.environ["RANK_ID"])
attempt = int(os.environ["DAVINCIRUN_RESTART_COUNT"])
how, failing, seconds = (sys.argv[1] + ":0.5").split(":")[:3]
if how == "always":  # the same lines every time: plain numbers that change are new lines (docs/restarts.md)
    print("rank %d up" % rank, flush=True)
else:
    print("rank %d attempt %d pid %d up, MASTER_PORT %s" % (rank, attempt, os.getpid(), os.environ["MASTER_PORT"]),
          flush=True)
fails = rank == int(failing) and (how != "once" or attempt == 0)
if how == "new" and fails:
    print("rank %d reached step %d" % (rank, 10 * attempt + 7), flush=True)
time.sleep(float(seconds))
if fails:
    raise ValueError("rank %d broke on purpose" % rank)
time.sleep(0.5)
print("rank %d done" % rank, flush=True)
"""


def two_server_table(path):
    path.write_text(json.dumps({
        "version": "1.0", "server_count": "2", "status": "completed",
        "server_list": [{"server_id": server, "device": [{"device_id": str(i), "device_ip": "192.168.1.%d" % (i + 1),
                                                          "rank_id": str(i)}]}
                        for i, server in enumerate(SERVERS)]}))
    return path


class Server:
    def __init__(self, tmp_path, index, mode, *extra, log=None):
        self.log_dir = tmp_path / (log or "log%d" % index)
        script = tmp_path / "script.py"
        script.write_text(SCRIPT)
        self.proc = subprocess.Popen(
            ["davincirun", "-r", str(two_server_table(tmp_path / "table.json")), "--server-id", SERVERS[index],
             "-l", str(self.log_dir), *extra, sys.executable, str(script), mode],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.output = ""

    def wait(self, timeout=60):
        self.output = self.proc.communicate(timeout=timeout)[0].decode(errors="replace")
        return self.proc.returncode

    def summary(self):
        (run,) = [p for p in self.log_dir.iterdir() if p.is_dir() and not p.is_symlink()]
        return json.loads((run / "summary.json").read_text())

    def supervisor(self):
        """The job's supervisor process (its agent): the child of davincirun."""
        found = subprocess.check_output(["pgrep", "-P", str(self.proc.pid), "davincirun-sup"])
        return int(found.split()[0])

    def pids(self):
        return [int(line.split(" pid ")[1].split()[0]) for line in self.output.splitlines() if " up, " in line]


@pytest.fixture
def servers(tmp_path):
    started = []

    def start(mode_a, mode_b, *extra, again=False):
        """Server A and B; with `again`: server B only, started once more."""
        if again:
            started.append(Server(tmp_path, 1, mode_b, *extra, log="log1-again"))
            return started[-1]
        started.extend([Server(tmp_path, 0, mode_a, *extra), Server(tmp_path, 1, mode_b, *extra)])
        return started[-2], started[-1]

    yield start
    for s in started:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()


def joined(hub):
    """Waits until the hub's journal says both agents are connected."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        journal = "".join(p.read_text() for p in hub.log_dir.rglob("events.txt"))
        if "the agents of all 2 servers are connected" in journal:
            return
        time.sleep(0.05)
    raise AssertionError("the agents did not meet")


def wait_gone(pid, timeout=20):
    deadline = time.monotonic() + timeout
    while os.path.exists("/proc/%d" % pid) and " Z " not in open("/proc/%d/stat" % pid).read():
        assert time.monotonic() < deadline, "pid %d still running" % pid
        time.sleep(0.05)


def decisions(server):
    return [(a["attempt"], a["restarted"], a["decision"]) for a in server.summary()["attempts"]]


@pytest.mark.parametrize("failing", [1, 0], ids=["a member's rank", "the hub's rank"])
def test_a_rank_failing_on_either_server_restarts_both(servers, failing):
    mode = "once:%d" % failing
    a, b = servers(mode, mode, "--max-restarts", "2", "--restart-delay", "0.2")
    assert a.wait() == 0, a.output
    assert b.wait() == 0, b.output
    where = SERVERS[failing]
    for server in (a, b):
        assert decisions(server) == [(1, True, "restarted (1 of 2 restarts)"), (2, False, "")], server.output
        first = server.summary()["attempts"][0]
        assert first["root_cause"] == "ValueError: rank %d broke on purpose" % failing, first
        assert "all 1 rank(s) exited 0 in attempt 2, after 1 restart(s)" in server.output, server.output
        # Every attempt's ports are new, and alike on both servers.
        ports = [line.split("MASTER_PORT ")[1] for line in server.output.splitlines() if " up, " in line]
        assert len(ports) == 2 and ports[0] != ports[1], ports
    assert [line.split("MASTER_PORT ")[1] for line in a.output.splitlines() if " up, " in line] == \
        [line.split("MASTER_PORT ")[1] for line in b.output.splitlines() if " up, " in line]
    other = a if failing == 1 else b
    assert ("attempt 1 of 3: rank %d on server %s failed with exit code 1 (ValueError: "
            "rank %d broke on purpose); restarting the job in 0.2 s (attempt 2 of 3)" % (failing, where, failing)
            ) in other.output, other.output
    assert_gone(a.pids() + b.pids())


def test_a_failure_that_repeats_on_a_member_stops_both_after_two_attempts(servers):
    a, b = servers("always:1", "always:1", "--max-restarts", "5", "--restart-delay", "0.1")
    assert b.wait() == 1, b.output
    assert a.wait() == 1, a.output
    for server in (a, b):
        (first, second) = decisions(server)
        assert first == (1, True, "restarted (1 of 5 restarts)"), server.output
        assert second[:2] == (2, False), second
        assert second[2].startswith("not restarted: it failed as attempt 1 did (rank 1 with exit code 1, "
                                    "ValueError: rank 1 broke on purpose)"), second
    assert a.summary()["stop_reason"] == "peer_failed" and b.summary()["stop_reason"] == "rank_failed"


def test_restarts_used_up_end_both_with_every_attempt_on_record(servers):
    a, b = servers("new:1", "new:1", "--max-restarts", "1", "--restart-delay", "0")
    assert b.wait() == 1, b.output
    assert a.wait() == 1, a.output
    for server in (a, b):
        assert decisions(server) == [(1, True, "restarted (1 of 1 restarts)"),
                                     (2, False, "not restarted: no restarts left (max_restarts 1)")], server.output
    assert "rank 1 reached step 17" in b.output


@pytest.mark.parametrize("killed", ["supervisor", "launcher"])
def test_a_member_lost_and_started_again_rejoins_the_next_attempt(servers, killed):
    a, b = servers("once:9:3", "once:9:3", "--max-restarts", "2", "--restart-delay", "0.1")
    joined(a)
    supervisor = b.supervisor()
    killed_at = time.monotonic()
    os.kill(supervisor if killed == "supervisor" else b.proc.pid, signal.SIGKILL)
    b.wait()
    wait_gone(supervisor)  # its devices are free again, as on a node an engine restarts
    # A supervisor whose launcher is gone leaves at once: the job's record, which it no longer
    # waits for, comes at the job's end (it waited the 15 s a member waits for it after a stop).
    assert time.monotonic() - killed_at < 5
    # The engine starts server B's davincirun again: it rejoins the job's next attempt.
    again = servers(None, "once:9:3", "--max-restarts", "2", "--restart-delay", "0.1", again=True)
    assert again.wait() == 0, again.output
    assert a.wait() == 0, a.output
    assert decisions(a) == [(1, True, "restarted (1 of 2 restarts)"), (2, False, "")], a.output
    first = a.summary()["attempts"][0]
    assert first["stop_reason"] == "peer_lost", first
    assert "server 127.0.0.2 rejoined the job (attempt 2)" in a.output, a.output
    # It ran attempt 2 only, as every rank of attempt 2 does: same restart count, same port.
    assert decisions(again) == [(2, False, "")], again.output
    assert "rank 1 attempt 1 pid" in again.output and "rank 1 attempt 0" not in again.output, again.output
    ports = [line.split("MASTER_PORT ")[1] for line in a.output.splitlines() + again.output.splitlines()
             if " attempt 1 pid " in line]
    assert len(ports) == 2 and ports[0] == ports[1], ports
    assert_gone(a.pids() + again.pids())


def test_a_member_that_does_not_rejoin_ends_the_job_at_the_wait_timeout(servers):
    a, b = servers("once:9:30", "once:9:30", "--max-restarts", "2", "--restart-delay", "0", "--wait-timeout", "2")
    joined(a)
    os.kill(b.supervisor(), signal.SIGKILL)
    assert a.wait() == 1, a.output
    b.wait()
    (first, second) = decisions(a)
    assert first == (1, True, "restarted (1 of 2 restarts)"), a.output
    assert second[:2] == (2, False) and second[2].startswith("not restarted: "), second
    assert "server 127.0.0.2 did not rejoin the job within 2.0 s after it was lost" in a.output, a.output
    assert_gone(a.pids())
    # Server B's rank lost its supervisor: killed, it waits for this
    # machine's init to reap it (a zombie here, where init may not).
    for pid in b.pids():
        assert not os.path.exists("/proc/%d" % pid) or " Z " in open("/proc/%d/stat" % pid).read(), pid


def test_a_stop_on_the_member_during_an_attempt_ends_both_without_a_restart(servers):
    a, b = servers("once:9:30", "once:9:30", "--max-restarts", "2")
    joined(a)
    b.proc.send_signal(signal.SIGINT)
    assert b.wait() == 130, b.output
    assert a.wait() == 1, a.output
    for server in (a, b):
        (only,) = decisions(server)
        assert only[:2] == (1, False) and only[2].startswith("not restarted: "), only
    assert a.summary()["stop_reason"] == "peer_stopped"
