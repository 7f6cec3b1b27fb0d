"""Sixteen servers of one job on this machine (server_id 127.0.0.1-16, the
whole 127/8 being loopback), each a `davincirun --server-id` of its own with
one rank, joined by the peer channel: when the last server's rank fails,
every rank on every server is gone within a second, every launcher says the
job failed because of that server, and nothing is left. The same at 64 and
256 servers, with figures, is bench/many_servers.py."""

import json
import os
import subprocess
import sys
import time

import pytest
from process_scan import alive

SERVERS = 16

RANK = r"""
import os, sys, time
marks = sys.argv[1]
rank = int(os.environ["RANK_ID"])

def mark(name, text):
    # Written whole, then renamed: a reader never sees an empty mark.
    with open(os.path.join(marks, ".%s.tmp" % name), "w") as f:
        f.write(text)
    os.rename(os.path.join(marks, ".%s.tmp" % name), os.path.join(marks, name))

mark("up.%d" % rank, str(os.getpid()))
if rank == int(os.environ["RANK_SIZE"]) - 1:
    while len([n for n in os.listdir(marks) if n.startswith("up.")]) < int(os.environ["RANK_SIZE"]):
        time.sleep(0.01)
    mark("failed", repr(time.time()))
    sys.exit(3)
time.sleep(600)
"""


def server(index):
    return "127.0.0.%d" % (index + 1)


@pytest.fixture
def launch(job_env):
    """Starts `davincirun ARGS` locking devices in `lock_dir` (output: one
    text pipe); killed at the end if still running. job_env's check: no
    process of the job is left."""
    started = []

    def start(lock_dir, *args):
        # Every "server" has its own device 0: its own lock directory.
        env = dict(os.environ, DAVINCIRUN_LOCK_DIR=str(lock_dir), **job_env)
        proc = subprocess.Popen(["davincirun", *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=env, text=True, errors="replace")
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_a_failure_on_the_last_of_16_servers_stops_every_server_within_a_second(tmp_path, launch):
    table = tmp_path / "table.json"
    table.write_text(json.dumps({
        "version": "1.0", "server_count": str(SERVERS), "status": "completed",
        "server_list": [{"server_id": server(i), "device": [{"device_id": "0", "device_ip": "192.168.1.%d" % (i + 1),
                                                             "rank_id": str(i)}]} for i in range(SERVERS)]}))
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    marks = tmp_path / "marks"
    marks.mkdir()
    launchers = [launch(tmp_path / ("locks%d" % i), "-r", str(table), "--server-id", server(i), "-l",
                        str(tmp_path / ("log%d" % i)), "--", sys.executable, str(script), str(marks))
                 for i in range(SERVERS)]
    deadline = time.monotonic() + 120
    while not (marks / "failed").exists():
        assert time.monotonic() < deadline, "the last server's rank never saw every rank up"
        assert all(p.poll() is None for p in launchers), [p.poll() for p in launchers]
        time.sleep(0.01)
    failed_at = float((marks / "failed").read_text())
    pids = [int((marks / ("up.%d" % r)).read_text()) for r in range(SERVERS)]
    while any(alive(pid) for pid in pids) and time.time() - failed_at < 10:
        time.sleep(0.005)
    gone_after = time.time() - failed_at
    outputs = [p.communicate(timeout=60)[0] for p in launchers]
    print("%d servers: every rank gone %.3f s after the failure" % (SERVERS, gone_after))
    assert gone_after < 1.0, "every rank on every server is gone within a second (%.3f s)" % gone_after
    assert [p.returncode for p in launchers] == [3] * SERVERS  # the failed rank's exit code, on every server
    last = server(SERVERS - 1)
    for i, output in enumerate(outputs[:-1]):
        assert "rank %d on server %s failed with exit code 3" % (SERVERS - 1, last) in output, (i, output[-2000:])
    assert not [pid for pid in pids if alive(pid)]
