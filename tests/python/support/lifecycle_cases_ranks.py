"""The cells of the life-cycle table driven on one server, from `running`
to `done` (lifecycle_cases.py has the states before, and the helpers)."""

import os
import signal
import time

from lifecycle_cases import (
    DAEMON_STOPS,
    PROMPT,
    STOPS,
    case,
    deliver,
    ended,
    in_draining,
    in_killing,
    in_running,
    in_stopping_after_failure,
    in_stopping_on_request,
    in_waiting,
    ranks_up,
)

# --- Running.


@case("running", "rank_exited")
def _(s):
    launch = in_running(s, mode="exit0", seconds=0.3)
    ended(s, launch, 0, "none", journal=["rank_exited in running: note", "running -> draining on ranks_gone"])


@case("running", "rank_failed")
def _(s):
    launch = in_running(s, mode="fail1", seconds=0.5)
    summary = ended(s, launch, 3, "rank_failed", stopped_in="running",
                    words=["rank 1 (pid", "failed with exit code 3", "ValueError: rank 1 broke on purpose"])
    assert summary["first_failure"] == 1
    assert summary["ranks"][0]["terminated_by_launcher"] and not summary["ranks"][0]["killed_by_launcher"]


@case("running", "ranks_gone")
def _(s):
    launch = in_running(s, mode="exit", seconds=0.3)
    ended(s, launch, 0, "none", journal=["running -> draining on ranks_gone"])


for event in ("stop_request", "engine_signal", "launcher_gone"):

    @case("running", event)
    def _(s, event=event):
        launch = in_running(s)
        since = deliver(s, launch, event)
        code, reason, words = STOPS[event]
        summary = ended(s, launch, code, reason, stopped_in="running", words=[words] if words else [],
                        within=PROMPT, since=since)
        assert all(r["terminated_by_launcher"] and r["signal"] == signal.SIGTERM for r in summary["ranks"])


@case("running", "kill_request")
def _(s):
    launch = s.start_api("working")
    ranks_up(launch)
    since = deliver(s, launch, "kill_request")
    summary = ended(s, launch, 130, "requested", within=PROMPT, since=since, words=["RESULT 130 requested"])
    assert all(r["killed_by_launcher"] for r in summary["ranks"])


@case("running", "job_timeout")
def _(s):
    launch = in_running(s, "--job-timeout", "1")
    ended(s, launch, 124, "timed_out", stopped_in="running", words=["the job timeout of 1 s is reached"])


@case("running", "stall")
def _(s):
    launch = s.start("quiet", "--stall-timeout", "1")
    ended(s, launch, 124, "stalled", stopped_in="running",
          words=["the job stalled (no rank of the job wrote any output for 1."])


# --- Stopping: rank 1 failed (exit 3) and rank 0 takes 4 s on SIGTERM, or
# both were asked to stop (exit 130) and take 4 s.


@case("stopping", "rank_exited")
def _(s):
    launch = in_stopping_after_failure(s)
    summary = ended(s, launch, 3, "rank_failed", journal=["rank_exited in stopping: note"])
    assert summary["ranks"][0]["exit_code"] == 0 and summary["ranks"][0]["terminated_by_launcher"]


@case("stopping", "ranks_gone")
def _(s):
    launch = in_stopping_after_failure(s)
    ended(s, launch, 3, "rank_failed", journal=["stopping -> draining on ranks_gone"])


@case("stopping", "stop_request")
def _(s):
    launch = in_stopping_after_failure(s)
    since = deliver(s, launch, "stop_request")
    summary = ended(s, launch, 3, "rank_failed", within=PROMPT, since=since,
                    words=["stop requested while the job was stopping: killing every rank now"])
    assert summary["ranks"][0]["killed_by_launcher"]


@case("stopping", "repeated_stop_request")
def _(s):
    launch = in_stopping_on_request(s)
    since = deliver(s, launch, "stop_request")  # the second Ctrl-C of the user
    summary = ended(s, launch, 130, "requested", within=PROMPT, since=since, journal=[
        "stopping -> killing on repeated_stop_request"])
    assert all(r["killed_by_launcher"] for r in summary["ranks"])


@case("stopping", "kill_request")
def _(s):
    launch = s.start_api("fail1trap", seconds=0.3)
    assert launch.wait_for_state("stopping"), launch.text()
    since = deliver(s, launch, "kill_request")
    summary = ended(s, launch, 3, "rank_failed", within=PROMPT, since=since)
    assert summary["ranks"][0]["killed_by_launcher"]


@case("stopping", "grace_over")
def _(s):
    launch = s.start("fail1ignore", "--grace-period", "1", seconds=0.3)
    summary = ended(s, launch, 3, "rank_failed", words=["grace period of 1.0 s is over: killing the ranks"])
    assert summary["ranks"][0]["killed_by_launcher"]


for event in ("engine_signal", "launcher_gone", "job_timeout", "stall"):

    @case("stopping", event)
    def _(s, event=event):
        # One stop: the grace period holds; rank 0 ends its 4 s SIGTERM handler.
        options = {"job_timeout": ("--job-timeout", "1.5"), "stall": ("--stall-timeout", "1.5")}.get(event, ())
        launch = in_stopping_after_failure(s, *options)
        if event in ("engine_signal", "launcher_gone"):
            deliver(s, launch, event)
        code = None if event == "launcher_gone" else 3
        # A stop that is not the failure's: noted (the job is not restarted), the grace period holding.
        summary = ended(s, launch, code, "rank_failed", journal=[
            "%s in stopping: %s" % (event, "ignored" if event == "stall" else "note")]
                        if event != "launcher_gone" else [])
        assert summary["ranks"][0]["exit_code"] == 0 and not summary["ranks"][0]["killed_by_launcher"]


# --- Killing: rank 1 failed, rank 0 was sent SIGKILL; held there 2.5 s.


@case("killing", "rank_exited")
def _(s):
    launch = in_killing(s)
    ended(s, launch, 3, "rank_failed", journal=["rank_exited in killing: note"])


@case("killing", "ranks_gone")
def _(s):
    launch = in_killing(s)
    ended(s, launch, 3, "rank_failed", journal=["killing -> draining on ranks_gone"])


for event in DAEMON_STOPS + ("kill_request", "job_timeout", "stall"):

    @case("killing", event)
    def _(s, event=event):
        options = {"job_timeout": ("--job-timeout", "1.2"), "stall": ("--stall-timeout", "0.8")}.get(event, ())
        if event == "kill_request":
            launch = s.start_api("fail1ignore", seconds=0.3, hold="killing:2500")
            launch.wait_for("logs in")
        else:
            launch = in_killing(s, *options)
        assert launch.wait_for_state("killing"), launch.text()
        if event not in ("job_timeout", "stall"):
            deliver(s, launch, event)
        code = None if event == "launcher_gone" else 3
        journal = [] if event == "launcher_gone" else [
            "%s in killing: %s" % (event, "ignored" if event == "stall" else "note")]
        if event == "repeated_stop_request":
            journal = ["stop_request in killing: note", "repeated_stop_request in killing: note"]
        summary = ended(s, launch, code, "rank_failed", journal=journal)
        assert summary["ranks"][0]["killed_by_launcher"]


# --- Draining: every rank exited 0; held there 2.5 s.


@case("draining", "output_drained")
def _(s):
    launch = in_draining(s)
    ended(s, launch, 0, "none", journal=["draining -> waiting_for_servers on output_drained"])


for state, setup in (("draining", in_draining), ("waiting_for_servers", in_waiting)):
    for event in ("stop_request", "engine_signal", "launcher_gone", "kill_request"):

        @case(state, event)
        def _(s, state=state, setup=setup, event=event):
            if event == "kill_request":
                launch = s.start_api("exit", seconds=0.2, hold="%s:2500" % state)
                assert launch.wait_for_state(state), launch.text()
            else:
                launch = setup(s)
            since = deliver(s, launch, event)
            code, reason, _ = STOPS[event]
            summary = ended(s, launch, code, reason, stopped_in=state, within=PROMPT, since=since,
                            journal=["%s -> done on %s" % (state, event)])
            assert [r["exit_code"] for r in summary["ranks"]] == [0, 0]

    @case(state, "job_timeout")
    def _(s, state=state, setup=setup):
        launch = setup(s, "--job-timeout", "1", hold_ms=2000)
        if state == "draining":
            # Kept for the next state, where a job of one server is done at once: the ranks ended in time.
            ended(s, launch, 0, "none", journal=["job_timeout in draining: deferred", "job_timeout in done: ignored"])
        else:
            ended(s, launch, 124, "timed_out", stopped_in=state, journal=["waiting_for_servers -> done on job_timeout"])


@case("draining", "stall")
def _(s):
    launch = in_draining(s, "--stall-timeout", "0.5")
    ended(s, launch, 0, "none", journal=["stall in draining: ignored"])


@case("waiting_for_servers", "servers_done")
def _(s):
    launch = in_waiting(s)
    ended(s, launch, 0, "none", journal=["waiting_for_servers -> done on servers_done"])


@case("draining", "repeated_stop_request")
def _(s):
    # Stopped by a first Ctrl-C, the ranks gone, held in draining: a second one ends it.
    launch = s.start("working", hold="draining:4000")
    ranks_up(launch)
    launch.signal(signal.SIGINT)
    assert launch.wait_for_state("draining"), launch.text()
    since = deliver(s, launch, "stop_request")
    ended(s, launch, 130, "requested", stopped_in="running", within=PROMPT, since=since,
          journal=["draining -> done on repeated_stop_request"])


# --- Done: the result is out; what comes later changes nothing.


def done_job(s, *options):
    launch = s.start("exit", *options, seconds=0.2)
    ended(s, launch, 0, "none")
    return launch


for event in ("stop_request", "repeated_stop_request", "engine_signal", "launcher_gone", "supervisor_gone"):

    @case("done", event)
    def _(s, event=event):
        launch = done_job(s)
        before = launch.summary()
        for signo in {"supervisor_gone": [signal.SIGKILL], "launcher_gone": [signal.SIGKILL]}.get(
                event, [signal.SIGINT, signal.SIGINT] if event == "repeated_stop_request" else [signal.SIGTERM]):
            try:
                os.kill(launch.proc.pid, signo)  # reaped: nobody is there any more
                raise AssertionError("the launcher is still there")
            except ProcessLookupError:
                pass
        assert launch.summary() == before
        assert s.left() == [] and s.devices_free()


@case("done", "kill_request")
def _(s):
    launch = s.start_api("exit", seconds=0.2)
    assert launch.wait_for_state("done"), launch.text()
    time.sleep(0.5)  # the supervisor has delivered the result
    deliver(s, launch, "kill_request")
    ended(s, launch, 0, "none", words=["RESULT 0 none"])


for event, option in (("job_timeout", "--job-timeout"), ("stall", "--stall-timeout")):

    @case("done", event)
    def _(s, option=option):
        launch = done_job(s, option, "0.5")
        before = launch.summary()
        time.sleep(1.0)  # past the timeout: no clock of the job is left to fire
        assert launch.summary() == before and s.left() == []
