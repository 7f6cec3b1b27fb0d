"""Import paths kept from davincirunsdk 0.1.x (``davincirunsdk.notebook``)."""

from .._cache_dir import set_random_ms_cache_dir
from ..launch import start_and_wait_distributed_train, start_distributed_train, wait_distributed_train
from ..rank_table import init_rank_table
from .exception import DistributedRuntimeError

__all__ = [
    "DistributedRuntimeError",
    "init_rank_table",
    "set_random_ms_cache_dir",
    "start_and_wait_distributed_train",
    "start_distributed_train",
    "wait_distributed_train",
]
