"""The cells of the life-cycle table of a job that restarts
(docs/restarts.md), on one server and on two: rank 1 fails in the first attempt
(exit 3) and every rank of the second exits 0 ("fail1once" of
lifecycle_support.py). Stopped during the restart delay, the job's restart
is called off and the stop names its end, as in any other state."""

import os
import signal
import time

from lifecycle_cases import PROMPT, STOPS, case, deliver, ended

RESTART = ("--max-restarts", "1")


def restarting(s, *options, delay="6"):
    """Rank 1 failed; the job waits `delay` s to restart."""
    launch = s.start("fail1once", *RESTART, "--restart-delay", delay, *options, seconds=0.3)
    assert launch.wait_for_state("restarting"), launch.text()
    return launch


def called_off(summary, why, here=True):
    """The record of a job whose restart was called off by `why`; `here`:
    rank 1 failed on this server (else on the other, named in the attempt's stop)."""
    assert [a["attempt"] for a in summary["attempts"]] == [1], summary["attempts"]
    first = summary["attempts"][0]
    assert first["restarted"] is False, first
    if here:
        assert first["first_failure"]["rank"] == 1, first
    else:
        assert first["first_failure"] is None and "rank 1 on server 127.0.0.2 failed" in first["stop_detail"], first
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


# --- Two servers (127.0.0.1 holds rank 0 and the hub, 127.0.0.2 rank 1):
# the hub decides for both; another server stopped, lost, or failing again
# while this one waits to restart calls this server's restart off.

TWO_A, TWO_B = 0, 1


def both_restarting(s, delay_a="6", delay_b="6", mode_b="fail1once"):
    """Rank 1 (server B) failed in attempt 1; both servers wait to restart."""
    a = s.start("fail1once", *RESTART, "--restart-delay", delay_a, server=TWO_A, seconds=0.3)
    b = s.start(mode_b, *RESTART, "--restart-delay", delay_b, server=TWO_B, seconds=0.3)
    assert a.wait_for_state("restarting"), a.text()
    return a, b


@case("restarting", "peer_stopped", "two servers")
def _(s):
    a, b = both_restarting(s)
    assert b.wait_for_state("restarting"), b.text()
    b.signal(signal.SIGINT)
    summary = ended(s, a, 1, "peer_stopped", stopped_in="restarting", server=TWO_A,
                    journal=["restarting -> done on peer_stopped"],
                    words=["the job was stopped because server 127.0.0.2 was stopped (stop requested)"])
    called_off(summary, summary["stop_detail"], here=False)
    assert b.wait(timeout=30) == 130, b.text()


@case("restarting", "peer_lost", "two servers")
def _(s):
    a, b = both_restarting(s)
    assert b.wait_for_state("restarting"), b.text()
    os.kill(b.supervisor_pid(), signal.SIGKILL)
    summary = ended(s, a, 1, "peer_lost", stopped_in="restarting", server=TWO_A,
                    journal=["restarting -> done on peer_lost"], words=["server 127.0.0.2 was lost "])
    called_off(summary, summary["stop_detail"], here=False)
    b.wait(timeout=30)


@case("restarting", "peer_failed", "two servers")
def _(s):
    # Server B restarts at once and rank 1 fails again 0.3 s later, while
    # server A still waits out its 6 s.
    a, b = both_restarting(s, delay_b="0", mode_b="fail1")
    summary = ended(s, a, 3, "peer_failed", stopped_in="restarting", server=TWO_A,
                    journal=["restarting -> done on peer_failed"],
                    words=["rank 1 on server 127.0.0.2 failed with exit code 3"])
    called_off(summary, summary["stop_detail"], here=False)
    b.wait(timeout=30)
