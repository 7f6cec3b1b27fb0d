"""The cells of the life-cycle table of a job that restarts
(docs/restarts.md), on one server: rank 1 fails in the first attempt
(exit 3) and every rank of the second exits 0 ("fail1once" of
lifecycle_support.py). Stopped during the restart delay, the job's restart
is called off and the stop names its end, as in any other state."""

import time

from lifecycle_cases import PROMPT, STOPS, case, deliver, ended

RESTART = ("--max-restarts", "1")


def restarting(s, *options, delay="6"):
    """Rank 1 failed; the job waits `delay` s to restart."""
    launch = s.start("fail1once", *RESTART, "--restart-delay", delay, *options, seconds=0.3)
    assert launch.wait_for_state("restarting"), launch.text()
    return launch


def called_off(summary, why):
    """The record of a job whose restart was called off by `why`."""
    assert [a["attempt"] for a in summary["attempts"]] == [1], summary["attempts"]
    first = summary["attempts"][0]
    assert first["restarted"] is False and first["first_failure"]["rank"] == 1, first
    assert first["decision"] == "not restarted: the restart was called off: " + why, first["decision"]


@case("waiting_for_servers", "restart_ordered")
def _(s):
    launch = s.start("fail1once", *RESTART, "--restart-delay", "0.2", seconds=0.3)
    summary = ended(s, launch, 0, "none", journal=["draining -> waiting_for_servers on output_drained",
                                                    "waiting_for_servers -> restarting on restart_ordered"],
                    words=["attempt 1 of 2: rank 1 (pid ", "failed with exit code 3 (ValueError: rank 1 broke on "
                           "purpose); restarting the job in 0.2 s (attempt 2 of 2)"])
    assert [(a["attempt"], a["restarted"], a["stop_reason"]) for a in summary["attempts"]] == [
        (1, True, "rank_failed"), (2, False, "none")]
    assert summary["attempts"][0]["root_cause"] == "ValueError: rank 1 broke on purpose"


@case("restarting", "delay_over")
def _(s):
    launch = s.start("fail1once", *RESTART, "--restart-delay", "1", seconds=0.3)
    assert launch.wait_for_state("restarting"), launch.text()
    entered = time.monotonic()
    assert launch.wait_for("restarting -> starting on delay_over"), launch.text()
    waited = time.monotonic() - entered
    assert 0.8 < waited < 1.0 + PROMPT, waited
    summary = ended(s, launch, 0, "none", journal=["starting -> running on ranks_started"])
    second = summary["attempts"][1]
    assert second["started"] - summary["attempts"][0]["ended"] >= 0.95, summary["attempts"]


for event in ("stop_request", "engine_signal", "launcher_gone"):

    @case("restarting", event)
    def _(s, event=event):
        launch = restarting(s)
        since = deliver(s, launch, event)
        code, reason, words = STOPS[event]
        summary = ended(s, launch, code, reason, stopped_in="restarting", within=PROMPT, since=since,
                        words=[words, "while the job waited to restart attempt 2: the restart is called off"]
                        if words else [], journal=["restarting -> done on %s" % event])
        called_off(summary, summary["stop_detail"])
        assert summary["first_failure"] is None


@case("restarting", "kill_request")
def _(s):
    launch = s.start_api("fail1once", seconds=0.3, keywords={"max_restarts": 1, "restart_delay": 6})
    assert launch.wait_for_state("restarting"), launch.text()
    since = deliver(s, launch, "kill_request")
    summary = ended(s, launch, 130, "requested", stopped_in="restarting", within=PROMPT, since=since,
                    words=["RESULT 130 requested"], journal=["restarting -> done on kill_request"])
    called_off(summary, "kill requested")


@case("restarting", "job_timeout")
def _(s):
    # The job timeout counts from the first attempt's start: it comes during the restart delay.
    launch = restarting(s, "--job-timeout", "2")
    summary = ended(s, launch, 124, "timed_out", stopped_in="restarting", journal=["restarting -> done on job_timeout"],
                    words=["the job timeout of 2 s is reached while the job waited to restart attempt 2"])
    called_off(summary, "the job timeout of 2 s is reached")


@case("restarting", "supervisor_gone")
def _(s):
    launch = restarting(s)
    since = deliver(s, launch, "supervisor_gone")
    ended(s, launch, 1, None, words=["ended with signal 9 (SIGKILL) before reporting the result"], within=PROMPT,
          since=since)
