"""The cells of the life-cycle table driven on one server: each case puts
a real job in a state (lifecycle_support.py), sends it one event there and
checks what the table says happens, by what a user and the next job see:
the exit status, the record (summary.json, the journal), the words, no
process left and the devices free. Registered by (state, event); the
cases of several servers are in lifecycle_cases_servers.py."""

import os
import shutil
import signal
import time

CASES = {}


def case(state, event, topology="one server"):
    def register(function):
        CASES[(topology, state, event)] = function
        return function

    return register


# --- What every case ends with.


def ended(s, launch, code, reason=None, stopped_in=None, words=(), journal=(), within=None, since=None, server=0):
    """The launcher exited with `code` (None: not checked), its summary says
    `reason` (None: no summary expected), nothing of the job is left and its
    devices are free; `within` seconds after `since` when given."""
    got = launch.wait(timeout=40)
    out = launch.text()
    if code is not None:
        assert got == code, "exit %s, expected %s:\n%s" % (got, code, out)
    if within is not None:
        assert launch.ended - since < within, "ended %.2f s after the event (at most %.1f):\n%s" % (
            launch.ended - since, within, out)
    summary = launch.summary()
    if reason is None:
        assert summary is None, summary
    else:
        assert summary is not None, out
        assert summary["stop_reason"] == reason, (summary["stop_reason"], out)
        if stopped_in is not None:
            assert summary["stopped_in"] == stopped_in, (summary["stopped_in"], out)
    for word in words:
        assert word in out, "%r not in:\n%s" % (word, out)
    for line in journal:
        assert line in launch.journal(), "%r not in the journal:\n%s" % (line, launch.journal())
    left = s.wait_all_gone()
    assert left == [], "left running: %s\n%s" % (left, out)
    assert s.devices_free(server), "devices still held:\n" + out
    return summary


# One second for the job to end after a stop (docs/architecture.md), and
# one more for a loaded test machine.
PROMPT = 2.0


# --- Putting a job in each state (two ranks on one server).


def in_table_wait(s, *options):
    launch = s.start("exit", "--wait-timeout", "30", *options, seconds=0.2, table=s.table + ".later")
    time.sleep(1.0)
    assert launch.proc.poll() is None, launch.text()
    return launch


def table_arrives(s):
    shutil.copy(s.table, s.table + ".tmp")
    os.replace(s.table + ".tmp", s.table + ".later")


def in_planning(s, *options, mode="exit", seconds=0.2):
    launch = s.start(mode, *options, seconds=seconds, hold="planning:3000")
    assert launch.wait_for("holding the job in planning"), launch.text()
    return launch


def in_starting(s, *options, mode="exit", seconds=0.2):
    launch = s.start(mode, *options, seconds=seconds, hold="starting:2500")
    assert launch.wait_for("holding the job in starting"), launch.text()
    return launch


def ranks_up(launch, count=2):
    """Waits until `count` ranks said "up" (on the console, or in their logs:
    a job of the API shows its lines only while waited for)."""
    deadline = time.monotonic() + 20
    while launch.ups() < count and time.monotonic() < deadline:
        time.sleep(0.02)
    assert launch.ups() >= count, launch.text()


def in_running(s, *options, mode="working", seconds=None):
    launch = s.start(mode, *options, seconds=seconds)
    ranks_up(launch)
    return launch


def in_stopping_after_failure(s, *options):
    """Rank 1 failed (exit 3); rank 0 takes 4 s to finish on SIGTERM."""
    launch = s.start("fail1trap", "--grace-period", "20", *options, seconds=0.3)
    assert launch.wait_for_state("stopping"), launch.text()
    return launch


def in_stopping_on_request(s, *options):
    """Stopped by Ctrl-C; both ranks take 4 s to finish on SIGTERM."""
    launch = in_running(s, "--grace-period", "20", *options, mode="trap", seconds=4)
    launch.signal(signal.SIGINT)
    assert launch.wait_for_state("stopping"), launch.text()
    return launch


def in_killing(s, *options):
    """Rank 1 failed (exit 3); rank 0 ignored SIGTERM and was killed."""
    launch = s.start("fail1ignore", "--grace-period", "0.5", *options, seconds=0.3, hold="killing:2500")
    assert launch.wait_for_state("killing"), launch.text()
    return launch


def in_draining(s, *options, hold_ms=2500):
    launch = s.start("exit", *options, seconds=0.2, hold="draining:%d" % hold_ms)
    assert launch.wait_for_state("draining"), launch.text()
    return launch


def in_waiting(s, *options, hold_ms=2500):
    launch = s.start("exit", *options, seconds=0.2, hold="waiting_for_servers:%d" % hold_ms)
    assert launch.wait_for_state("waiting_for_servers"), launch.text()
    return launch


# --- The events, delivered to a `davincirun`.


def deliver(s, launch, event):
    """Sends `event` to the job now; returns when it was sent."""
    if event == "stop_request":
        launch.signal(signal.SIGINT)
    elif event == "repeated_stop_request":
        launch.signal(signal.SIGINT)
        time.sleep(0.1)
        launch.signal(signal.SIGINT)
    elif event == "engine_signal":
        launch.signal(signal.SIGTERM)
    elif event == "launcher_gone":
        launch.signal(signal.SIGKILL)
    elif event == "supervisor_gone":
        os.kill(launch.supervisor_pid(), signal.SIGKILL)
    elif event == "kill_request":
        s.kill_request()
    else:
        raise AssertionError("no way to send " + event)
    return time.monotonic()


# What a stop by each event leaves on record: exit status and stop_reason.
STOPS = {
    "stop_request": (130, "requested", "stopped on request"),
    "repeated_stop_request": (130, "requested", "stopped on request"),
    "kill_request": (130, "requested", "RESULT 130 requested"),
    "engine_signal": (143, "signaled", "davincirun got SIGTERM from pid %d" % os.getpid()),
    "launcher_gone": (None, "launcher_gone", None),
}
LAUNCHER_STOPS = ("stop_request", "engine_signal", "launcher_gone")
DAEMON_STOPS = ("stop_request", "repeated_stop_request", "engine_signal", "launcher_gone")


# --- Waiting for the table, and planning: nothing is started yet.


@case("waiting_for_table", "table_ready")
def _(s):
    launch = in_table_wait(s)
    table_arrives(s)
    ended(s, launch, 0, "none")


@case("waiting_for_table", "start_failed")
def _(s):
    launch = in_table_wait(s)
    with open(s.table + ".later", "w") as f:
        f.write('{"version": "1.0", "server_list": [}\n')
    ended(s, launch, 2, words=["unusable rank table", "line 1"])


@case("planning", "planned")
def _(s):
    launch = in_planning(s)
    ended(s, launch, 0, "none", journal=["starting -> running on ranks_started"])


@case("planning", "start_failed")
def _(s):
    launch = s.start("exit", "--devices", "5", seconds=0.2)
    ended(s, launch, 2, words=["device"])


for state, setup in (("waiting_for_table", in_table_wait), ("planning", in_planning)):
    for event in LAUNCHER_STOPS:

        @case(state, event)
        def _(s, setup=setup, event=event, state=state):
            launch = setup(s)
            since = deliver(s, launch, event)
            code = None if event == "launcher_gone" else STOPS[event][0]
            words = [] if event == "launcher_gone" else ["nothing was started"]
            ended(s, launch, code, words=words, within=PROMPT, since=since)
            assert launch.run_dir() is None

    @case(state, "job_timeout")
    def _(s, setup=setup, state=state):
        # The job timeout counts from the start of the ranks: a long wait before it is no overrun.
        launch = setup(s, "--job-timeout", "1")
        time.sleep(1.5)
        if state == "waiting_for_table":
            table_arrives(s)
        ended(s, launch, 0, "none")


# --- Starting: the ranks are started; what comes is taken once they run.


@case("starting", "start_failed")
def _(s):
    holder = in_running(s, mode="quiet")  # holds both devices
    launch = s.start("exit", seconds=0.2)
    assert launch.wait(timeout=20) == 2
    assert "in use by another job" in launch.text(), launch.text()
    holder.signal(signal.SIGINT)
    ended(s, holder, 130, "requested")


@case("starting", "ranks_started")
def _(s):
    launch = in_starting(s)
    ended(s, launch, 0, "none", journal=["starting -> running on ranks_started"])


@case("starting", "rank_exited")
def _(s):
    launch = in_starting(s, mode="exit", seconds=0)
    time.sleep(0.5)  # both ranks have exited 0 while starting
    ended(s, launch, 0, "none", journal=["rank_exited in running: note"])


@case("starting", "rank_failed")
def _(s):
    launch = in_starting(s, mode="fail1", seconds=0)
    ended(s, launch, 3, "rank_failed", stopped_in="running", words=["rank 1 (pid", "failed with exit code 3"])


for event in ("stop_request", "repeated_stop_request", "engine_signal", "kill_request"):

    @case("starting", event)
    def _(s, event=event):
        api = event == "kill_request"
        launch = s.start_api("working", hold="starting:2500") if api else in_starting(s, mode="working")
        if api:
            assert launch.wait_for("logs in")
        time.sleep(0.3)
        since = deliver(s, launch, event)
        code, reason, words = STOPS[event]
        ended(s, launch, code, reason, stopped_in="running", words=[words], within=PROMPT, since=since,
              journal=["starting -> running on ranks_started"])


@case("starting", "launcher_gone")
def _(s):
    launch = in_starting(s, mode="working")
    since = deliver(s, launch, "launcher_gone")
    launch.wait(timeout=10)
    assert s.wait_all_gone(timeout=PROMPT) == []
    assert time.monotonic() - since < PROMPT + 1
    assert s.devices_free()


# --- The supervisor process killed, in every state it runs in: its ranks
# die with it, the launcher kills what they left and says so.

SETUPS = {
    "starting": lambda s: in_starting(s, mode="working"),
    "running": lambda s: in_running(s),
    "stopping": in_stopping_after_failure,
    "killing": in_killing,
    "draining": in_draining,
    "waiting_for_servers": in_waiting,
}
for state, setup in SETUPS.items():

    @case(state, "supervisor_gone")
    def _(s, setup=setup):
        launch = setup(s)
        since = deliver(s, launch, "supervisor_gone")
        ended(s, launch, 1, None, words=["ended with signal 9 (SIGKILL) before reporting the result"],
              within=PROMPT, since=since)
