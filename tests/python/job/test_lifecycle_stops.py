"""Stops that once went unanswered, now named cases of the life cycle
(docs/architecture.md, "The life cycle"): a member server whose ranks are
done and that waits for an absent rank 0's server is stopped by SIGTERM,
by SIGINT, by two SIGINTs and by SIGKILL of davincirun, each leaving
nothing behind and its devices free within a second; a davincirun started
with SIGINT ignored (a script's background job) still stops on SIGINT;
nohup's SIGHUP stays ignored; a stop while waiting for the rank table; a
SIGINT during the job timeout's stop leaves the timeout's exit status."""

import os
import signal
import subprocess
import sys
import time

import pytest
from lifecycle_support import Scenario
from process_scan import alive

SERVERS = ("127.0.0.1", "127.0.0.2")


@pytest.fixture
def scenario(tmp_path):
    made = []

    def make(*args, **kwargs):
        s = Scenario(tmp_path / ("s%d" % len(made)), *args, **kwargs)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def waiting_member(scenario):
    """Server 2 of a two-server job whose ranks are done, waiting for rank 0's server, which never comes."""
    s = scenario(SERVERS)
    member = s.start("exit", "--wait-timeout", "60", server=1, seconds=0.2)
    assert member.wait_for_state("waiting_for_servers"), member.text()
    return s, member


def assert_ended_clean(s, launch, since, within=1.0):
    assert s.wait_all_gone() == [], launch.text()
    assert s.devices_free(server=1)
    assert launch.ended - since < within, launch.text()


@pytest.mark.parametrize("signo", [signal.SIGTERM, signal.SIGINT])
def test_a_member_waiting_for_an_absent_hub_stops_on_a_signal(scenario, signo):
    s, member = waiting_member(scenario)
    assert member.wait_for("waiting for the agent of rank 0's server at 127.0.0.1:"), member.text()
    assert member.wait_for("Ctrl-C stops the job")
    sent = time.monotonic()
    member.signal(signo)
    assert member.wait(timeout=10) == 128 + signo
    assert_ended_clean(s, member, sent)
    out = member.text()
    if signo == signal.SIGTERM:
        assert "davincirun got SIGTERM from pid %d" % os.getpid() in out, out
    else:
        assert "the job was stopped on request" in out, out
    assert "while this server waited for the agent of rank 0's server" in out, out
    summary = member.summary()
    assert summary["stop_reason"] == ("signaled" if signo == signal.SIGTERM else "requested")
    assert summary["stopped_in"] == "waiting_for_servers"
    assert [r["exit_code"] for r in summary["ranks"]] == [0]


def test_a_member_waiting_for_an_absent_hub_stops_on_two_sigints(scenario):
    s, member = waiting_member(scenario)
    sent = time.monotonic()
    member.signal(signal.SIGINT)
    member.signal(signal.SIGINT)
    assert member.wait(timeout=10) == 130
    assert_ended_clean(s, member, sent)


def test_a_member_waiting_for_an_absent_hub_frees_its_devices_when_davincirun_is_killed(scenario):
    s, member = waiting_member(scenario)
    supervisor = member.supervisor_pid()
    assert supervisor
    sent = time.monotonic()
    member.signal(signal.SIGKILL)
    member.wait(timeout=10)
    left = s.wait_all_gone(timeout=1.0)
    assert left == [], "still running 1 s after davincirun was killed: %s" % left
    assert time.monotonic() - sent < 1.5
    assert s.devices_free(server=1)
    assert not alive(supervisor)
    assert "waiting_for_servers -> done on launcher_gone" in member.journal()


def ignoring(*signals):
    """preexec_fn: the child starts with `signals` ignored, as a shell leaves them."""

    def apply():
        for signo in signals:
            signal.signal(signo, signal.SIG_IGN)

    return apply


def test_sigint_stops_a_davincirun_started_with_sigint_ignored(scenario):
    # What `davincirun ... &` in a script gets: SIGINT and SIGQUIT ignored.
    s = scenario()
    launch = s.start("quiet", preexec_fn=ignoring(signal.SIGINT, signal.SIGQUIT))
    assert launch.wait_for(" up")
    sent = time.monotonic()
    launch.signal(signal.SIGINT)
    assert launch.wait(timeout=15) == 130, launch.text()
    assert launch.ended - sent < 1.0
    assert s.wait_all_gone() == []
    assert launch.summary()["stop_reason"] == "requested"


def test_a_script_background_job_stops_on_kill_int(scenario):
    # The same through a real non-interactive shell: bash starts `&` jobs with SIGINT ignored.
    s = scenario()
    shell = subprocess.Popen(
        ["bash", "-c", 'davincirun -r "$1" -l "$2" "$3" "$4" quiet & echo $!; wait $!', "sh", s.table,
         os.path.join(str(s.directory), "log"), sys.executable, s.script],
        env=s.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    pid = int(shell.stdout.readline())
    deadline = time.monotonic() + 20
    while not s.left() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    os.kill(pid, signal.SIGINT)
    shell.wait(timeout=15)
    assert shell.returncode == 130, shell.stderr.read()
    assert s.wait_all_gone() == []


def test_nohup_keeps_sighup_ignored(scenario):
    s = scenario()
    launch = s.start("exit", seconds=1.5, preexec_fn=ignoring(signal.SIGHUP))
    assert launch.wait_for(" up")
    launch.signal(signal.SIGHUP)
    assert launch.wait(timeout=15) == 0, launch.text()
    assert launch.summary()["stop_reason"] == "none"


@pytest.mark.parametrize("signo", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_while_waiting_for_the_rank_table_ends_the_wait(scenario, signo):
    s = scenario()
    missing = os.path.join(str(s.directory), "not_yet.json")
    launch = s.start("exit", table=missing, seconds=0)
    time.sleep(1.0)
    sent = time.monotonic()
    launch.signal(signo)
    assert launch.wait(timeout=10) == 128 + signo
    assert launch.ended - sent < 1.5
    assert "while waiting for the rank table: nothing was started" in launch.text(), launch.text()
    assert s.left() == []


def test_a_sigint_after_the_job_timeout_keeps_the_timeouts_exit_status(scenario):
    # The first stop names the job's end, its exit status too: the SIGINT
    # that comes while the timeout's stop goes on kills at once, and the
    # status stays summary.json's 124.
    s = scenario()
    launch = s.start("ignore", "--job-timeout", "1", "--grace-period", "20")
    assert launch.wait_for_state("stopping"), launch.text()
    launch.signal(signal.SIGINT)
    assert launch.wait(timeout=15) == 124, launch.text()
    summary = launch.summary()
    assert (summary["stop_reason"], summary["exit_code"]) == ("timed_out", 124)
    assert all(r["killed_by_launcher"] for r in summary["ranks"])
    assert "stopping -> killing on stop_request" in launch.journal()
    assert s.wait_all_gone() == []


def test_a_member_stopped_before_any_hub_came_ends_within_a_second(scenario):
    # One Ctrl-C while its ranks run: it tells rank 0's server for at most a
    # second (one already starting would join in that time), then ends.
    s = scenario(SERVERS)
    member = s.start("working", "--wait-timeout", "60", server=1)
    assert member.wait_for(" up")
    sent = time.monotonic()
    member.signal(signal.SIGINT)
    assert member.wait(timeout=15) == 130, member.text()
    assert member.ended - sent < 2.0, member.text()
    assert s.wait_all_gone() == [] and s.devices_free(server=1)


def test_a_failure_before_any_hub_came_is_reported_within_a_second(scenario):
    s = scenario(SERVERS)
    member = s.start("fail1", "--wait-timeout", "60", server=1, seconds=0.3)
    assert member.wait(timeout=15) == 3, member.text()
    assert member.ended - member.started < 3.0, member.text()
    assert "ValueError: rank 1 broke on purpose" in member.text()


def test_the_hub_names_the_servers_that_have_not_joined(scenario):
    s = scenario(SERVERS)
    hub = s.start("working", "--wait-timeout", "60", server=0)
    assert hub.wait_for("peers: not joined yet: server 127.0.0.2 (not joined) (giving up 60.0 s after the start)",
                        timeout=10), hub.text()
    hub.signal(signal.SIGINT)
    assert hub.wait(timeout=15) == 130


def test_a_member_silent_while_the_hub_waits_for_it_stalls_the_job(scenario):
    # Rank 0's server is done; the other hangs silently (a last barrier): the hub still watches it.
    s = scenario(SERVERS)
    hub = s.start("exit", "--stall-timeout", "1.5", server=0, seconds=0.2)
    member = s.start("quiet", "--stall-timeout", "1.5", server=1)
    assert hub.wait(timeout=30) == 124, hub.text()
    assert member.wait(timeout=30) == 124, member.text()
    assert (hub.summary()["stop_reason"], hub.summary()["stopped_in"]) == ("stalled", "waiting_for_servers")
    assert member.summary()["stop_reason"] == "stalled"
    assert s.wait_all_gone() == []
