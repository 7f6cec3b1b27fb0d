"""Import paths kept from davincirunsdk 0.1.x: ``davincirunsdk.notebook.sdk``
(the module its documentation is written against) and
``davincirunsdk.notebook.exception``; the functions are also importable from
here and from ``davincirunsdk``."""

from .exception import DistributedRuntimeError
from .sdk import (
    generate_rank_table,
    get_rank_table,
    init_rank_table,
    set_random_ms_cache_dir,
    set_rank_env,
    start_and_wait_distributed_train,
    start_distributed_train,
    wait_distributed_train,
)

__all__ = [
    "DistributedRuntimeError",
    "generate_rank_table",
    "get_rank_table",
    "init_rank_table",
    "set_random_ms_cache_dir",
    "set_rank_env",
    "start_and_wait_distributed_train",
    "start_distributed_train",
    "wait_distributed_train",
]
