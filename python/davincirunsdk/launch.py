"""Starting, waiting for and stopping distributed training jobs.

The signatures of ``start_and_wait_distributed_train``,
``start_distributed_train`` and ``wait_distributed_train`` are those of
davincirunsdk 0.1.x; the new parameters are keyword-only and optional.
Every launch option becomes a field of one ``LaunchOptions`` object of the
C++ core, by name; the core checks them all (``LaunchOptions.validate()``).
Here only the Python types are checked: a value of the wrong type is an
``OptionTypeError`` (a ``TypeError`` and a ``LaunchConfigError``) naming
the option.

Type names used below: ``Command`` is a str (split like a shell would) or a
sequence of str / bytes / path-like; ``PathLike`` is a str, bytes or
``os.PathLike``.
"""

from __future__ import annotations

import operator
import os
import shlex
import warnings
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _core, _jobs
from ._cache_dir import make_cache_dir, remove_cache_dir
from ._console import console_mode, in_ipython_kernel, output_watched, stop_request_name
from ._interpreter import warn_if_foreign
from ._work_dir import make_work_dir, remove_made_dirs
from .errors import SURFACED, DeviceBusyError, LaunchConfigError, OptionTypeError, surfaced
from .job import DistributedJob

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
Command = Union[str, bytes, Sequence[PathLike]]
EnvValue = Union[str, bytes, int, "os.PathLike[str]"]

# The per-job supervisor process, installed inside the package. When it is
# not there (a build tree), the library looks for it by itself.
_SUPERVISOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "davincirun-supervisor")

# How the lines of a wait for the rank table name not waiting, in this API's words.
_NO_WAIT = "wait_timeout=0"


def _supervisor_program() -> str:
    if os.environ.get("DAVINCIRUN_SUPERVISOR"):
        return ""  # the library honours the variable
    return _SUPERVISOR if os.access(_SUPERVISOR, os.X_OK) else ""


def _argv(command: Command) -> List[bytes]:
    """The command as bytes, so that an argument that is not UTF-8 (read from
    a file name, say) reaches the ranks unchanged."""
    if isinstance(command, (str, bytes)):
        # A convenience for "python train.py": split like a shell would, but
        # no shell ever runs, so nothing is expanded or interpreted.
        try:
            command = shlex.split(os.fsdecode(command))
        except ValueError as e:
            raise _option_error("command", "cannot split the command %r: %s" % (command, e)) from None
    try:
        return [os.fsencode(os.fspath(part)) for part in command]
    except TypeError:
        raise _option_error(
            "command", "command must be a list of strings, e.g. ['python', 'train.py'], got %r" % (command,),
            OptionTypeError) from None


def _option_error(option: str, message: str, kind: type = LaunchConfigError) -> LaunchConfigError:
    error = kind(message)
    error.option = option
    return error


def _env_mapping(env: Any) -> Mapping[Any, Any]:
    if env is None:
        return {}
    if not isinstance(env, Mapping):
        raise _option_error(
            "env", "env: expected a dict of variable names to values, e.g. {'HCCL_CONNECT_TIMEOUT': '600'}, got %r"
            % (env,), OptionTypeError)
    return env


def _env_pairs(env: Mapping[str, EnvValue]) -> List[Tuple[bytes, bytes]]:
    pairs = []
    for name, value in _env_mapping(env).items():
        # An int is written in decimal; a bool or float has no single spelling
        # a framework would read ("True"? "1"? "1e-05"?), so it is refused.
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(name, (str, bytes)) or not isinstance(value, (str, bytes, os.PathLike)):
            raise _option_error(
                "env", "env: expected names as str and values as str, bytes, path or int, got %r: %r" % (name, value),
                OptionTypeError)
        pairs.append((os.fsencode(name), os.fsencode(value)))
    return pairs


def _is_rank_id(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    try:
        operator.index(value)  # int, numpy integers...; not float or str
    except TypeError:
        return False
    return True


def _id_list(option: str, what: str, value: Union[int, Iterable[int]]) -> List[int]:
    items: Any = [value] if _is_rank_id(value) else value
    is_list = isinstance(items, Iterable) and not isinstance(items, (str, bytes, Mapping))
    items = list(items) if is_list else []
    if not is_list or not all(_is_rank_id(r) for r in items):
        message = "%s: expected a %s or a list of %ss, e.g. [0], got %r" % (option, what, what, value)
        raise _option_error(option, message, OptionTypeError)
    return [operator.index(r) for r in items]


def _rank_list(ranks_to_show: Union[int, Iterable[int]]) -> List[int]:
    return _id_list("ranks_to_show", "rank id", ranks_to_show)


def _device_list(devices: Union[int, Iterable[int]]) -> List[int]:
    return _id_list("devices", "device id", devices)


def _count(nproc: int) -> int:
    if not _is_rank_id(nproc):
        raise _option_error("nproc", "nproc: expected a number of ranks, got %r" % (nproc,), OptionTypeError)
    return operator.index(nproc)


def _restarts(max_restarts: int) -> int:
    if not _is_rank_id(max_restarts):
        raise _option_error("max_restarts", "max_restarts: expected a number of restarts, got %r" % (max_restarts,),
                            OptionTypeError)
    return operator.index(max_restarts)


def _mode(launch_mode: str) -> str:
    if not isinstance(launch_mode, str):
        raise _option_error(
            "launch_mode",
            "launch_mode: expected \"rank-table\", \"dynamic-cluster\", \"tf-config\" or \"cm\", got %r"
            % (launch_mode,),
            OptionTypeError)
    return launch_mode


# Python keyword -> (LaunchOptions field, conversion); other keywords are set as given.
_FIELDS: Dict[str, Tuple[str, Callable[[Any], Any]]] = {
    "rank_table": ("rank_table", os.fspath),
    "server_id": ("server_id", str),
    "env": ("env", _env_pairs),
    "ranks_to_show": ("ranks_to_show", _rank_list),
    "devices": ("devices", _device_list),
    "nproc": ("nproc", _count),
    "max_restarts": ("max_restarts", _restarts),
    "launch_mode": ("launch_mode", _mode),
    "work_dir": ("work_dir", os.fspath),
    "log_dir": ("log_dir", os.fspath),
}


def _launch_options(command: Command, keywords: Dict[str, Any]) -> _core.LaunchOptions:
    """One LaunchOptions, built by keyword; ``None`` keeps the core's default."""
    options = _core.LaunchOptions()
    options.command = _argv(command)  # type: ignore[assignment]  # bytes: any argument, unchanged
    for keyword, value in keywords.items():
        if value is None:
            continue
        field, convert = _FIELDS.get(keyword, (keyword, _unchanged))
        try:
            setattr(options, field, convert(value))
        except OptionTypeError:
            raise
        except TypeError as e:  # e.g. grace_period="10", work_dir=5
            message = str(e) if str(e).startswith(keyword) else "%s: %s" % (keyword, e)
            raise _option_error(keyword, message, OptionTypeError) from None
    return options


def _unchanged(value: Any) -> Any:
    return value


def _busy_note(holder_pid: Optional[int]) -> str:
    """What to add to a DeviceBusyError whose holder this process started, else ""."""
    job = _jobs.holding(holder_pid) if holder_pid else None
    if job is not None:
        return ("\n(that is job %s, started by this process, e.g. by an earlier cell: "
                "davincirunsdk.running_jobs() returns it; call its terminate() or wait() first)" % job.job_id)
    if holder_pid and _core.parent_pid(holder_pid) == os.getpid():
        return "\n(that job was started by this process: call its terminate() or wait() first)"
    return ""


def _start(
    command: Command, *, background: bool, output_notebook: Optional[bool], random_cache_dir: bool, **keywords: Any
) -> DistributedJob:
    """start_distributed_train(); `background`: keep a notebook's status
    view current while nobody waits (False when the caller waits at once)."""
    env = dict(_env_mapping(keywords.get("env")))
    cache_dir = None
    if random_cache_dir and "MS_COMPILER_CACHE_PATH" not in env and not os.environ.get("MS_COMPILER_CACHE_PATH"):
        cache_dir = make_cache_dir()
        env["MS_COMPILER_CACHE_PATH"] = cache_dir
    made_dir = None
    work_dir = keywords.get("work_dir") or "."
    try:
        options = _launch_options(command, dict(keywords, env=env))
        options.supervisor_program = _supervisor_program()
        options.output_watched = output_watched(output_notebook)
        options.stop_request_name = stop_request_name(in_ipython_kernel())
        options.launcher_name = "the notebook kernel" if in_ipython_kernel() else "the Python process that started it"
        options.no_wait_setting = _NO_WAIT
        if cache_dir:
            options.remove_after_job = [cache_dir]  # by the supervisor process, even if this process dies
        if in_ipython_kernel():
            # stacklevel: warn_if_foreign <- _start <- start_*_distributed_train <- the caller
            warn_if_foreign(_argv(command)[:1], env, work_dir, stacklevel=4)
        made_dir = make_work_dir(work_dir)
        plan = _core.plan_launch(options)
        for warning in plan.warnings:
            warnings.warn(warning, UserWarning, stacklevel=3)
        return DistributedJob(plan, console_mode(output_notebook), cache_dir, options.ranks_to_show, background,
                              options.grace_period)
    except BaseException as e:
        if cache_dir:
            remove_cache_dir(cache_dir)
        if made_dir:
            remove_made_dirs(work_dir, made_dir)
        if isinstance(e, DeviceBusyError):
            note = _busy_note(e.holder_pid)
            if note:
                e.args = (str(e) + note,) + e.args[1:]
        raise


def start_distributed_train(
    command: Command,
    work_dir: PathLike = "./",
    log_dir: Optional[PathLike] = None,
    *,
    output_notebook: Optional[bool] = None,
    rank_table: Optional[PathLike] = None,
    server_id: Optional[str] = None,
    env: Optional[Mapping[str, EnvValue]] = None,
    grace_period: Optional[float] = None,
    random_cache_dir: bool = False,
    job_timeout: Optional[float] = None,
    wait_timeout: float = 300,
    ranks_to_show: Optional[Union[int, Sequence[int]]] = None,
    launch_mode: str = "rank-table",
    nproc: Optional[int] = None,
    devices: Optional[Union[int, Sequence[int]]] = None,
    peers: bool = True,
    peer_timeout: Optional[float] = None,
    peer_port: Optional[int] = None,
    stall_timeout: Optional[float] = None,
    drain_timeout: Optional[float] = None,
    max_restarts: Optional[int] = None,
    restart_delay: Optional[float] = None,
    restart_on_same_error: bool = False,
    slow_window: Optional[float] = None,
) -> DistributedJob:
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
            ``command`` resolve from it. Default ``"./"`` (``""`` too).
            Created with its missing parents when it does not exist (as
            0.1.x did; removed again if the job cannot start).
        log_dir (str | None): where this run's log directory is created
            (relative to the caller's working directory). Default ``None``
            (``""`` too): ``/cache/davincirun/log`` when ``/cache`` (the
            notebook's large local disk; ``$DAVINCIRUN_CACHE_ROOT`` when set)
            is writable, so the code folder stays clean, else ``"./log"``.
            A directory given here always wins. ``job.run_dir`` and the
            status view say where the logs went (docs/usage.md).
        output_notebook (bool | None): show the ranks' output live, each line
            prefixed by its rank (in the rank's colour in a notebook or on a
            terminal; ``NO_COLOR`` turns colour off). ``None`` (default) or
            ``True``: yes; ``False``: log files only. (In davincirunsdk
            0.1.x the default was ``False``, which showed nothing in a
            notebook cell; see docs/migration.md.) Inside a Jupyter kernel
            the calling cell also gets a status view (rank, device, pid,
            status, time, last line or progress bar), updated in place and
            turned into the summary when the job ends; lines redrawn with
            ``'\\r'`` (tqdm) show as one line per rank; the display takes at
            most 24 KiB of lines every 0.1 s and counts what it skips (the
            log files keep every byte). For a job not waited for in the same
            cell, the lines go into the view of the starting cell, never into
            other cells. See docs/notebooks.md.
        rank_table (str | None): rank table file, or a directory holding
            ``jobstart_hccl.json`` or ``hccl.json``; default
            ``$RANK_TABLE_FILE_V_1_0``, else ``$RANK_TABLE_FILE``.
        server_id (str | None): this machine's ``server_id`` in the table
            (needed for multi-server tables).
        env (dict[str, str] | None): extra variables for every rank (values:
            str, bytes, path or int); they win over inherited ones, not over
            the rank identity variables (naming one of those gives a
            UserWarning).
        grace_period (float | None): seconds between SIGTERM and SIGKILL when
            ranks are stopped; default 10, at most 86400.
        job_timeout (float | None): stop every rank once the job has run this
            many seconds (then ``wait`` raises DistributedRuntimeError, or
            returns 124); default: no limit; at most one year.
        peers (bool): in a job that spans servers (one call on each), the
            agents connect to the one on the server of rank 0 and stop
            together: a rank failing on any server, a stop there, or a
            server's agent, host or link lost stops every server within a
            second or the peer timeout, and each raises naming that server
            (``DistributedRuntimeError.server_id``). ``False``: each
            server's job on its own. Default ``True`` (docs/multi-server.md).
        peer_timeout (float | None): seconds another server's agent may stay
            silent before it counts as lost; default 30, at most 86400.
        peer_port (int | None): the port the agent of rank 0's server
            listens on; default ``$DAVINCIRUN_PEER_PORT``, else one derived
            from the table and the job id, the same on every server.
        stall_timeout (float | None): when no rank of the job writes any
            output for this many seconds, write each rank's Python stacks
            (``py-spy dump``, when py-spy is installed) to ``stacks/`` in the
            run directory and stop the job (``stop_reason`` ``"stalled"``,
            exit code 124); default: no watchdog. It sees silence only.
        drain_timeout (float | None): seconds a rank's output may stay open
            after the rank exited, held by a process it left behind that
            escaped the job's sweep, before the job ends without the rest of
            it; default 2, at most 86400.
        max_restarts (int | None): restart the whole job in place up to this
            many times after a rank fails (or the stall watchdog stops it):
            every rank is stopped, then started again after
            ``restart_delay`` with the same ``JOB_ID``, work directory and
            devices, ``DAVINCIRUN_RESTART_COUNT`` and
            ``TORCHELASTIC_RESTART_COUNT`` one higher and new rendezvous
            ports; each attempt's logs are kept (``.attempt2.log``...). A
            stop request, a signal, the job timeout or this process's end
            never restart. Default 0 (no restart), at most 10000. A job of
            several servers restarts every server together, rank 0's
            server deciding, and waits for a lost server to rejoin
            (docs/restarts.md, "Across servers").
        restart_delay (float | None): seconds between an attempt's end and
            the next one's start; default 1, at most 86400.
        restart_on_same_error (bool): restart even when an attempt fails as
            the one before it did (the same rank, exit status and root
            cause, and no line in its log that the attempt before had not
            written). Default ``False``: such a failure ends the job, saying so.
        slow_window (float | None): seconds a rank's progress (its printed
            epoch and step) may trail the median before the job names it
            slow (docs/job-record.md); default 30, 0: never.
        random_cache_dir (bool): give the ranks a fresh
            ``MS_COMPILER_CACHE_PATH`` (removed after the job) unless one is set.
        ranks_to_show (list[int] | int | None): show only these ranks' output
            live, e.g. ``[0]`` (or ``0``); the others go to their log files only. Default
            ``None``: every rank. Ranks on other servers are ignored, so the
            same value works on every machine of the job.
        wait_timeout (float): seconds to wait for a rank table the platform is
            still writing (missing, empty, half-written, status
            "initializing"), with a message on stderr now and then; 0: no
            waiting. Default 300, at most one year.
        launch_mode (str): how the ranks find each other. ``"rank-table"``
            (default): each reads the rank table (``RANK_TABLE_FILE``,
            ``RANK_ID``...; HCCL, torch.distributed's ``MASTER_ADDR``).
            ``"dynamic-cluster"``: MindSpore's dynamic cluster as its
            ``msrun`` starts it (MindSpore >= 2.0; its only distributed
            mode on CPU): the ranks are its workers (``MS_ROLE=MS_WORKER``,
            ``MS_NODE_ID`` = ``RANK_ID``) and the server of rank 0 also runs
            the command as its scheduler (``MS_ROLE=MS_SCHED``, log
            ``scheduler.log``, console prefix ``[sched]``), a member of the
            job like a rank: its failure fails the job. See
            docs/mindspore.md. ``"tf-config"``: as ``"rank-table"``, plus
            ``TF_CONFIG`` for TensorFlow's ``MultiWorkerMirroredStrategy``
            (every rank a worker at host:port in rank order, this rank's
            task; TensorFlow 1.15 and 2.x). ``"cm"``: CANN's rank-table-free
            mode for TensorFlow on NPUs: ``CM_CHIEF_IP``, ``CM_CHIEF_PORT``,
            ``CM_CHIEF_DEVICE``, ``CM_WORKER_IP``, ``CM_WORKER_SIZE``, and no
            ``RANK_TABLE_FILE``, ``RANK_ID`` or ``RANK_SIZE`` (CANN refuses
            them together). See docs/tensorflow.md.
        nproc (int | None): no rank table: this many ranks (1 to 1024) on
            this machine, on ``devices`` or the first NPUs of ``/dev`` (else
            devices 0..nproc-1); not with ``rank_table``.
        devices (list[int] | int | None): physical device ids: only these
            devices of a one-server rank table run (ranks numbered 0..k-1);
            without a table, the devices of the ranks on this machine.

    Returns:
        DistributedJob: the job keeps running if this handle is dropped
        (with a RuntimeWarning; :func:`running_jobs` finds it again) and is
        stopped (SIGTERM, then SIGKILL after ``grace_period``) when this
        Python process exits.

    Raises:
        RankTableError, LaunchConfigError (an option out of its range names
        it: ``grace_period must be ...``, and ``.option`` holds its name),
        SpawnError, LauncherSystemError; nothing is left running.
        NoRankTableError (also a RuntimeError): no rank table at all.
        CommandNotFoundError / CommandNotExecutableError (SpawnErrors, also
        FileNotFoundError / PermissionError): the command cannot be run.
        OptionTypeError (a TypeError and a LaunchConfigError): an option of
        the wrong type (``grace_period="10"``, ``ranks_to_show="0"``,
        ``env="A=B"``), naming it.
    """
    # Every parameter goes on by name: locals() holds exactly them here.
    try:
        return _start(background=True, **locals())
    except SURFACED as error:
        raise surfaced(error) from None


def wait_distributed_train(
    fmk_manager: DistributedJob, destroy_when_finished: bool = True, raise_exception: bool = True
) -> int:
    """Waits for a job from :func:`start_distributed_train`; see :meth:`DistributedJob.wait`."""
    try:
        return fmk_manager.wait(destroy_when_finished=destroy_when_finished, raise_exception=raise_exception)
    except SURFACED as error:
        raise surfaced(error) from None


def start_and_wait_distributed_train(
    command: Command,
    work_dir: PathLike = "./",
    log_dir: Optional[PathLike] = None,
    *,
    output_notebook: Optional[bool] = None,
    random_cache_dir: bool = True,
    destroy_when_finished: bool = True,
    raise_exception: bool = True,
    rank_table: Optional[PathLike] = None,
    server_id: Optional[str] = None,
    env: Optional[Mapping[str, EnvValue]] = None,
    grace_period: Optional[float] = None,
    job_timeout: Optional[float] = None,
    wait_timeout: float = 300,
    ranks_to_show: Optional[Union[int, Sequence[int]]] = None,
    launch_mode: str = "rank-table",
    nproc: Optional[int] = None,
    devices: Optional[Union[int, Sequence[int]]] = None,
    peers: bool = True,
    peer_timeout: Optional[float] = None,
    peer_port: Optional[int] = None,
    stall_timeout: Optional[float] = None,
    drain_timeout: Optional[float] = None,
    max_restarts: Optional[int] = None,
    restart_delay: Optional[float] = None,
    restart_on_same_error: bool = False,
    slow_window: Optional[float] = None,
) -> int:
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
        env, grace_period, job_timeout, wait_timeout, ranks_to_show,
        launch_mode, nproc, devices, peers, peer_timeout, peer_port,
        stall_timeout, drain_timeout, max_restarts, restart_delay,
        restart_on_same_error, slow_window: as for :func:`start_distributed_train`.
        random_cache_dir (bool): default True: a fresh MindSpore compiler
            cache directory for this job, removed afterwards (a
            ``MS_COMPILER_CACHE_PATH`` already set wins).
        destroy_when_finished, raise_exception: as for :meth:`DistributedJob.wait`.

    Returns:
        int: 0 on success; with ``raise_exception=False``, the first failed
        rank's exit code (128 + N for signal N).

    Raises:
        DistributedRuntimeError: a rank failed (names the rank, how it ended,
            its log file and the end of its log; with ``max_restarts``, the
            last attempt's failure, and ``.attempts`` lists every attempt).
        KeyboardInterrupt: Ctrl-C, after every rank was stopped.
        RankTableError, LaunchConfigError, SpawnError: nothing was started
            (the subclasses as for :func:`start_distributed_train`).
        OptionTypeError (a TypeError and a LaunchConfigError): an option of
            the wrong type, naming it.
    """
    # Every parameter goes on by name (locals() holds exactly them here); the
    # two of wait() go to wait().
    launch = dict(locals())
    wait = {name: launch.pop(name) for name in ("destroy_when_finished", "raise_exception")}
    try:
        return _start(background=False, **launch).wait(**wait)
    except SURFACED as error:
        raise surfaced(error) from None
