"""The handle of a running distributed job, and the error a failed one raises."""

from __future__ import annotations

import os
import warnings
from typing import Any, List, Optional

from . import _core, _jobs
from ._cache_dir import remove_cache_dir
from ._console import in_ipython_kernel
from ._live import WAKE_SECONDS, LiveOutput
from ._rank_process import RankProcess
from .errors import SURFACED, DistributedRuntimeError, surfaced


class DistributedJob:
    """A running distributed job, as returned by :func:`start_distributed_train`.

    Attributes:
        run_dir (str): this run's log directory (``<log_dir>/<UTC time>-<job id>``),
            holding ``rank_<rank>.device_<physical device id>.log`` per rank
            (``...attempt2.log`` and so on for the attempts of a job that
            restarts, ``max_restarts``).
        job_id (str): the ``JOB_ID`` every rank sees.
        pids (list[int]): the ranks' process ids, by rank: in a job that
            restarts, the attempt running (updated whenever this process
            shows or waits for the job's output, and at its end).
        supervisor_pid (int): the job's ``davincirun-supervisor`` process, the
            parent of every rank. It stops the whole job, and every process the
            ranks started, when the job ends or when this Python process dies
            (even by SIGKILL); see docs/architecture.md, "Process model".
        plan (LaunchPlan): the launch plan (ranks, devices, environments).

    A job whose handle is dropped (garbage-collected) before it ends keeps
    running, with a RuntimeWarning saying so; :func:`running_jobs` returns it
    again. Every job still running when this Python process exits is
    stopped first (SIGTERM, then SIGKILL after the grace period); one killed
    outright stops its jobs all the same, through their supervisor.
    """

    run_dir: str
    job_id: str
    pids: List[int]
    supervisor_pid: int
    plan: _core.LaunchPlan

    def __init__(
        self,
        plan: _core.LaunchPlan,
        console: str,
        cache_dir: Optional[str] = None,
        ranks_to_show: Optional[List[int]] = None,
        background: bool = True,
        grace_period: float = 10.0,
    ) -> None:
        self.plan = plan
        self.job_id = plan.job_id
        self._cache_dir = cache_dir
        self._core = _core.Job(plan, console)
        self.run_dir = self._core.run_dir
        self.pids = list(self._core.pids)
        self.supervisor_pid = self._core.supervisor_pid
        self._result: Optional[_core.JobResult] = None
        self._terminated = False
        self._waited = False
        self._grace_period = grace_period
        self._live = LiveOutput(self._core, plan, console, ranks_to_show, in_ipython_kernel(), background, self.pids)
        _jobs.register(self)

    def __del__(self) -> None:
        core = getattr(self, "_core", None)
        if core is None:
            return
        if not core.done:
            if _jobs.keep(self):
                return  # runs on until it ends or this process exits
            core.request_kill_dropped()  # the interpreter is shutting down
        if getattr(self, "_cache_dir", None):
            while not core.wait_for(WAKE_SECONDS):
                pass
            remove_cache_dir(self._cache_dir)
            self._cache_dir = None

    def _finish(self, waited: bool = False) -> _core.JobResult:
        if self._result is None:
            self._result = self._core.result()
            self.pids[:] = [rank.pid for rank in self._result.ranks]  # the last attempt's
            if self._cache_dir:
                remove_cache_dir(self._cache_dir)
                self._cache_dir = None
            for rank in self._result.ranks:
                if rank.log_error:
                    warnings.warn(
                        "the log of rank %d is incomplete (%s): %s" % (rank.rank, rank.log_path, rank.log_error),
                        RuntimeWarning,
                        stacklevel=3,
                    )
            if self._result.summary_error:
                warnings.warn(
                    "the job summary %s could not be written: %s"
                    % (os.path.join(self.run_dir, "summary.json"), self._result.summary_error),
                    RuntimeWarning,
                    stacklevel=3,
                )
        self._live.finish(self._result, waited)
        return self._result

    def __repr__(self) -> str:
        state = "finished" if self._core.done else "running"
        return "<DistributedJob %s: %d rank(s), %s, logs in %s>" % (self.job_id, len(self.pids), state, self.run_dir)

    def _repr_html_(self) -> str:
        """The job's status table (rank, device, pid, status, time, last output) in a notebook."""
        return self._live.status.html()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """The same table as text, for IPython's text/plain form."""
        printer.text(self._live.status.text())

    def terminate(self) -> None:
        """Stops every rank: SIGTERM to each rank's process group, SIGKILL after
        the grace period. Calling it twice kills at once. Returns immediately;
        call :meth:`wait` to wait for the end, which then returns 130 (or 0
        when every rank had already exited 0) instead of raising, unless a
        rank failed before the stop."""
        self._terminated = True
        self._core.request_stop()

    def destroy(self) -> int:
        """Stops the job and waits for its end: :meth:`terminate` (unless it
        is over already), then ``wait(raise_exception=False)``. The name
        davincirunsdk 0.1.x's handle had for this; it never raises for a
        failed rank.

        Returns:
            int: as :meth:`wait`: 130 for a job it stopped (0 when every rank
            had already exited 0), else the first failed rank's code.
        """
        if self._waited and self._result is not None:  # over and shown already
            return 0 if self._result.success else self._result.exit_code
        if not self._core.done:
            self.terminate()
        return self.wait(raise_exception=False)

    @property
    def fmk_processes(self) -> List[RankProcess]:
        """The ranks on this machine, in rank order, each with ``rank``,
        ``device_id`` (physical), ``pid``, and ``returncode`` / ``poll()``
        (``None`` until the job is over; then the exit code, or -N for signal
        N, as ``subprocess.Popen`` has it). davincirunsdk 0.1.x listed
        ``subprocess.Popen`` objects here; the ranks are now children of the
        job's supervisor process (see :class:`RankProcess`). MindSpore's
        scheduler (``launch_mode="dynamic-cluster"``) is not listed: it is
        no rank; ``pids`` and ``result.ranks`` include it, last."""
        ranks = [i for i, a in enumerate(self.plan.ranks) if a.role == "rank"]
        return [RankProcess(self, index) for index in ranks]

    @property
    def result(self) -> Optional[_core.JobResult]:
        """The job's result once it is over, else ``None``: ``ranks`` (each with
        ``rank``, ``pid``, ``log_path``, ``exit_code``, ``signal``,
        ``returncode``, ``terminated_by_launcher``, ``killed_by_launcher``,
        ``started``/``ended`` in seconds since the epoch, ``output_bytes``,
        ``log_error``), ``first_failure``, ``stop_reason``, ``exit_code``,
        ``summary_error`` (why ``summary.json`` could not be written, else None)."""
        if not self._core.done:
            return None
        return self._finish()

    def poll(self) -> Optional[int]:
        """``None`` while the job runs, else its exit code (see :meth:`wait`)."""
        if not self._core.done:
            return None
        return self._finish().exit_code

    def wait(self, destroy_when_finished: bool = True, raise_exception: bool = True) -> int:
        """Waits for the job to end, showing the ranks' output live.

        The GIL is released while waiting. Ctrl-C (KeyboardInterrupt) stops
        every rank (SIGTERM, then SIGKILL after the grace period; a second
        Ctrl-C kills at once) and is re-raised once they are gone.

        Args:
            destroy_when_finished: kept for 0.1.x compatibility. Every process
                of a job is always stopped when the job ends, so ``False``
                changes nothing and gives a warning.
            raise_exception: when a rank fails, raise DistributedRuntimeError
                (default) instead of returning its code.

        Returns:
            int: 0 when every rank exited 0; otherwise (with
            ``raise_exception=False``) the first failed rank's exit code, or
            128 + N when signal N killed it; 130 after :meth:`terminate`.

        Raises:
            DistributedRuntimeError: a rank failed (``raise_exception=True``).
            KeyboardInterrupt: after stopping every rank on Ctrl-C.

        Any exception raised while waiting stops every rank gracefully before
        it propagates. A log file that could not take every byte (e.g. a full
        disk) is reported with a RuntimeWarning.
        """
        if not destroy_when_finished:
            warnings.warn(
                "destroy_when_finished=False has no effect: davincirunsdk always stops "
                "every process of a job when it ends",
                stacklevel=2,
            )
        try:
            self._live.wait()
        except SURFACED as error:  # Ctrl-C: raised as this method's own once every rank is stopped
            self._stop_after_interrupt()
            raise surfaced(error) from None
        except BaseException:  # anything else that ends the wait early
            self._stop_after_interrupt()
            raise
        self._waited = True
        result = self._finish(waited=True)
        if result.success:
            return 0
        if raise_exception and (result.first_failure is not None or not self._terminated):
            raise runtime_error(result)
        return result.exit_code

    def _stop_after_interrupt(self) -> None:
        self._terminated = True  # the caller's own stop, as with terminate()
        self._core.request_stop()
        while True:
            try:
                self._live.wait()
                break
            except KeyboardInterrupt:
                self._core.request_stop()  # a second Ctrl-C: kill now
        self._waited = True
        self._finish(waited=True)


def runtime_error(result: _core.JobResult) -> DistributedRuntimeError:
    """The DistributedRuntimeError of a failed job: its failure report, and
    the first failed rank's details as attributes."""
    report = result.failure_report()
    error = DistributedRuntimeError("distributed training failed: " + report.rstrip("\n"))
    error.result = result
    error.attempts = list(result.attempts)
    if result.first_failure is not None:
        failed = result.ranks[result.first_failure]
        error.rank = failed.rank
        error.role = failed.role
        error.exit_code = failed.exit_code
        error.signal = failed.signal
        error.returncode = failed.returncode
        error.log_file = failed.log_path
        error.log_tail = _core.read_log_tail(failed.log_path)
        cause = _core.root_cause(failed.log_path)
        error.root_cause = cause.text if cause.found else None
        error.root_cause_exception = cause.exception or None
        error.root_cause_error_code = cause.error_code or None
        error.hint = cause.hint or None
    elif result.peer_stop is not None:
        # Another server failed, was stopped or was lost: its words, its rank.
        peer = result.peer_stop
        error.server_id = peer.server_id
        error.rank = peer.rank
        error.role = peer.role
        error.exit_code = peer.exit_code
        error.signal = peer.signal
        error.returncode = result.exit_code
        error.root_cause = peer.detail or None
    else:
        error.returncode = result.exit_code
    return error
