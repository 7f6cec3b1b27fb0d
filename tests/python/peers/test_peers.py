"""The peer channel between the agents of a job that spans servers
(docs/multi-server.md), with two "servers" on this machine: 127.0.0.1 and
127.0.0.2 (the whole 127/8 is loopback), each a davincirun of its own with
--server-id. A failure, a stop or a lost agent on one server stops the other
at once and both name it; success ends both; --no-peers keeps them apart;
an engine's many SIGTERMs are one stop; the stall watchdog dumps stacks.
Across real hosts (network namespaces): tests/python/engines/test_multi_host.py."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import assert_gone

DAVINCIRUN = ["davincirun"]
SERVERS = ["127.0.0.1", "127.0.0.2"]


def two_server_table(path: Path) -> Path:
    table = {
        "version": "1.0",
        "server_count": "2",
        "status": "completed",
        "server_list": [
            {"server_id": server, "device": [{"device_id": str(i), "device_ip": "192.168.1.%d" % (i + 1),
                                              "rank_id": str(i)}]}
            for i, server in enumerate(SERVERS)
        ],
    }
    path.write_text(json.dumps(table))
    return path


SCRIPT = r"""
import os, signal, sys, time
rank = int(os.environ["RANK_ID"])
mode = sys.argv[1]
print("rank %d pid %d up" % (rank, os.getpid()), flush=True)
if mode == "fail" and rank == 1:
    time.sleep(1.0)
    raise ValueError("rank 1 broke on purpose")
if mode == "ok":
    time.sleep(0.5 + rank)
    print("rank %d done" % rank, flush=True)
    sys.exit(0)
if mode == "trap":
    def slow_exit(signum, frame):
        time.sleep(1.5)
        print("rank %d finished its SIGTERM handler" % rank, flush=True)
        sys.exit(0)
    signal.signal(signal.SIGTERM, slow_exit)
if mode == "silent":
    time.sleep(600)
time.sleep(60)
"""


class Server:
    """One davincirun on one of the two servers."""

    def __init__(self, tmp_path, table, index, mode, *extra, env=None):
        self.index = index
        self.log_dir = tmp_path / ("log%d" % index)
        script = tmp_path / "script.py"
        script.write_text(SCRIPT)
        self.proc = subprocess.Popen(
            DAVINCIRUN + ["-r", str(table), "--server-id", SERVERS[index], "-l", str(self.log_dir), *extra,
                          sys.executable, str(script), mode],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(os.environ, **(env or {})))
        self.output = ""

    def wait(self, timeout=30):
        out, _ = self.proc.communicate(timeout=timeout)
        self.output = out.decode(errors="replace")
        return self.proc.returncode

    def summary(self):
        (run,) = [p for p in self.log_dir.iterdir() if p.is_dir() and not p.is_symlink()]
        return json.loads((run / "summary.json").read_text())

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def servers(tmp_path):
    table = two_server_table(tmp_path / "table.json")
    started = []

    def start(index, mode, *extra, env=None):
        server = Server(tmp_path, table, index, mode, *extra, env=env)
        started.append(server)
        return server

    yield start
    for server in started:
        server.kill()


def supervisor_of(launcher_pid):
    """The job supervisor process (its agent) of the davincirun with this pid."""
    out = subprocess.check_output(["pgrep", "-P", str(launcher_pid), "davincirun-sup"])
    return int(out.split()[0])


def rank_pids(output):
    return [int(line.split(" pid ")[1].split()[0]) for line in output.splitlines() if " up" in line and " pid " in line]


def test_a_rank_failing_on_one_server_stops_the_other_and_both_name_it(servers):
    a = servers(0, "sleep")
    b = servers(1, "fail")
    start = time.monotonic()
    assert b.wait() == 1
    assert a.wait() == 1  # the failed rank's code, on every server
    assert time.monotonic() - start < 15
    assert "ValueError: rank 1 broke on purpose" in b.output
    assert "the job was stopped because rank 1 on server 127.0.0.2 failed with exit code 1" in a.output, a.output
    assert "root cause, from its log on server 127.0.0.2:" in a.output
    assert "ValueError: rank 1 broke on purpose" in a.output
    summary = a.summary()
    assert summary["stop_reason"] == "peer_failed"
    assert summary["peer_stop"]["server_id"] == "127.0.0.2"
    assert summary["peer_stop"]["rank"] == 1
    assert "ValueError" in summary["peer_stop"]["detail"]
    # Rank 0 ended a moment after rank 1, not after a framework's timeout.
    gap = summary["ranks"][0]["ended"] - b.summary()["ranks"][0]["ended"]
    assert 0 <= gap < 1.0, gap
    assert_gone(rank_pids(a.output))


def test_an_agent_killed_on_one_server_stops_the_other_at_once(servers):
    a = servers(0, "sleep", "--peer-timeout", "30")
    b = servers(1, "sleep", "--peer-timeout", "30")
    time.sleep(2)  # both up and joined
    # Server B's agent is its job supervisor process: the child of davincirun.
    supervisor = supervisor_of(b.proc.pid)
    killed_at = time.time()
    os.kill(supervisor, signal.SIGKILL)
    assert a.wait() == 1
    b.wait()
    assert "server 127.0.0.2 was lost " in a.output and "after the agents met: its agent at" in a.output, a.output
    assert "closed its connection" in a.output
    summary = a.summary()
    assert summary["stop_reason"] == "peer_lost"
    assert summary["ranks"][0]["ended"] - killed_at < 1.0  # not the 30 s peer timeout


def test_when_every_server_succeeds_both_end_with_0_and_the_hub_waits(servers):
    a = servers(0, "ok")
    b = servers(1, "ok")
    assert a.wait() == 0, a.output
    assert b.wait() == 0, b.output
    assert "the agents of all 2 servers are connected" in a.output
    # Rank 0 ends 1 s before rank 1: the hub says what it waits for.
    assert "this server's ranks are done; waiting for server 127.0.0.2 (running)" in a.output, a.output
    assert a.summary()["peer_stop"] is None
    assert a.summary()["success"] is True


def test_without_peers_a_failure_on_one_server_leaves_the_other_running(servers):
    a = servers(0, "sleep", "--no-peers")
    b = servers(1, "fail", "--no-peers")
    assert b.wait() == 1
    with pytest.raises(subprocess.TimeoutExpired):
        a.proc.wait(timeout=2)
    assert "peers:" not in b.output


def test_without_peers_each_server_writes_its_own_record(servers):
    # The record of a server that is not rank 0's once failed on --no-peers
    # ("cannot write the job record": the plan lists no server ids then).
    a = servers(0, "ok", "--no-peers")
    b = servers(1, "ok", "--no-peers")
    assert b.wait() == 0 and a.wait() == 0
    clock = {}
    for server in (a, b):
        assert "cannot write the job record" not in server.output
        (run,) = [p for p in server.log_dir.iterdir() if p.is_dir() and not p.is_symlink()]
        assert (run / "report.html").is_file()
        clock[server.index] = json.loads((run / "job.json").read_text())["clock"]
        assert clock[server.index]["reference_server"] == SERVERS[server.index]
    assert clock[1]["method"] == ("this server's part only, on its own clock: the job's record is on rank 0's "
                                  "server; not received here: its agent takes no part in the job's peer channel")


def test_the_engines_sigterm_to_every_process_is_one_stop_and_the_grace_period_holds(servers):
    a = servers(0, "trap", "--no-peers")
    time.sleep(1.5)
    supervisor = supervisor_of(a.proc.pid)
    # As srun and mpirun do: the launcher, its supervisor and the ranks, at once, twice.
    ranks = [int(p) for p in subprocess.check_output(["pgrep", "-P", str(supervisor)]).split()]
    for _ in range(2):
        for pid in [a.proc.pid, supervisor] + ranks:
            os.kill(pid, signal.SIGTERM)
    assert a.wait() == 143
    assert "rank 0 finished its SIGTERM handler" in a.output, a.output
    assert "killing every rank now" not in a.output
    assert a.summary()["ranks"][0]["killed_by_launcher"] is False


def test_the_stall_watchdog_dumps_python_stacks_and_stops_a_silent_job(tmp_path, rank_table):
    script = tmp_path / "silent.py"
    script.write_text("import time\nprint('working', flush=True)\n"
                      "def stuck_here():\n    time.sleep(600)\nstuck_here()\n")
    proc = subprocess.run(DAVINCIRUN + ["-r", str(rank_table(2)), "-l", str(tmp_path / "log"), "--stall-timeout", "2",
                                        sys.executable, str(script)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    out = proc.stdout.decode(errors="replace")
    assert proc.returncode == 124, out
    assert "the job stalled (no rank of the job wrote any output for 2." in out, out
    (run,) = [p for p in (tmp_path / "log").iterdir() if p.is_dir() and not p.is_symlink()]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["stop_reason"] == "stalled"
    stacks = sorted((run / "stacks").iterdir())
    assert [p.name for p in stacks] == ["rank_0.stacks.txt", "rank_1.stacks.txt"]
    if os.geteuid() == 0:  # py-spy needs ptrace, which yama may refuse a non-root user
        assert "stuck_here" in stacks[0].read_text()


def test_a_taken_peer_port_on_rank_0s_server_is_refused_before_anything_starts(servers):
    import socket

    holder = socket.socket()
    holder.bind(("0.0.0.0", 0))
    holder.listen()
    port = holder.getsockname()[1]
    a = servers(0, "sleep", "--peer-port", str(port))
    assert a.wait() == 2
    assert "the peer channel's port %d is already in use" % port in a.output, a.output
    assert "DAVINCIRUN_PEER_PORT" in a.output
    holder.close()


def test_the_python_api_raises_naming_the_other_servers_failure(servers, tmp_path):
    from davincirunsdk import DistributedRuntimeError, start_and_wait_distributed_train

    b = servers(1, "fail")
    script = tmp_path / "script.py"
    with pytest.raises(DistributedRuntimeError) as caught:
        start_and_wait_distributed_train([sys.executable, str(script), "sleep"], rank_table=tmp_path / "table.json",
                                         server_id="127.0.0.1", log_dir=tmp_path / "api", output_notebook=False)
    error = caught.value
    assert error.server_id == "127.0.0.2"
    assert error.rank == 1
    assert error.exit_code == 1
    assert "ValueError: rank 1 broke on purpose" in error.root_cause
    assert error.result.stop_reason == "peer_failed"
    assert "rank 1 on server 127.0.0.2 failed with exit code 1" in str(error)
    b.wait()


@pytest.mark.parametrize("engine", [None, "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "SLURM_STEP_ID"])
def test_under_an_engines_pseudo_terminal_lines_are_plain(tmp_path, rank_table, engine):
    from pty_support import PtyProcess

    script = tmp_path / "bar.py"
    script.write_text("import sys, time\nfor i in range(3):\n    sys.stdout.write('\\rstep %d' % i); "
                      "sys.stdout.flush(); time.sleep(0.2)\nprint(' done')\n")
    env = dict(os.environ)
    env.pop("NO_COLOR", None)
    if engine:
        env[engine] = "2"
    with PtyProcess(DAVINCIRUN + ["-r", str(rank_table(1)), "-l", str(tmp_path / "log"), sys.executable, str(script)],
                    cwd=tmp_path, env=env) as proc:
        assert proc.wait() == 0
    if engine:
        assert b"\x1b" not in proc.output, proc.output  # no colour, no status line redrawn in place
        assert b"step 2 done" in proc.output
    else:
        assert b"\x1b[" in proc.output  # a person's terminal: colour and the status line


def test_the_dry_run_shows_where_the_agents_meet(tmp_path):
    table = two_server_table(tmp_path / "table.json")

    def dry_run(*flags, env=None):
        argv = [*DAVINCIRUN, "--dry-run", "-r", str(table), "--server-id", SERVERS[1], *flags, "true"]
        return subprocess.run(argv, capture_output=True, text=True, check=True, env=env).stdout

    out = dry_run()
    assert "peer channel: the agents meet at 127.0.0.1:" in out and "the server of rank 0" in out, out
    assert "job key derived from the table and JOB_ID" in out
    assert "meet at 127.0.0.1:23456" in dry_run("--peer-port", "23456")
    assert "job key from DAVINCIRUN_JOB_KEY" in dry_run(env=dict(os.environ, DAVINCIRUN_JOB_KEY="a secret"))
    assert "peer channel: off (--no-peers or DAVINCIRUN_PEERS=0)" in dry_run("--no-peers")
