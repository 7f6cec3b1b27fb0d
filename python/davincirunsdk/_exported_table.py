"""The one file per process where :func:`~davincirunsdk.rank_table.set_rank_env`
(and so ``init_rank_table``) and 0.1.x's ``RankTableV0`` write the rank
table they export in ``RANK_TABLE_FILE``.

It is ``hccl.json`` in a private directory (mode 0700) made under the
system temporary directory (``TMPDIR``) the first time a process exports a
table, named ``davincirun-rank-table-<random>``; every later export of that
process replaces the file atomically (the ranks a script already started
keep reading a whole table); the directory is removed when the process
exits normally (``atexit``). A forked child that exports makes a directory
of its own, and never removes its parent's."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from typing import Optional, Tuple

from . import _core

FILE_NAME = "hccl.json"

_lock = threading.Lock()
_directory: Optional[Tuple[int, str]] = None  # (the process that made it, its path)


def _remove(pid: int, path: str) -> None:
    if os.getpid() == pid:  # atexit handlers survive fork(): a child leaves its parent's alone
        shutil.rmtree(path, ignore_errors=True)


def _this_process_directory() -> str:
    global _directory
    pid = os.getpid()
    if _directory is None or _directory[0] != pid or not os.path.isdir(_directory[1]):
        path = tempfile.mkdtemp(prefix="davincirun-rank-table-")
        atexit.register(_remove, pid, path)
        _directory = (pid, path)
    return _directory[1]


def export_path() -> Optional[str]:
    """The file this process exports to, or ``None`` before its first export."""
    with _lock:
        if _directory is None or _directory[0] != os.getpid():
            return None
        return os.path.join(_directory[1], FILE_NAME)


def export(table: _core.RankTable) -> str:
    """Writes `table`'s 1.0 (or 1.2) form, scalars as decimal strings (a
    2.0 table: its 2.0 form, integers as JSON integers), mode 0600, to this
    process's file and returns its path.

    Raises:
        LauncherSystemError: the file cannot be written (an ``OSError``).
        OSError: the private directory cannot be made or renamed into.
    """
    with _lock:
        directory = _this_process_directory()
        target = os.path.join(directory, FILE_NAME)
        staging = os.path.join(directory, "." + FILE_NAME + ".new")
        if os.path.lexists(staging):
            os.unlink(staging)  # left by an export that failed half-way
        _core.write_normalized_rank_table(table, staging)  # never over an existing file
        os.replace(staging, target)
        return target
