"""The jobs this process started: a job whose handle is dropped while it
runs is kept running here until this process exits (as davincirunsdk 0.1.x's
jobs outlived their handles), ``running_jobs()`` finds every running job
again, and the jobs still running when the interpreter exits are stopped
(SIGTERM, then SIGKILL after their grace period) before it does.

A process killed outright (SIGKILL, the OOM killer) runs no exit handler:
its jobs are then stopped by their supervisor processes, whose lifeline to
this process closes (docs/architecture.md, "Process model").
"""

import atexit
import itertools
import os
import sys
import threading
import warnings
import weakref
from typing import Any, List

# Every job started here, weakly: a handle the caller still holds.
_started: "weakref.WeakSet[Any]" = weakref.WeakSet()
# Jobs whose handle was dropped while they ran, until they end.
_kept: List[Any] = []
# Reentrant: a handle can be dropped (its __del__ run) by the garbage
# collector while this thread holds the lock.
_lock = threading.RLock()
_order = itertools.count()

# How long the exit handler sleeps between checks, in seconds.
_POLL_SECONDS = 0.1


def register(job):
    """Records `job` (a DistributedJob that has just started)."""
    job._order = next(_order)
    job._owner_pid = os.getpid()
    with _lock:
        _started.add(job)


def keep(job):
    """Keeps `job`, whose handle is being dropped (its ``__del__``) while it
    still runs, alive until it ends or this process exits; warns once.
    Returns False when the interpreter is already shutting down: the caller
    then stops the job itself."""
    if sys.is_finalizing() or getattr(job, "_owner_pid", None) != os.getpid():
        return False
    with _lock:
        _kept.append(job)  # resurrects the handle: its __del__ will not run again
        _started.add(job)
    warnings.warn(
        "job %s keeps running though its handle was dropped; it is stopped (SIGTERM, then SIGKILL after "
        "%g s) when this process exits, and davincirunsdk.running_jobs() returns it" % (job.job_id, job._grace_period),
        RuntimeWarning,
        stacklevel=3,  # keep() <- __del__ <- the line that dropped the handle
    )
    return True


def running_jobs():
    """The jobs this process started that are still running, oldest first,
    including those whose handle was dropped (the same DistributedJob
    objects). A job is listed until it is over, whether or not someone
    waited for it.

    Returns:
        list[DistributedJob]
    """
    with _lock:
        for job in [job for job in _kept if job._core.done]:
            _kept.remove(job)
        jobs = [job for job in list(_started) if not job._core.done and job._owner_pid == os.getpid()]
    return sorted(jobs, key=lambda job: job._order)


def holding(supervisor_pid):
    """The running job of this process whose supervisor is `supervisor_pid`, or None."""
    for job in running_jobs():
        if job.supervisor_pid == supervisor_pid:
            return job
    return None


def _stop_at_exit():
    jobs = running_jobs()
    for job in jobs:
        try:
            sys.stderr.write(
                "davincirunsdk: this process is exiting: stopping job %s (SIGTERM, then SIGKILL after %g s)\n"
                % (job.job_id, job._grace_period)
            )
            sys.stderr.flush()
        except Exception:  # no usable stderr at exit (a closed pipe, a kernel shutting down)
            pass
        job._core.request_stop()
    for job in jobs:
        while True:
            try:
                if job._core.wait_for(_POLL_SECONDS, False):
                    break
            except KeyboardInterrupt:  # Ctrl-C while exiting: kill rather than keep the user waiting
                for other in jobs:
                    other._core.request_kill()


atexit.register(_stop_at_exit)
