"""davincirunsdk: launch and supervise distributed training on Ascend NPU machines.

Reads the HCCL rank table named by ``RANK_TABLE_FILE``, starts one process per
device of this machine's server with the environment Ascend frameworks read
(``RANK_ID``, ``RANK_SIZE``, ``DEVICE_ID``, ...), writes each rank's output to
its own log file and shows it live, and stops every rank as soon as one fails::

    from davincirunsdk import start_and_wait_distributed_train
    start_and_wait_distributed_train(["python", "train.py"])
"""

from ._cache_dir import set_random_ms_cache_dir
from ._core import __version__, load_rank_table, parse_rank_table
from ._jobs import running_jobs
from ._rank_process import RankProcess
from .errors import (
    CommandNotExecutableError,
    CommandNotFoundError,
    DavincirunError,
    DeviceBusyError,
    DistributedRuntimeError,
    LaunchConfigError,
    LauncherSystemError,
    NoRankTableError,
    OptionTypeError,
    RankTableError,
    SpawnError,
)
from .job import DistributedJob
from .launch import start_and_wait_distributed_train, start_distributed_train, wait_distributed_train
from .metrics import log_metric
from .rank_table import init_rank_table, merge_rank_tables, write_rank_table

__all__ = [
    "CommandNotExecutableError",
    "CommandNotFoundError",
    "DavincirunError",
    "DeviceBusyError",
    "DistributedJob",
    "DistributedRuntimeError",
    "LaunchConfigError",
    "OptionTypeError",
    "LauncherSystemError",
    "NoRankTableError",
    "RankProcess",
    "RankTableError",
    "SpawnError",
    "__version__",
    "load_rank_table",
    "log_metric",
    "init_rank_table",
    "merge_rank_tables",
    "parse_rank_table",
    "running_jobs",
    "set_random_ms_cache_dir",
    "start_and_wait_distributed_train",
    "start_distributed_train",
    "wait_distributed_train",
    "write_rank_table",
]
