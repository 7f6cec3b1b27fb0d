"""What a rep's plan (fault_plan.py) expects of each server, as
docs/architecture.md's life-cycle table and docs/multi-server.md say: the
job's exit code, stop_reason and stopped_in in summary.json, what its
caller ends with, the words of its report, and which rank statuses each
behaviour allows.
"""

import signal

# Where the stop is named when it is not in running: held after its ranks
# ended, a server takes the stop there (draining, waiting_for_servers).
AFTER_RANKS_WORDS = {
    "draining": "(it came after this server's ranks had ended)",
    "waiting_for_servers": "(it came after this server's ranks had ended, while it waited for the other servers)",
}


class Expected:
    """One server's expected end."""

    def __init__(self, job_code, reason, stopped_in, first_failure=None):
        self.job_code = job_code  # summary.json's exit_code
        self.reason = reason  # stop_reason
        self.stopped_in = stopped_in  # None when nothing stopped the job
        self.first_failure = first_failure
        self.caller_killed = False  # the driver SIGKILLs this server's caller
        self.caller_code = job_code  # the CLI's exit status
        self.outcome = None  # the Python caller's: returned, runtime_error, keyboard_interrupt
        self.words = []  # in its report
        self.reported = job_code != 0  # the caller prints (or raises) a report
        self.peer_server = None  # the server a peer event names
        self.journal = []  # lines of its <run>/events.txt, in this order
        self.console = []  # in the CLI's standard error


def _origin(plan):
    """The origin server's end: the ending as the life cycle answers it in the state it is held in."""
    ending, python = plan.ending, plan.caller == "python"
    if ending == "success":
        e = Expected(0, "none", None)
    elif ending == "rank_failure":
        e = Expected(plan.behaviours[plan.primary].own_code(), "rank_failed", "running", plan.primary)
    elif ending == "timeout":
        e = Expected(124, "timed_out", "running")
    elif ending == "terminate" and not python:  # the CLI's SIGTERM: a signal's stop, 143
        e = Expected(128 + signal.SIGTERM, "signaled", "running")
    elif ending in ("terminate", "interrupt"):
        e = Expected(130, "requested", "running")
    else:  # caller_kill: the supervisor stops the job itself and records why (128 + SIGHUP)
        e = Expected(128 + signal.SIGHUP, "launcher_gone", "running")
    if plan.hold in ("draining", "waiting_for_servers"):
        e.stopped_in = plan.hold
        if ending == "timeout":
            # Kept while draining, taken in waiting_for_servers: a job of
            # one server is done at once there (its ranks ended in time),
            # one of several stops waiting for the others.
            e = Expected(0, "none", None) if len(plan.servers) == 1 else Expected(
                124, "timed_out", "waiting_for_servers")
        if e.stopped_in in AFTER_RANKS_WORDS:
            e.words.append(AFTER_RANKS_WORDS[e.stopped_in])
    e.caller_code = e.job_code
    e.caller_killed = "caller_kill" in (ending, plan.second)
    e.journal = _held_journal(plan)
    if plan.hold == "starting" and not python:
        e.console.append("holding the job in starting for %d ms" % plan.hold_ms)
    if python:
        if e.job_code == 0:
            e.outcome = "returned"
        elif plan.second == "interrupt" or ending == "interrupt":
            e.outcome = "keyboard_interrupt"
        elif ending == "terminate":
            e.outcome = "returned"  # wait() after terminate() returns 130
        else:
            e.outcome = "runtime_error"
    return e


def job_event(plan, action):
    """The life-cycle event an ending or a second event is to the supervisor."""
    if action == "terminate":
        return "engine_signal" if plan.caller == "cli" else "stop_request"
    return {"interrupt": "stop_request", "caller_kill": "launcher_gone", "timeout": "job_timeout",
            "rank_failure": "rank_failed"}[action]


def _held_journal(plan):
    """What the origin's journal says of the state it was held in."""
    if plan.hold == "killing":
        second = job_event(plan, plan.second)
        if second == job_event(plan, plan.ending) == "stop_request":
            second = "repeated_stop_request"  # a person's second request
        return ["-> killing on ", "%s in killing: note" % second]
    if plan.hold not in ("draining", "waiting_for_servers"):
        return []
    if plan.ending != "timeout":
        return ["%s -> done on %s" % (plan.hold, job_event(plan, plan.ending))]
    if len(plan.servers) == 1:
        return ["job_timeout in draining: deferred", "job_timeout in done: ignored"]
    return ["waiting_for_servers -> done on job_timeout"]


def expected_end(plan, server):
    """Expected of `server` (a fault_plan.Server)."""
    if server.index == plan.origin:
        e = _origin(plan)
    elif plan.ending == "success":
        e = Expected(0, "none", None)
    else:
        # Told by the hub: every other server stops, naming the origin.
        origin = plan.servers[plan.origin].server_id
        if plan.ending == "rank_failure":
            e = Expected(plan.behaviours[plan.primary].own_code(), "peer_failed", "running")
            e.words.append("the job was stopped because rank %d on server %s failed with " % (plan.primary, origin))
        else:
            e = Expected(1, "peer_stopped", "running")
            e.words.append("the job was stopped because server %s was stopped (" % origin)
        e.peer_server = origin
        e.caller_code = e.job_code
    e.reported = e.job_code != 0 and not e.caller_killed
    return e


def allowed_statuses(plan, server, rank):
    """The (shell code, terminated_by_launcher) pairs summary.json may give `rank`."""
    b = plan.behaviours[rank]
    own = b.own_code()
    if plan.ends_on_its_own(server) or rank == plan.primary:
        return {(own, False)}
    # Stopped by the launcher, or (exit 0 only) ended by itself before or
    # while the stop came; a rank failing on its own after the first failure
    # is always one the launcher stopped.
    allowed = {(128 + signal.SIGKILL, True)}
    if not b.ignore_term:
        allowed.add((128 + signal.SIGTERM, True))
    if own is not None:
        allowed.add((own, True))
        if own == 0:
            allowed.add((0, False))
    return allowed


def daemons_counted(plan):
    """Whether every rank had started its daemon before any stop, so that
    leftover_processes_killed must count them all: the driver sends the
    ending once every rank runs, and a late job timeout comes after them."""
    return plan.ending in ("success", "interrupt", "terminate", "caller_kill") or plan.hold in (
        "draining", "waiting_for_servers")
