# Generated from davincirunsdk._core by scripts/stubs.sh (pybind11-stubgen); do not edit.
"""
Private C++ core of davincirunsdk; use the davincirunsdk package instead.
"""
from __future__ import annotations
import collections.abc
import typing
__all__: list[str] = ['DEFAULT_SEARCH_PATH', 'Job', 'JobAttempt', 'JobResult', 'LaunchOptions', 'LaunchPlan', 'LocalServer', 'MachineRankTable', 'NOTICE_PREFIX', 'PeerStop', 'RankAssignment', 'RankResult', 'RankTable', 'RankTableDevice', 'RankTableServer', 'RootCause', 'colourize_prefixes', 'describe_exit', 'display_width', 'find_executable', 'find_local_server', 'find_root_cause', 'fit_width', 'job_transitions', 'load_rank_table', 'machine_rank_table', 'merge_rank_tables', 'parent_pid', 'parse_rank_table', 'plan_launch', 'rank_table_named_by_environment', 'read_log_tail', 'root_cause', 'wait_for_rank_table', 'write_normalized_rank_table', 'write_rank_table_file']
class RankTableDevice:
    @property
    def device_id(self) -> int:
        ...
    @property
    def device_ip(self) -> str | None:
        ...
    @property
    def local_id(self) -> int | None:
        ...
    @property
    def pod_name(self) -> str | None:
        ...
    @property
    def rank_id(self) -> int:
        ...
    @property
    def super_device_id(self) -> int | None:
        ...
class RankTableServer:
    @property
    def container_ip(self) -> str | None:
        ...
    @property
    def devices(self) -> list[RankTableDevice]:
        ...
    @property
    def host_ip(self) -> str | None:
        ...
    @property
    def pod_names(self) -> list[str]:
        ...
    @property
    def rank_start(self) -> int:
        ...
    @property
    def server_id(self) -> str:
        ...
class RankTable:
    @property
    def format(self) -> str:
        ...
    @property
    def servers(self) -> list[RankTableServer]:
        ...
    @property
    def status(self) -> str:
        ...
    @property
    def warnings(self) -> list[str]:
        ...
    @property
    def world_size(self) -> int:
        ...
class MachineRankTable:
    """
    This machine's one-server table (C++ machine_rank_table).
    """
    @property
    def server_reason(self) -> str:
        """
        Why server_id is what it is.
        """
    @property
    def table(self) -> RankTable:
        ...
    @property
    def warnings(self) -> list[str]:
        """
        Devices listed without device_ip, one sentence.
        """
class LocalServer:
    """
    This machine's part of a rank table.
    """
    @property
    def index(self) -> int:
        """
        Its server's position in the table's servers.
        """
    @property
    def reason(self) -> str:
        """
        Why this machine is that server.
        """
    @property
    def server(self) -> RankTableServer:
        """
        The server, narrowed to this pod's devices in a 0.1 table.
        """
class LaunchOptions:
    """
    Everything a launch can be asked to do (C++ LaunchOptions).
    
    Fields are named like the keywords of start_distributed_train(); strings and
    lists of strings also take bytes (reaching the ranks unchanged). validate()
    checks every rule that needs no rank table; plan_launch() calls it first.
    Rule violations raise LaunchConfigError naming the option.
    """
    def __init__(self) -> None:
        ...
    def validate(self) -> None:
        """
        Raises LaunchConfigError when an option breaks its rule.
        """
    @property
    def command(self) -> list[str]:
        """
        The program every rank runs and its arguments (no shell).
        """
    @command.setter
    def command(self, arg1: collections.abc.Sequence[str]) -> None:
        ...
    @property
    def device_dir(self) -> str:
        """
        Where /dev/davinciN are looked for (default: /dev).
        """
    @device_dir.setter
    def device_dir(self, arg1: str) -> None:
        ...
    @property
    def device_lock_dir(self) -> str:
        """
        Where devices are locked; empty: $DAVINCIRUN_LOCK_DIR or /tmp/davincirun-locks; "off": no locking.
        """
    @device_lock_dir.setter
    def device_lock_dir(self, arg1: str) -> None:
        ...
    @property
    def devices(self) -> list[int] | None:
        """
        Only these devices (physical ids, e.g. 0,1) of a one-server table; without a table, the devices of the ranks on this machine.
        """
    @devices.setter
    def devices(self, arg1: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex] | None) -> None:
        ...
    @property
    def drain_timeout(self) -> float:
        """
        Seconds a rank's output may stay open after it exited, held by a process it left behind, before the job ends without it (default: 2). In seconds.
        """
    @drain_timeout.setter
    def drain_timeout(self, arg1: typing.Any) -> None:
        ...
    @property
    def env(self) -> list[tuple[str, str]]:
        """
        Set a variable for every rank (repeatable); it wins over inherited values, not over the rank identity.
        """
    @env.setter
    def env(self, arg1: collections.abc.Sequence[tuple[str, str]]) -> None:
        ...
    @property
    def grace_period(self) -> float:
        """
        Seconds between SIGTERM and SIGKILL when stopping ranks (default: 10). In seconds.
        """
    @grace_period.setter
    def grace_period(self, arg1: typing.Any) -> None:
        ...
    @property
    def job_timeout(self) -> float:
        """
        Stop every rank once the job has run this long (default and 0: no limit; exit status 124). In seconds.
        """
    @job_timeout.setter
    def job_timeout(self, arg1: typing.Any) -> None:
        ...
    @property
    def launch_mode(self) -> str:
        """
        Rank-table (default): each rank reads the table; dynamic-cluster: MindSpore's dynamic cluster, as msrun starts it: the ranks as workers plus a scheduler ([sched], scheduler.log) on the server of rank 0 (docs/mindspore.md); tf-config: TensorFlow's TF_CONFIG for MultiWorkerMirroredStrategy; cm: CANN's rank-table-free CM_* variables for TensorFlow on NPUs (docs/tensorflow.md).
        """
    @launch_mode.setter
    def launch_mode(self, arg1: str) -> None:
        ...
    @property
    def launcher_name(self) -> str:
        """
        What the process that started the job is called in messages ("the notebook kernel is gone"; default: the launcher).
        """
    @launcher_name.setter
    def launcher_name(self, arg1: str) -> None:
        ...
    @property
    def log_dir(self) -> str:
        """
        Directory for run logs (default: /cache/davincirun/log when /cache is writable, else ./log); each run gets a new subdirectory, DIR/latest points to it.
        """
    @log_dir.setter
    def log_dir(self, arg1: str) -> None:
        ...
    @property
    def max_restarts(self) -> int:
        """
        Restart the whole job in place up to N times after a rank fails (or the stall watchdog stops it); never after a stop request, a signal or the job timeout (default: 0; docs/restarts.md).
        """
    @max_restarts.setter
    def max_restarts(self, arg1: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def no_wait_setting(self) -> str:
        """
        How the user turns waiting for the rank table off, as the waiting lines name it ("wait_timeout=0"; default: wait_timeout 0).
        """
    @no_wait_setting.setter
    def no_wait_setting(self, arg1: str) -> None:
        ...
    @property
    def nproc(self) -> int | None:
        """
        No rank table: N ranks on this machine.
        """
    @nproc.setter
    def nproc(self, arg1: typing.SupportsInt | typing.SupportsIndex | None) -> None:
        ...
    @property
    def output_watched(self) -> bool:
        """
        Someone watches the output live: Python ranks get PYTHONUNBUFFERED=1 unless it is set (default: true).
        """
    @output_watched.setter
    def output_watched(self, arg1: bool) -> None:
        ...
    @property
    def peer_port(self) -> int | None:
        """
        Several servers: the port the agent of rank 0's server listens on (default: $DAVINCIRUN_PEER_PORT, else derived from the table, alike on every server).
        """
    @peer_port.setter
    def peer_port(self, arg1: typing.SupportsInt | typing.SupportsIndex | None) -> None:
        ...
    @property
    def peer_timeout(self) -> float:
        """
        Several servers: stop the job when another server's agent is silent this long (default: 30). In seconds.
        """
    @peer_timeout.setter
    def peer_timeout(self, arg1: typing.Any) -> None:
        ...
    @property
    def peers(self) -> bool:
        """
        Several servers: on (the default), the servers' jobs stop together; off (--no-peers, peers=False), each server's job runs on its own, with no job-wide stop (docs/multi-server.md).
        """
    @peers.setter
    def peers(self, arg1: bool) -> None:
        ...
    @property
    def rank_table(self) -> str:
        """
        Rank table file, or a directory holding jobstart_hccl.json or hccl.json (default: $RANK_TABLE_FILE_V_1_0, else $RANK_TABLE_FILE).
        """
    @rank_table.setter
    def rank_table(self, arg1: str) -> None:
        ...
    @property
    def ranks_to_show(self) -> list[int] | None:
        """
        Show only these ranks' output live, e.g. 0 or 0,4 (default: all); every rank still gets its log file.
        """
    @ranks_to_show.setter
    def ranks_to_show(self, arg1: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex] | None) -> None:
        ...
    @property
    def remove_after_job(self) -> list[str]:
        """
        Absolute directories the job's supervisor process removes once the job is over.
        """
    @remove_after_job.setter
    def remove_after_job(self, arg1: collections.abc.Sequence[str]) -> None:
        ...
    @property
    def restart_delay(self) -> float:
        """
        Seconds between an attempt's end and the next one's start (default: 1). In seconds.
        """
    @restart_delay.setter
    def restart_delay(self, arg1: typing.Any) -> None:
        ...
    @property
    def restart_on_same_error(self) -> bool:
        """
        Restart even when an attempt fails as the one before it did (same rank, same root cause, no new output); by default such a failure ends the job.
        """
    @restart_on_same_error.setter
    def restart_on_same_error(self, arg1: bool) -> None:
        ...
    @property
    def server_id(self) -> str | None:
        """
        This machine's server_id in the table (needed when the table lists several servers).
        """
    @server_id.setter
    def server_id(self, arg1: str | None) -> None:
        ...
    @property
    def slow_window(self) -> float:
        """
        Mark a rank slow when the progress its output prints (epoch, step) trails the other ranks' median this long (default: 30; 0: never; docs/job-record.md). In seconds.
        """
    @slow_window.setter
    def slow_window(self, arg1: typing.Any) -> None:
        ...
    @property
    def stall_timeout(self) -> float:
        """
        Stop the job when no rank of it wrote any output this long, after dumping Python stacks with py-spy (default and 0: no watchdog; exit status 124). In seconds.
        """
    @stall_timeout.setter
    def stall_timeout(self, arg1: typing.Any) -> None:
        ...
    @property
    def stop_request_name(self) -> str:
        """
        How the user asks for a stop, as the notice of a stop names it ("Ctrl-C"; default: stop request).
        """
    @stop_request_name.setter
    def stop_request_name(self, arg1: str) -> None:
        ...
    @property
    def supervisor_program(self) -> str:
        """
        The davincirun-supervisor executable; empty: found by the library.
        """
    @supervisor_program.setter
    def supervisor_program(self, arg1: str) -> None:
        ...
    @property
    def wait_timeout(self) -> float:
        """
        How long to wait for a rank table the platform is still writing (default: 300; 0: do not wait); a path whose folder does not exist fails at once. In seconds.
        """
    @wait_timeout.setter
    def wait_timeout(self, arg1: typing.Any) -> None:
        ...
    @property
    def work_dir(self) -> str:
        """
        Working directory of the ranks (default: .).
        """
    @work_dir.setter
    def work_dir(self, arg1: str) -> None:
        ...
class RankAssignment:
    """
    One rank (or MindSpore's scheduler) to start on this machine.
    """
    @property
    def device_ip(self) -> str | None:
        ...
    @property
    def local_rank(self) -> int:
        ...
    @property
    def logical_device_id(self) -> int:
        ...
    @property
    def physical_device_id(self) -> int:
        ...
    @property
    def rank(self) -> int:
        ...
    @property
    def role(self) -> str:
        """
        "rank", or "scheduler" (rank, local rank and device ids -1).
        """
class LaunchPlan:
    """
    Everything decided before anything starts.
    """
    @property
    def cache_dir(self) -> str:
        """
        <cache root>/davincirun when the cache disk is in use, else "".
        """
    @property
    def device_lock_dir(self) -> str:
        """
        Where the devices are locked; "" when they are not (see device_locks_off).
        """
    @property
    def device_locks_off(self) -> str:
        """
        Why the devices are not locked (no NPU on this machine, or off as asked); "" when they are.
        """
    @property
    def environments(self) -> list[list[str]]:
        """
        Each rank's environment, as ["NAME=value"].
        """
    @property
    def job_id(self) -> str:
        ...
    @property
    def launch_mode(self) -> str:
        ...
    @property
    def log_dir(self) -> str:
        ...
    @property
    def master_addr(self) -> str:
        ...
    @property
    def master_port(self) -> int:
        ...
    @property
    def max_restarts(self) -> int:
        """
        How often the job restarts at most (max_restarts; 0: never).
        """
    @property
    def notes(self) -> list[str]:
        """
        What the launcher chose for the ranks unasked (an OMP_NUM_THREADS default), one sentence each.
        """
    @property
    def rank_table_file(self) -> str:
        ...
    @property
    def ranks(self) -> list[RankAssignment]:
        """
        This server's ranks, by rank, then (dynamic-cluster mode) MindSpore's scheduler.
        """
    @property
    def server_id(self) -> str:
        ...
    @property
    def warnings(self) -> list[str]:
        """
        What was accepted with a warning, one sentence each.
        """
    @property
    def work_dir(self) -> str:
        ...
    @property
    def world_size(self) -> int:
        ...
class RankResult:
    """
    How one rank (or MindSpore's scheduler) ended.
    """
    @property
    def ended(self) -> float:
        """
        Seconds since the epoch.
        """
    @property
    def exit_code(self) -> int | None:
        ...
    @property
    def killed_by_launcher(self) -> bool:
        """
        It got SIGKILL after the grace period.
        """
    @property
    def log_error(self) -> str | None:
        """
        Why its log file could not take every byte, e.g. "No space left on device at byte N"; None.
        """
    @property
    def log_path(self) -> str:
        """
        Its log file, every byte it wrote.
        """
    @property
    def output_bytes(self) -> int:
        """
        Bytes it wrote (stdout and stderr).
        """
    @property
    def pid(self) -> int:
        """
        Its process id.
        """
    @property
    def rank(self) -> int:
        """
        Its rank id; -1 for the scheduler.
        """
    @property
    def returncode(self) -> int:
        """
        As a shell reports it: the exit code, or 128 + the signal.
        """
    @property
    def role(self) -> str:
        """
        "rank", or "scheduler" for MindSpore's scheduler (launch_mode="dynamic-cluster").
        """
    @property
    def signal(self) -> int | None:
        ...
    @property
    def started(self) -> float:
        """
        Seconds since the epoch.
        """
    @property
    def status(self) -> str:
        """
        "exit code 3", "signal 11 (SIGSEGV)"...
        """
    @property
    def success(self) -> bool:
        ...
    @property
    def terminated_by_launcher(self) -> bool:
        """
        It got SIGTERM from the launcher before it exited.
        """
class PeerStop:
    """
    What stopped the job from another server of it, as that server's agent said (docs/multi-server.md).
    """
    @property
    def detail(self) -> str:
        """
        The failed rank's root cause from its log there, or why the job stopped, in words.
        """
    @property
    def exit_code(self) -> int | None:
        """
        The failed rank's exit code, or None.
        """
    @property
    def rank(self) -> int | None:
        """
        The failed rank (-1: the scheduler), or None.
        """
    @property
    def role(self) -> str | None:
        """
        "rank" or "scheduler" when a process failed there, else None.
        """
    @property
    def server_id(self) -> str:
        """
        Where it happened.
        """
    @property
    def signal(self) -> int | None:
        """
        The signal that killed the failed rank, or None.
        """
class JobAttempt:
    """
    One attempt of a job: its first run, or a restart of the whole job in place (max_restarts; docs/restarts.md).
    """
    def __repr__(self) -> str:
        ...
    @property
    def attempt(self) -> int:
        """
        1 for the first run, k + 1 after the k-th restart.
        """
    @property
    def decision(self) -> str:
        """
        Why the job was restarted after this attempt, or why not; "" for a job never to restart.
        """
    @property
    def ended(self) -> float:
        """
        Seconds since the epoch.
        """
    @property
    def first_failure(self) -> RankResult | None:
        """
        The first process that failed in this attempt (RankResult), or None.
        """
    @property
    def ranks(self) -> list[RankResult]:
        """
        Every process of this attempt (RankResult), in the plan's order.
        """
    @property
    def restarted(self) -> bool:
        """
        The job was started again after this attempt.
        """
    @property
    def root_cause(self) -> str:
        """
        That failure's root cause in one line (its exception, else its CANN error code line), or "".
        """
    @property
    def started(self) -> float:
        """
        Seconds since the epoch.
        """
    @property
    def stop_detail(self) -> str:
        """
        What stopped this attempt, in words; "" when nothing did.
        """
    @property
    def stop_reason(self) -> str:
        """
        What stopped this attempt, as JobResult.stop_reason.
        """
class JobResult:
    """
    How a job ended: every rank, the first failure, why it stopped.
    """
    def __repr__(self) -> str:
        ...
    def failure_report(self, tail_lines: typing.SupportsInt | typing.SupportsIndex = 20) -> str:
        ...
    @property
    def attempts(self) -> list[JobAttempt]:
        """
        Every attempt of the job (JobAttempt), the first run first; the other fields describe the last. One unless the job restarted (max_restarts).
        """
    @property
    def child_subreaper(self) -> bool:
        """
        False when the job's supervisor process could not become a child subreaper: detached descendants were then found only by DAVINCIRUN_JOB_TAG.
        """
    @property
    def exit_code(self) -> int:
        """
        0, the first failure's shell code, 130 when stopped, 124 on the job or stall timeout, another server's failed rank's code (else 1) when another server stopped it.
        """
    @property
    def first_failure(self) -> int | None:
        """
        Index in `ranks` of the first rank that failed (by time), or None.
        """
    @property
    def leftover_processes_killed(self) -> int:
        """
        Processes the ranks left running outside their process groups, killed at the end.
        """
    @property
    def peer_stop(self) -> PeerStop | None:
        """
        With stop_reason "peer_failed", "peer_stopped", "peer_lost" or "stalled": what the other server said (PeerStop), else None.
        """
    @property
    def ranks(self) -> list[RankResult]:
        """
        Every rank of this machine, in the plan's order.
        """
    @property
    def stop_detail(self) -> str:
        """
        What stopped the job, in the words its stop notice began with ("stop requested", "rank 3 (pid 77) failed with exit code 1"); "" when nothing stopped it.
        """
    @property
    def stop_reason(self) -> str:
        """
        "none", "rank_failed", "requested", "timed_out", "signaled", "launcher_gone", "peer_failed" (a rank on another server failed), "peer_stopped" (the job was stopped on another server), "peer_lost" (another server's agent, host or link lost, or never there) or "stalled" (the stall watchdog).
        """
    @property
    def stop_signal(self) -> int:
        """
        The signal behind stop_reason 'signaled', else 0.
        """
    @property
    def stop_signal_receiver(self) -> str:
        """
        With stop_reason "signaled": "launcher" (the davincirun command got it) or "supervisor" (the job's supervisor process got it).
        """
    @property
    def stop_signal_sender(self) -> str | None:
        """
        With stop_reason "signaled": the sender's command name (/proc/<pid>/comm), when known; else None.
        """
    @property
    def stop_signal_sender_pid(self) -> int | None:
        """
        With stop_reason "signaled": the pid of the process that sent the signal, when known; else None.
        """
    @property
    def stopped_in(self) -> str:
        """
        The state of the job's life cycle its stop came in ("running", "waiting_for_servers"...; docs/architecture.md); "done" when nothing stopped it.
        """
    @property
    def success(self) -> bool:
        ...
    @property
    def summary_error(self) -> str | None:
        """
        Why summary.json could not be written, or None.
        """
    @property
    def tracking(self) -> str:
        """
        How the ranks' exits were observed: "pidfd" or "sigchld".
        """
    @property
    def tracking_fallback(self) -> str | None:
        """
        Why exits were tracked by SIGCHLD on a kernel with pidfds (clone() refused CLONE_PIDFD: a seccomp filter, qemu-user), or None.
        """
class RootCause:
    """
    What a rank's log says about why it failed (root_cause.hpp).
    """
    @property
    def error_code(self) -> str:
        """
        The most telling CANN error-code line ("EI0006: ..."); empty without one.
        """
    @property
    def exception(self) -> str:
        """
        The exception line ("RuntimeError: ..."); empty without a traceback.
        """
    @property
    def found(self) -> bool:
        """
        A traceback, an error code or an error section was found.
        """
    @property
    def hint(self) -> str:
        """
        What to do where the framework's own message misleads (MindSpore's 'use mpirun' on a machine without NPUs); empty otherwise.
        """
    @property
    def source(self) -> str:
        """
        "its log", or "its torch error file".
        """
    @property
    def text(self) -> str:
        """
        The block: lines of the log in its order, "..." where lines were skipped; '\\n'-terminated.
        """
class Job:
    def __init__(self, plan: LaunchPlan, console: str) -> None:
        ...
    def request_kill(self) -> None:
        ...
    def request_kill_dropped(self) -> None:
        ...
    def request_stop(self) -> None:
        ...
    def result(self) -> JobResult:
        ...
    def set_display_budget(self, bytes: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    def take_output(self, everything: bool = False, lines: bool = True) -> tuple:
        ...
    def take_status(self) -> list:
        ...
    def wait_for(self, timeout: typing.SupportsFloat | typing.SupportsIndex, on_output: bool = True) -> bool:
        ...
    @property
    def done(self) -> bool:
        ...
    @property
    def pids(self) -> list[int]:
        ...
    @property
    def run_dir(self) -> str:
        ...
    @property
    def supervisor_pid(self) -> int:
        ...
    @property
    def tracking(self) -> str:
        ...
def colourize_prefixes(lines: str) -> str:
    """
    `lines` with each rank prefix in its rank's colour and each [davincirun] prefix in bold (ANSI).
    """
def describe_exit(exit_code: typing.SupportsInt | typing.SupportsIndex | None, signal: typing.SupportsInt | typing.SupportsIndex | None) -> str:
    """
    How a process ended, in the words of RankResult.status: "exit code 3" for an exit code, else "signal 9 (SIGKILL)" for a signal, else an unknown exit status.
    """
def display_width(text: str) -> int:
    """
    Columns `text` takes on a terminal: two per East Asian Wide character (CJK), none per combining mark.
    """
def find_executable(name: bytes, path_list: bytes) -> str | None:
    """
    What a rank's command `name` runs when its PATH is `path_list` (both as os.fsencode() gives them), as the launch looks it up; None when not found or not executable.
    """
def find_local_server(table: RankTable, server_id: str | None = None) -> LocalServer:
    """
    This machine's server (and pod) in `table`, from this process's environment and addresses.
    """
def find_root_cause(text: str, tail_lines: typing.SupportsInt | typing.SupportsIndex = 5) -> RootCause:
    """
    The root cause in a log's text (str or bytes), with its last `tail_lines` lines.
    """
def fit_width(text: str, columns: typing.SupportsInt | typing.SupportsIndex) -> str:
    """
    The longest start of `text` that takes at most `columns` columns.
    """
def job_transitions() -> list:
    """
    Every cell of the job's life-cycle table (docs/architecture.md): a dict with "state", "event", "answer", "next", "tells_peers" and "why", states and events in their declared order.
    """
def load_rank_table(path: str) -> RankTable:
    ...
def machine_rank_table(server_id: str | None = None, devices: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex] | None = None, system_root: str = '/') -> MachineRankTable:
    """
    This machine's devices and addresses as a validated table.
    """
def merge_rank_tables(inputs: collections.abc.Sequence[str], source: str) -> RankTable:
    """
    One validated table of the servers of `inputs`, in order (1.0; 2.0 from 2.0 tables).
    """
def parent_pid(pid: typing.SupportsInt | typing.SupportsIndex) -> int | None:
    """
    The parent of process `pid`, from /proc; None when it does not exist.
    """
def parse_rank_table(text: str, source: str = '<string>') -> RankTable:
    ...
def plan_launch(options: LaunchOptions) -> LaunchPlan:
    """
    Validates `options`, waits for and reads the rank table, and plans the launch (C++ plan_launch).
    """
def rank_table_named_by_environment() -> str:
    """
    The rank table this process's environment names: $RANK_TABLE_FILE_V_1_0, else $RANK_TABLE_FILE; "" for neither.
    """
def read_log_tail(path: str, max_lines: typing.SupportsInt | typing.SupportsIndex = 20, max_bytes: typing.SupportsInt | typing.SupportsIndex = 16384) -> str:
    """
    The last lines of a log file, as text (empty if unreadable).
    """
def root_cause(path: str, tail_lines: typing.SupportsInt | typing.SupportsIndex = 5) -> RootCause:
    """
    A rank's root cause: from the torch error file beside its log (written by torch's @record) when there is one, else from the last 256 KiB of the log file at `path` (empty if unreadable), with its last `tail_lines` lines.
    """
def wait_for_rank_table(path: str, wait_timeout: typing.SupportsFloat | typing.SupportsIndex = 300.0, no_wait_setting: str = 'wait_timeout 0', stop_name: str = 'Ctrl-C') -> tuple[RankTable, str]:
    """
    (table, resolved file path): the table at a file or directory, waiting for it; the waiting lines name `no_wait_setting` and `stop_name` as the ways not to wait and to stop.
    """
def write_normalized_rank_table(table: RankTable, path: str) -> None:
    """
    Writes the copy ranks read (1.0, 1.2 or 2.0; mode 0600, a new file).
    """
def write_rank_table_file(table: RankTable, path: str) -> None:
    """
    Writes a table for people and other machines (mode 0644, atomically, replacing `path`).
    """
DEFAULT_SEARCH_PATH: str = '/usr/local/bin:/usr/bin:/bin'
NOTICE_PREFIX: str = '[davincirun] '
__version__: str = '0.2.0'
