"""``davincirunsdk.notebook.sdk``, the module davincirunsdk 0.1.x's
documentation is written against: the same names, now implemented by the
rest of this package (see docs/migration.md).

``start_distributed_train`` returns a :class:`~davincirunsdk.DistributedJob`
(0.1.x: an ``FMKManager``), which keeps 0.1.x's ``wait()``, ``destroy()``
and ``fmk_processes``. ``generate_rank_table`` and ``get_rank_table`` return
this package's ``RankTable`` (0.1.x: its own ``RankTableV0``/``RankTableV1``).
"""

from .._cache_dir import set_random_ms_cache_dir
from ..launch import start_and_wait_distributed_train, start_distributed_train, wait_distributed_train
from ..rank_table import generate_rank_table, get_rank_table, init_rank_table, set_rank_env

__all__ = [
    "generate_rank_table",
    "get_rank_table",
    "init_rank_table",
    "set_random_ms_cache_dir",
    "set_rank_env",
    "start_and_wait_distributed_train",
    "start_distributed_train",
    "wait_distributed_train",
]
