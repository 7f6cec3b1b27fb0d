"""Starting, waiting for and stopping distributed training jobs.

The signatures of ``start_and_wait_distributed_train``,
``start_distributed_train`` and ``wait_distributed_train`` are those of
davincirunsdk 0.1.x; the new parameters are keyword-only and optional.
"""

import os
import shlex
import warnings

from . import _core
from ._cache_dir import make_cache_dir, remove_cache_dir
from ._console import console_mode, in_ipython_kernel
from ._live import WAKE_SECONDS, LiveOutput
from .errors import DeviceBusyError, DistributedRuntimeError, LaunchConfigError

# The per-job supervisor process, installed inside the package. When it is
# not there (a build tree), the library looks for it by itself.
_SUPERVISOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "davincirun-supervisor")


def _supervisor_program():
    if os.environ.get("DAVINCIRUN_SUPERVISOR"):
        return ""  # the library honours the variable
    return _SUPERVISOR if os.access(_SUPERVISOR, os.X_OK) else ""


def _normalize_command(command):
    if isinstance(command, (str, bytes)):
        # A convenience for "python train.py": split like a shell would, but
        # no shell ever runs, so nothing is expanded or interpreted.
        try:
            command = shlex.split(os.fsdecode(command))
        except ValueError as e:
            raise LaunchConfigError("cannot split the command %r: %s" % (command, e))
    try:
        argv = [os.fsdecode(os.fspath(part)) for part in command]
    except TypeError:
        raise TypeError("command must be a list of strings, e.g. ['python', 'train.py'], got %r" % (command,))
    if not argv or not argv[0]:
        raise LaunchConfigError("no command given: pass the program each rank runs, e.g. ['python', 'train.py']")
    return argv


def _normalize_ranks(ranks_to_show):
    if ranks_to_show is None:
        return None
    if isinstance(ranks_to_show, int) and not isinstance(ranks_to_show, bool):
        ranks_to_show = [ranks_to_show]
    try:
        ranks = [int(r) for r in ranks_to_show]
    except (TypeError, ValueError):
        raise LaunchConfigError("ranks_to_show: expected a list of rank ids, e.g. [0], got %r" % (ranks_to_show,))
    if any(isinstance(r, bool) for r in ranks_to_show):
        raise LaunchConfigError("ranks_to_show: expected a list of rank ids, e.g. [0], got %r" % (ranks_to_show,))
    return ranks


def _normalize_env(env):
    if env is None:
        return []
    items = []
    for name, value in dict(env).items():
        if not isinstance(name, str) or value is None:
            raise LaunchConfigError("env: expected names and values as strings, got %r=%r" % (name, value))
        value = os.fsdecode(value) if isinstance(value, bytes) else str(value)
        if not name or "=" in name or "\0" in name:
            raise LaunchConfigError("env: invalid variable name %r" % name)
        if "\0" in value:
            raise LaunchConfigError("env: the value of %s contains a NUL character" % name)
        if name in _core.IDENTITY_VARIABLES:
            warnings.warn("env: %s has no effect: the launcher sets it for each rank" % name, stacklevel=4)
        items.append((name, value))
    return items


class DistributedJob:
    """A running distributed job, as returned by :func:`start_distributed_train`.

    Attributes:
        run_dir (str): this run's log directory (``<log_dir>/<UTC time>-<job id>``),
            holding ``rank_<rank>.device_<physical device id>.log`` per rank.
        job_id (str): the ``JOB_ID`` every rank sees.
        pids (list[int]): the ranks' process ids, by rank.
        supervisor_pid (int): the job's ``davincirun-supervisor`` process, the
            parent of every rank. It stops the whole job, and every process the
            ranks started, when the job ends or when this Python process dies
            (even by SIGKILL); see docs/architecture.md, "Process model".
        plan: the launch plan (ranks, devices, environments).

    Keep the handle until the job is over: a job whose handle is dropped
    (garbage-collected) before it ends is killed, so that nothing is ever left
    running unwatched.
    """

    def __init__(self, plan, console, cache_dir=None, ranks_to_show=None, background=True):
        self.plan = plan
        self.job_id = plan.job_id
        self._cache_dir = cache_dir
        self._core = _core.Job(plan, console)
        self.run_dir = self._core.run_dir
        self.pids = list(self._core.pids)
        self.supervisor_pid = self._core.supervisor_pid
        self._result = None
        self._terminated = False
        self._live = LiveOutput(self._core, plan, console, ranks_to_show, in_ipython_kernel(), background)

    def __del__(self):
        core = getattr(self, "_core", None)
        if core is None:
            return
        if not core.done:
            core.request_kill_dropped()
        if getattr(self, "_cache_dir", None):
            while not core.wait_for(WAKE_SECONDS):
                pass
            remove_cache_dir(self._cache_dir)
            self._cache_dir = None

    def _finish(self, waited=False):
        if self._result is None:
            self._result = self._core.result()
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

    def __repr__(self):
        state = "finished" if self._core.done else "running"
        return "<DistributedJob %s: %d rank(s), %s, logs in %s>" % (self.job_id, len(self.pids), state, self.run_dir)

    def _repr_html_(self):
        """The job's status table (rank, device, pid, status, time, last output) in a notebook."""
        return self._live.status.html()

    def _repr_pretty_(self, printer, cycle):
        """The same table as text, for IPython's text/plain form."""
        printer.text(self._live.status.text())

    def terminate(self):
        """Stops every rank: SIGTERM to each rank's process group, SIGKILL after
        the grace period. Calling it twice kills at once. Returns immediately;
        call :meth:`wait` to wait for the end, which then returns 130 (or 0
        when every rank had already exited 0) instead of raising, unless a
        rank failed before the stop."""
        self._terminated = True
        self._core.request_stop()

    @property
    def result(self):
        """The job's result once it is over, else ``None``: ``ranks`` (each with
        ``rank``, ``pid``, ``log_path``, ``exit_code``, ``signal``,
        ``returncode``, ``terminated_by_launcher``, ``killed_by_launcher``,
        ``started``/``ended`` in seconds since the epoch, ``output_bytes``,
        ``log_error``), ``first_failure``, ``stop_reason``, ``exit_code``,
        ``summary_error`` (why ``summary.json`` could not be written, else None)."""
        if not self._core.done:
            return None
        return self._finish()

    def poll(self):
        """``None`` while the job runs, else its exit code (see :meth:`wait`)."""
        if not self._core.done:
            return None
        return self._finish().exit_code

    def wait(self, destroy_when_finished=True, raise_exception=True):
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
        except BaseException:  # Ctrl-C, or anything else that ends the wait early
            self._stop_after_interrupt()
            raise
        result = self._finish(waited=True)
        if result.success:
            return 0
        if raise_exception and (result.first_failure is not None or not self._terminated):
            raise _runtime_error(result)
        return result.exit_code

    def _stop_after_interrupt(self):
        self._terminated = True  # the caller's own stop, as with terminate()
        self._core.request_stop()
        while True:
            try:
                self._live.wait()
                break
            except KeyboardInterrupt:
                self._core.request_stop()  # a second Ctrl-C: kill now
        self._finish(waited=True)


def _is_child_of_this_process(pid):
    """True when `pid` (e.g. a job's supervisor process) is a child of this process."""
    try:
        with open("/proc/%d/stat" % int(pid), "rb") as f:
            stat = f.read()
        return int(stat[stat.rindex(b")") + 2:].split()[1]) == os.getpid()
    except (OSError, ValueError, TypeError, IndexError):
        return False


def _runtime_error(result):
    report = result.failure_report()
    error = DistributedRuntimeError("distributed training failed: " + report.rstrip("\n"))
    error.result = result
    if result.first_failure is not None:
        failed = result.ranks[result.first_failure]
        error.rank = failed.rank
        error.exit_code = failed.exit_code
        error.signal = failed.signal
        error.returncode = failed.returncode
        error.log_file = failed.log_path
        error.log_tail = _core.read_log_tail(failed.log_path)
    else:
        error.returncode = result.exit_code
    return error


def start_distributed_train(
    command,
    work_dir="./",
    log_dir="./log",
    *,
    output_notebook=None,
    rank_table=None,
    server_id=None,
    env=None,
    grace_period=None,
    random_cache_dir=False,
    job_timeout=None,
    wait_timeout=300,
    ranks_to_show=None,
):
    """Starts one process per device of this machine's server in the rank table.

    Args:
        command (list[str] | str): the program every rank runs, e.g.
            ``["python", "train.py"]``. Never run through a shell: each item
            (str, bytes or path-like) reaches the ranks byte for byte; a
            string is split like a shell would (quotes honoured, nothing
            expanded). ``"python"`` is looked up
            in PATH, which inside a notebook may differ from the kernel's
            interpreter (``sys.executable``).
        work_dir (str): working directory of the ranks; relative paths in
            ``command`` resolve from it. Default ``"./"``.
        log_dir (str): where this run's log directory is created (relative to
            the caller's working directory). Default ``"./log"``.
        output_notebook (bool | None): show the ranks' output live, each line
            prefixed by its rank (in the rank's colour in a notebook or on a
            terminal; ``NO_COLOR`` turns colour off). ``None`` (default) or
            ``True``: yes; ``False``: log files only. Inside a Jupyter kernel
            the calling cell also gets a status view (rank, device, pid,
            status, time, last line or progress bar), updated in place and
            turned into the summary when the job ends; lines redrawn with
            ``'\r'`` (tqdm) show as one line per rank; the display takes at
            most 24 KiB of lines every 0.1 s and counts what it skips (the
            log files keep every byte). For a job not waited for in the same
            cell, the lines go into the view of the starting cell, never into
            other cells. See docs/notebooks.md.
        rank_table (str | None): rank table file, or a directory holding
            ``jobstart_hccl.json`` or ``hccl.json``; default ``$RANK_TABLE_FILE``.
        wait_timeout (float): seconds to wait for a rank table the platform is
            still writing (missing, empty, half-written, status
            "initializing"), with a message on stderr now and then; 0: no
            waiting. Default 300.
        server_id (str | None): this machine's ``server_id`` in the table
            (needed for multi-server tables).
        env (dict[str, str] | None): extra variables for every rank; they win
            over inherited ones, not over the rank identity variables.
        grace_period (float | None): seconds between SIGTERM and SIGKILL when
            ranks are stopped; default 10, at most 86400.
        job_timeout (float | None): stop every rank once the job has run this
            many seconds (then ``wait`` raises DistributedRuntimeError, or
            returns 124); default: no limit.
        random_cache_dir (bool): give the ranks a fresh
            ``MS_COMPILER_CACHE_PATH`` (removed after the job) unless one is set.
        ranks_to_show (list[int] | int | None): show only these ranks' output
            live, e.g. ``[0]`` (or ``0``); the others go to their log files only. Default
            ``None``: every rank. Ranks on other servers are ignored, so the
            same value works on every machine of the job.

    Returns:
        DistributedJob

    Raises:
        RankTableError, LaunchConfigError, SpawnError, LauncherSystemError.
    """
    return _start(
        True, command, work_dir, log_dir, output_notebook, rank_table, server_id, env, grace_period,
        random_cache_dir, job_timeout, wait_timeout, ranks_to_show,
    )


def _start(background, command, work_dir, log_dir, output_notebook, rank_table, server_id, env, grace_period,
           random_cache_dir, job_timeout, wait_timeout, ranks_to_show):
    """start_distributed_train(); `background`: keep a notebook's status
    view current while nobody waits (False when the caller waits at once)."""
    argv = _normalize_command(command)
    extra = _normalize_env(env)
    if grace_period is None:
        grace_period = _core.DEFAULT_GRACE_PERIOD
    cache_dir = None
    names = {name for name, _ in extra}
    if random_cache_dir and "MS_COMPILER_CACHE_PATH" not in names and not os.environ.get("MS_COMPILER_CACHE_PATH"):
        cache_dir = make_cache_dir()
        extra.append(("MS_COMPILER_CACHE_PATH", cache_dir))
    shown = _normalize_ranks(ranks_to_show)
    try:
        plan = _core.plan_launch(
            # As bytes: an argument or value that is not UTF-8 (read from a
            # file name, say) reaches the ranks unchanged.
            [os.fsencode(arg) for arg in argv],
            os.fspath(rank_table) if rank_table is not None else "",
            os.fspath(work_dir),
            os.fspath(log_dir),
            None if server_id is None else str(server_id),
            [(os.fsencode(name), os.fsencode(value)) for name, value in extra],
            float(grace_period),
            _core.DEFAULT_DRAIN_TIMEOUT,
            float(job_timeout or 0.0),
            float(wait_timeout),
            supervisor_program=_supervisor_program(),
            ranks_to_show=shown,
            # The supervisor process removes it even if this process dies.
            remove_after_job=[cache_dir] if cache_dir else [],
        )
        for warning in plan.warnings:
            warnings.warn(warning, UserWarning, stacklevel=3)
        return DistributedJob(plan, console_mode(output_notebook), cache_dir, shown, background)
    except DeviceBusyError as e:
        if cache_dir:
            remove_cache_dir(cache_dir)
        if _is_child_of_this_process(e.holder_pid):
            e.args = (str(e) + "\n(that job was started by this process, e.g. by an earlier cell: call its "
                      "terminate() or wait() first)",) + e.args[1:]
        raise
    except BaseException:
        if cache_dir:
            remove_cache_dir(cache_dir)
        raise


def wait_distributed_train(fmk_manager, destroy_when_finished=True, raise_exception=True):
    """Waits for a job from :func:`start_distributed_train`; see :meth:`DistributedJob.wait`."""
    return fmk_manager.wait(destroy_when_finished=destroy_when_finished, raise_exception=raise_exception)


def start_and_wait_distributed_train(
    command,
    work_dir="./",
    log_dir="./log",
    *,
    output_notebook=None,
    random_cache_dir=True,
    destroy_when_finished=True,
    raise_exception=True,
    rank_table=None,
    server_id=None,
    env=None,
    grace_period=None,
    job_timeout=None,
    wait_timeout=300,
    ranks_to_show=None,
):
    """Starts distributed training on this machine and waits for it to end.

    One process per device of this machine's server in the rank table
    (``$RANK_TABLE_FILE`` unless ``rank_table`` is given), each with
    ``RANK_ID``, ``RANK_SIZE``, ``DEVICE_ID``, ``ASCEND_DEVICE_ID``,
    ``RANK_TABLE_FILE``, ``JOB_ID``, ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
    ``MASTER_ADDR``, ``MASTER_PORT``... (docs/environment.md). Output goes to
    one log file per rank under a new directory in ``log_dir`` and, prefixed
    by rank, to the caller's output. When a rank fails, the others are
    stopped at once.

    Args:
        command, work_dir, log_dir, output_notebook, rank_table, server_id,
        env, grace_period, job_timeout, wait_timeout, ranks_to_show: as for
        :func:`start_distributed_train`.
        random_cache_dir (bool): default True: a fresh MindSpore compiler
            cache directory for this job, removed afterwards (a
            ``MS_COMPILER_CACHE_PATH`` already set wins).
        destroy_when_finished, raise_exception: as for :meth:`DistributedJob.wait`.

    Returns:
        int: 0 on success; with ``raise_exception=False``, the first failed
        rank's exit code (128 + N for signal N).

    Raises:
        DistributedRuntimeError: a rank failed (names the rank, how it ended,
            its log file and the end of its log).
        KeyboardInterrupt: Ctrl-C, after every rank was stopped.
        RankTableError, LaunchConfigError, SpawnError: nothing was started.
    """
    job = _start(
        False, command, work_dir, log_dir, output_notebook, rank_table, server_id, env, grace_period,
        random_cache_dir, job_timeout, wait_timeout, ranks_to_show,
    )
    return job.wait(destroy_when_finished=destroy_when_finished, raise_exception=raise_exception)
