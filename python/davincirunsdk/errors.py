"""Exceptions raised by davincirunsdk.

Every error about the launcher's input or environment derives from
:class:`DavincirunError`; a failed training job raises
:class:`DistributedRuntimeError` (a ``RuntimeError``, as in davincirunsdk 0.1.x).
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple, Type


class DavincirunError(Exception):
    """Base class of every davincirunsdk error."""


class RankTableError(DavincirunError, ValueError):
    """The rank table cannot be used.

    Attributes:
        kind (str): ``io``, ``empty``, ``syntax``, ``shape``, ``missing``,
            ``bad_value``, ``duplicate``, ``inconsistent`` or ``unsupported``.
        source (str): the file (or label) the table came from.
        pointer (str | None): RFC 6901 JSON Pointer of the offending value
            (``""`` is the whole document), ``None`` when the problem is not
            one value (e.g. rank ids that are not 0..N-1).
        detail (str): the sentence describing the problem.
    """

    kind: Optional[str] = None
    source: Optional[str] = None
    pointer: Optional[str] = None
    detail: Optional[str] = None


class LaunchConfigError(DavincirunError, ValueError):
    """The launch cannot be configured as asked (no command, no rank table,
    this machine not in the table, a work or log directory that cannot be
    used...). Nothing was started.

    Attributes:
        option (str | None): the launch option that breaks its rule
            (``"grace_period"``, ``"env"``...), when one does; else ``None``.
    """

    option: Optional[str] = None


class NoRankTableError(LaunchConfigError, RuntimeError):
    """No rank table: none was passed (``rank_table=``, ``--rank-table``)
    and neither ``RANK_TABLE_FILE_V_1_0`` nor ``RANK_TABLE_FILE`` is set.
    Nothing was started. Also a ``RuntimeError``, which davincirunsdk 0.1.x
    raised in this case; ``option`` is ``"rank_table"``.
    """


class OptionTypeError(LaunchConfigError, TypeError):
    """A launch option of the wrong type: ``grace_period="10"``,
    ``ranks_to_show="01"`` (a string is not a list of ranks), ``env="A=B"``.
    Nothing was started. A ``TypeError``, as Python's own functions raise
    for such a value, and a ``LaunchConfigError``; ``option`` names the
    keyword and the message says what it takes.
    """


class DeviceBusyError(LaunchConfigError):
    """Devices of the job are in use by another job on this machine, which
    holds their locks (see docs/usage.md, "Devices in use"). Nothing was
    started: no rank, no run directory.

    Attributes:
        devices (list[int]): the busy devices (physical ids), ascending.
        holder_pid (int): the process holding the first of them (the other
            job's ``davincirun-supervisor``); 0 when it is in another PID namespace.
        holder_description (str): ``"job <id>, started <UTC time>: <command>"``
            from its lock file, else its command line; may be empty.
    """

    devices: Optional[List[int]] = None
    holder_pid: Optional[int] = None
    holder_description: Optional[str] = None


class SpawnError(DavincirunError, RuntimeError):
    """A rank's command could not be started; nothing of the job is left running.

    Attributes:
        rank (int): the rank that could not be started.
        command (str): the command line.
        os_errno (int): the operating system's error number (e.g. ENOENT).
        exit_code (int): the shell's convention for it: 127 not found, 126 not executable.
        search_path (str | None): the ``PATH`` the command was looked up in
            when that failed (the message names only its first directories,
            and commands of a similar name found there); else ``None``.
    """

    rank: Optional[int] = None
    command: Optional[str] = None
    os_errno: Optional[int] = None
    exit_code: Optional[int] = None
    search_path: Optional[str] = None


class CommandNotFoundError(SpawnError, FileNotFoundError):
    """A :class:`SpawnError` for a missing file (``ENOENT``): the command is
    not in ``PATH`` or its path does not exist (or, rarely, the work
    directory vanished before the rank started). Also a
    ``FileNotFoundError``, as ``subprocess`` (and so davincirunsdk 0.1.x)
    raised; ``errno`` and ``strerror`` are set, ``str()`` is the message.
    """

    def __str__(self) -> str:
        return Exception.__str__(self)  # OSError's would print only "[Errno 2] ..."


class CommandNotExecutableError(SpawnError, PermissionError):
    """A :class:`SpawnError` for a refused permission (``EACCES``): the
    command is not executable (a script without ``chmod +x``, a directory)
    or the work directory cannot be entered. Also a ``PermissionError``, as
    ``subprocess`` (and so davincirunsdk 0.1.x) raised; ``errno`` and
    ``strerror`` are set, ``str()`` is the message.
    """

    def __str__(self) -> str:
        return Exception.__str__(self)


class NotCarriedOverError(DavincirunError, NotImplementedError):
    """A name of davincirunsdk 0.1.x that has no meaning any more was used
    (called, instantiated, or an attribute of it read). Importing it still
    works, so that 0.1.x code loads; the message names what replaces it
    (docs/migration.md, "Not carried over"). Also a ``NotImplementedError``.

    Attributes:
        name (str): the 0.1.x name, e.g. ``"davincirunsdk.manager.FMKManager"``.
        replacement (str): what to use instead.
    """

    name: Optional[str] = None
    replacement: Optional[str] = None


class LauncherSystemError(DavincirunError, OSError):
    """A system call of the launcher itself failed (pipes, epoll, log files)."""

    os_errno: Optional[int] = None


# What the public functions re-raise as their own (surfaced()): the errors
# they document, and Ctrl-C once every rank was stopped.
SURFACED: Tuple[Type[BaseException], ...] = (DavincirunError, KeyboardInterrupt)


def surfaced(error: BaseException) -> BaseException:
    """`error` with its traceback dropped, for a public function to raise as
    its own: the traceback then shows the caller's frame, that function's
    one frame and the message, not the library's inner frames (a notebook
    shows each with lines of its source). It is still the same error object,
    raised where the caller's call failed."""
    return error.with_traceback(None)


class DistributedRuntimeError(DavincirunError, RuntimeError):
    """A rank of the distributed job failed; the other ranks were stopped.

    The message names the first rank that failed, how it ended, its log file
    and what that log says: the root cause when one is found there (the last
    Python traceback's head and its exception, MindSpore's "Ascend Error
    Message" and "Framework Error Message" sections without the C++ call
    stack, CANN error codes such as ``EI0006``, torchrun's failure summary,
    then the log's last 5 lines; ``...`` marks skipped lines), else the last
    20 lines of that log; then how every other rank ended.

    Attributes:
        rank (int): the first rank that failed (by time); -1 when it was
            MindSpore's scheduler (``launch_mode="dynamic-cluster"``).
        role (str): ``"rank"``, or ``"scheduler"`` for MindSpore's scheduler.
        exit_code (int | None): its exit code, or ``None`` if killed by a signal.
        signal (int | None): the signal that killed it, or ``None``.
        returncode (int): ``exit_code``, or 128 + ``signal``, as a shell reports it.
        log_file (str): path of that rank's log file.
        log_tail (str): the last 20 lines of that log file.
        root_cause (str | None): the root-cause block of that log, as the
            message shows it (lines ending in ``\\n``); ``None`` when no
            traceback, error code or error section was found there.
        root_cause_exception (str | None): the exception line of that block
            (``"RuntimeError: ..."``); ``None`` without a traceback.
        root_cause_error_code (str | None): its most telling CANN error-code
            line (``"EI0006: ..."``); ``None`` without one.
        hint (str | None): what to do where the framework's own message
            misleads (MindSpore's "use 'mpirun'" on a machine without NPUs:
            ``launch_mode="dynamic-cluster"``); ``None`` otherwise. The
            message carries it too, as a ``hint:`` line.
        server_id (str | None): when another server of the job stopped it
            (``result.stop_reason`` ``"peer_failed"``, ``"peer_stopped"``,
            ``"peer_lost"``, ``"stalled"``): that server's id; ``rank``, ``role``,
            ``exit_code`` and ``signal`` are then its failed rank's (``None``
            when none failed there), ``root_cause`` is the root cause its
            agent sent, or why, and ``log_file`` is ``None`` (the log is on
            that server). ``None`` for a failure on this server.
        attempts (list[JobAttempt]): every attempt of the job, the first run
            first (``attempt``, ``started``, ``ended``, ``stop_reason``,
            ``stop_detail``, ``first_failure``, ``root_cause``,
            ``restarted``, ``decision``); the attributes above describe the
            last. One entry unless the job restarted (``max_restarts``;
            docs/restarts.md).
        result: the job's full result (``ranks``, ``first_failure``,
            ``stop_reason``, ``stop_detail``, ``stopped_in``, ``peer_stop``,
            ``attempts``).
    """

    rank: Optional[int] = None
    role: Optional[str] = None
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    returncode: Optional[int] = None
    log_file: Optional[str] = None
    log_tail: Optional[str] = None
    root_cause: Optional[str] = None
    root_cause_exception: Optional[str] = None
    root_cause_error_code: Optional[str] = None
    hint: Optional[str] = None
    server_id: Optional[str] = None
    attempts: Any = ()  # list of _core.JobAttempt
    result: Any = None  # _core.JobResult
