"""The cells of the life-cycle table that take two servers (the peer
channel's events, a stop the other servers are told of, a real wait for
the other servers), each server a `davincirun` of its own on this
machine's loopback: server 0 (127.0.0.1) holds rank 0 and the hub,
server 1 (127.0.0.2) rank 1. Then a few cells across two test hosts in
network namespaces, and in MindSpore's dynamic-cluster mode."""

import os
import signal
import time

from lifecycle_cases import PROMPT, STOPS, case, deliver, ended, ranks_up

TWO = ("127.0.0.1", "127.0.0.2")
A, B = 0, 1  # rank 0's server (the hub), and the other


def joined(hub):
    assert hub.wait_for("the agents of all"), hub.text()


def pair(s, mode_a, mode_b, *options, seconds_a=None, seconds_b=None, hold_a=None):
    a = s.start(mode_a, *options, server=A, seconds=seconds_a, hold=hold_a)
    b = s.start(mode_b, *options, server=B, seconds=seconds_b)
    return a, b


# How each event of another server is caused there, and what it leaves on
# record here: exit status, stop_reason, words.
def cause(s, event, b):
    if event == "peer_stopped":
        b.signal(signal.SIGINT)
    elif event == "peer_lost":
        os.kill(b.supervisor_pid(), signal.SIGKILL)


PEER_RECORD = {
    "peer_failed": (3, "peer_failed", "the job was stopped because rank 1 on server 127.0.0.2 failed with exit code 3"),
    "peer_stopped": (1, "peer_stopped", "the job was stopped because server 127.0.0.2 was stopped (stop requested)"),
    "peer_lost": (1, "peer_lost", "server 127.0.0.2 was lost "),
    "peer_never_joined": (1, "peer_lost", "server 127.0.0.2 never joined: its agent did not connect within 1.5 s"),
    "hub_unreachable": (1, "peer_lost", "server 127.0.0.1 could not be reached: its agent at 127.0.0.1:"),
}


def other_server(event, s, a_mode, hold_a=None, seconds_a=None):
    """Server A in `a_mode`, and the other server doing `event` to it; returns (A's launch, B's launch)."""
    if event == "peer_never_joined":
        return s.start(a_mode, "--wait-timeout", "1.5", server=A, seconds=seconds_a, hold=hold_a), None
    if event == "hub_unreachable":  # here A is the member, alone
        return s.start(a_mode, "--wait-timeout", "1.5", server=B, seconds=seconds_a, hold=hold_a), None
    b_mode, b_seconds = ("fail1", 1.0) if event == "peer_failed" else ("working", None)
    return pair(s, a_mode, b_mode, seconds_a=seconds_a, seconds_b=b_seconds, hold_a=hold_a)


for state in ("running", "draining", "waiting_for_servers"):
    for event in PEER_RECORD:

        @case(state, event, "two servers")
        def _(s, state=state, event=event):
            hold = None if state == "running" else "%s:4000" % state if state == "draining" else None
            a, b = other_server(event, s, "working" if state == "running" else "exit", hold_a=hold,
                                seconds_a=None if state == "running" else 0.2)
            if b is not None:
                joined(a if event != "hub_unreachable" else b)
                if state != "running":
                    assert a.wait_for_state(state), a.text()
                cause(s, event, b)
            code, reason, words = PEER_RECORD[event]
            server = B if event == "hub_unreachable" else A
            ended(s, a, code, reason, stopped_in=state, words=[words], server=server,
                  journal=["%s in %s" % (event, state) if state == "draining" else "%s -> " % state])
            if b is not None:
                b.wait(timeout=30)


for event in ("peer_failed", "peer_stopped", "peer_lost", "peer_never_joined"):

    @case("done", event, "two servers")
    def _(s, event=event):
        # Server 1 ends first, told the hub, and is done; then the job fails, stops or is lost elsewhere.
        if event == "peer_never_joined":
            s.servers.append("127.0.0.3")
            from lifecycle_support import write_table

            s.table = write_table(s.table, s.servers)
            hub = s.start("working", "--wait-timeout", "3", server=A)
        elif event == "peer_failed":
            hub = s.start("fail", server=A, seconds=2.0)  # rank 0 fails once the member is done
        else:
            hub = s.start("working", server=A)
        member = s.start("exit", server=B, seconds=0.2)
        assert member.wait(timeout=20) == 0, member.text()
        if event == "peer_stopped":
            hub.signal(signal.SIGINT)
        elif event == "peer_lost":
            os.kill(hub.supervisor_pid(), signal.SIGKILL)
        hub.wait(timeout=30)
        assert member.summary()["success"] is True and member.summary()["stop_reason"] == "none"
        assert s.wait_all_gone() == []


@case("waiting_for_servers", "repeated_stop_request", "two servers")
def _(s):
    # Stopped by Ctrl-C before the other server joined, the hub waits for it
    # to learn the stop (up to the peer timeout, 30 s); a second Ctrl-C ends the wait.
    a = s.start("working", server=A)
    ranks_up(a, 1)
    a.signal(signal.SIGINT)
    assert a.wait_for_state("waiting_for_servers"), a.text()
    since = deliver(s, a, "stop_request")
    ended(s, a, 130, "requested", stopped_in="running", within=PROMPT, since=since,
          journal=["waiting_for_servers -> done on repeated_stop_request"])


@case("waiting_for_servers", "servers_done", "two servers")
def _(s):
    a, b = pair(s, "exit", "exit", seconds_a=0.2, seconds_b=1.5)
    ended(s, a, 0, "none", words=["this server's ranks are done; waiting for server 127.0.0.2 (running)"],
          journal=["waiting_for_servers -> done on servers_done"])
    assert b.wait(timeout=20) == 0


# --- A stop of this server's own is told to the other servers, which stop too.

TOLD = {  # what the other server then says
    "rank_failed": (3, "peer_failed", "the job was stopped because rank 1 on server 127.0.0.2 failed"),
    "stop_request": (1, "peer_stopped", "the job was stopped because server 127.0.0.2 was stopped (stop requested)"),
    "engine_signal": (1, "peer_stopped", "server 127.0.0.2 was stopped (davincirun got SIGTERM from pid"),
    "launcher_gone": (1, "peer_stopped", "server 127.0.0.2 was stopped (davincirun is gone"),
    "job_timeout": (1, "peer_stopped", "server 127.0.0.2 was stopped (the job timeout of 1 s is reached)"),
}
for event in TOLD:

    @case("running", event, "two servers")
    def _(s, event=event):
        b_options = ("--job-timeout", "1") if event == "job_timeout" else ()
        a = s.start("working", server=A)
        b = s.start("fail1" if event == "rank_failed" else "working", *b_options, server=B, seconds=0.5)
        joined(a)
        ranks_up(b, 1)
        if event in ("stop_request", "engine_signal", "launcher_gone"):
            deliver(s, b, event)
        since = time.monotonic()
        code, reason, words = TOLD[event]
        ended(s, a, code, reason, stopped_in="running", words=[words], within=PROMPT + 4, since=since)
        b.wait(timeout=30)

for state in ("draining", "waiting_for_servers"):
    for event in ("stop_request", "engine_signal", "launcher_gone"):

        @case(state, event, "two servers")
        def _(s, state=state, event=event):
            # The hub's ranks are done; the member still runs, and is told.
            hold = "draining:4000" if state == "draining" else None
            a, b = pair(s, "exit", "working", seconds_a=0.2, hold_a=hold)
            joined(a)
            assert a.wait_for_state(state), a.text()
            since = deliver(s, a, event)
            code, reason, _ = STOPS[event]
            ended(s, a, code, reason, stopped_in=state, within=PROMPT, since=since)
            b_code = b.wait(timeout=20)
            assert b_code == 1, b.text()
            assert b.summary()["stop_reason"] == "peer_stopped", b.text()


@case("running", "stall", "two servers")
def _(s):
    # The hub hears every server's silence: the whole job is silent, every server stops.
    a, b = pair(s, "quiet", "quiet", "--stall-timeout", "1.5")
    ended(s, a, 124, "stalled", words=["the job stalled"])
    assert b.wait(timeout=20) == 124, b.text()
    assert b.summary()["stop_reason"] == "stalled"


# --- MindSpore's dynamic-cluster mode: the scheduler is one more process of
# the job, stopped and swept like a rank.

DYNAMIC = ("--launch-mode", "dynamic-cluster")


def scheduler(summary):
    (entry,) = [r for r in summary["ranks"] if r["role"] == "scheduler"]
    return entry


@case("running", "rank_failed", "dynamic cluster")
def _(s):
    launch = s.start("fail1", *DYNAMIC, seconds=0.5)
    summary = ended(s, launch, 3, "rank_failed",
                    words=["rank 1 (pid", "stopping the other 1 rank(s) and the scheduler"])
    assert scheduler(summary)["terminated_by_launcher"]


@case("running", "stop_request", "dynamic cluster")
def _(s):
    launch = s.start("working", *DYNAMIC)
    ranks_up(launch, 3)
    since = deliver(s, launch, "stop_request")
    summary = ended(s, launch, 130, "requested", within=PROMPT, since=since)
    assert scheduler(summary)["signal"] == signal.SIGTERM


@case("stopping", "stop_request", "dynamic cluster")
def _(s):
    launch = s.start("trap", "--grace-period", "20", *DYNAMIC, seconds=4)
    ranks_up(launch, 3)
    launch.signal(signal.SIGINT)
    assert launch.wait_for_state("stopping"), launch.text()
    since = deliver(s, launch, "stop_request")
    summary = ended(s, launch, 130, "requested", within=PROMPT, since=since)
    assert scheduler(summary)["killed_by_launcher"]


@case("starting", "stop_request", "dynamic cluster")
def _(s):
    launch = s.start("working", *DYNAMIC, hold="starting:2500")
    assert launch.wait_for("holding the job in starting"), launch.text()
    since = deliver(s, launch, "stop_request")
    ended(s, launch, 130, "requested", within=PROMPT, since=since)


@case("draining", "stop_request", "dynamic cluster")
def _(s):
    launch = s.start("exit", *DYNAMIC, seconds=0.2, hold="draining:2500")
    assert launch.wait_for_state("draining"), launch.text()
    since = deliver(s, launch, "stop_request")
    summary = ended(s, launch, 130, "requested", stopped_in="draining", within=PROMPT, since=since)
    assert scheduler(summary)["exit_code"] == 0


@case("waiting_for_servers", "stall", "two servers")
def _(s):
    # The hub's ranks are done; the other server's hang silently: the hub still watches them.
    a, b = pair(s, "exit", "quiet", "--stall-timeout", "1.5", seconds_a=0.2)
    ended(s, a, 124, "stalled", stopped_in="waiting_for_servers", journal=["waiting_for_servers -> done on stall"])
    assert b.wait(timeout=20) == 124, b.text()
