"""Rank-table helpers kept from davincirunsdk 0.1.x, for scripts that start
their own processes: find the platform's table, write its 1.0 form and
export it (``init_rank_table``, or its two halves ``generate_rank_table``
and ``set_rank_env``), read the exported one (``get_rank_table``)."""

from __future__ import annotations

import os
import tempfile
from typing import Dict, Optional, Union

from . import _core
from .errors import NoRankTableError

# Where 0.1.x looked, in this order: a 1.0 table a platform names in
# RANK_TABLE_FILE_V_1_0, then RANK_TABLE_FILE (a file, or ModelArts'
# /user/config directory holding a 0.1 jobstart_hccl.json).
SOURCE_VARIABLES = ("RANK_TABLE_FILE_V_1_0", "RANK_TABLE_FILE")


def generate_rank_table(wait_timeout: float = 300) -> Optional[_core.RankTable]:
    """Reads the platform's rank table, as in davincirunsdk 0.1.x.

    The table ``RANK_TABLE_FILE_V_1_0`` names, else the one ``RANK_TABLE_FILE``
    names (a file, or a directory holding ``jobstart_hccl.json`` or
    ``hccl.json``), in any format (0.1, 1.0, 1.2), waiting up to
    ``wait_timeout`` seconds while the platform is still writing it.

    Returns:
        RankTable | None: the table (``format``, ``world_size``, ``servers``...),
        to pass to :func:`set_rank_env`; ``None`` when neither variable is set.
        (0.1.x returned its own RankTableV0/V1 objects: ``world_size`` replaces
        ``get_device_num()``, ``servers`` the ``server_list``.)

    Raises:
        RankTableError: the table is invalid, or did not become ready in time.
        LaunchConfigError: ``wait_timeout`` out of range.
    """
    for name in SOURCE_VARIABLES:
        source = os.environ.get(name)
        if source:
            table, _resolved = _core.wait_for_rank_table(source, wait_timeout)
            return table
    return None


def set_rank_env(rank_table: _core.RankTable) -> Dict[str, str]:
    """Exports `rank_table` for processes started by hand, as in 0.1.x.

    Writes its 1.0 (or 1.2) form, scalars as decimal strings, to a new
    private file (mode 0600, in a fresh 0700 temporary directory) and sets in
    ``os.environ`` (this helper exists to set them): ``RANK_TABLE_FILE``
    (that file), ``RANK_SIZE``, ``RANK_START`` (the first rank of this
    machine's server, or of this pod when pods share a host) and
    ``MA_CURRENT_HOST_IP`` (its ``host_ip``, else its ``server_id``) unless
    already set.

    Args:
        rank_table (RankTable): from :func:`generate_rank_table`,
            :func:`get_rank_table` or ``load_rank_table(path)``.

    Returns:
        dict: the variables set (0.1.x returned nothing).

    Raises:
        TypeError: `rank_table` is not a RankTable.
        LaunchConfigError: this machine is not one of the table's servers, or
            its server holds several pods and none is named this pod's
            (``MA_CURRENT_INSTANCE_NAME``).
    """
    if not isinstance(rank_table, _core.RankTable):
        raise TypeError(
            "set_rank_env: expected a RankTable (from generate_rank_table(), get_rank_table() or "
            "load_rank_table(path)), got %r" % (rank_table,)
        )
    # This machine's server, narrowed to this pod's devices when pods of a 0.1 table share it.
    server = _core.find_local_server(rank_table).server
    directory = tempfile.mkdtemp(prefix="davincirun-rank-table-")
    path = os.path.join(directory, "hccl.json")
    _core.write_normalized_rank_table(rank_table, path)
    exported = {
        "RANK_TABLE_FILE": path,
        "RANK_SIZE": str(rank_table.world_size),
        "RANK_START": str(server.rank_start),
        "MA_CURRENT_HOST_IP": os.environ.get("MA_CURRENT_HOST_IP") or server.host_ip or server.server_id,
    }
    os.environ.update(exported)
    return exported


def get_rank_table() -> _core.RankTable:
    """The table ``RANK_TABLE_FILE`` names, read at once (no waiting), as
    in 0.1.x, where it followed :func:`init_rank_table`.

    Raises:
        NoRankTableError: ``RANK_TABLE_FILE`` is not set (a ``RuntimeError``,
            as in 0.1.x).
        RankTableError: the table is missing, invalid or not ready.
    """
    source = os.environ.get("RANK_TABLE_FILE")
    if not source:
        error = NoRankTableError("RANK_TABLE_FILE is not set: call init_rank_table() first")
        error.option = "rank_table"
        raise error
    table, _resolved = _core.wait_for_rank_table(source, 0)
    return table


def init_rank_table(wait_timeout: float = 300) -> Union[Dict[str, str], bool]:
    """Prepares ``RANK_TABLE_FILE`` for a script that starts its own processes:
    :func:`generate_rank_table` then :func:`set_rank_env`, as in
    davincirunsdk 0.1.x (where ModelArts training jobs provide a 0.1 table in
    ``/user/config``).

    Reads the table ``RANK_TABLE_FILE_V_1_0``, else ``RANK_TABLE_FILE``,
    names (a file, or a directory holding ``jobstart_hccl.json`` or
    ``hccl.json``), waiting up to ``wait_timeout`` seconds for the platform
    to finish writing it; writes its 1.0 (or 1.2) form to a new private file
    and sets ``RANK_TABLE_FILE``, ``RANK_SIZE``, ``RANK_START`` and (unless
    set) ``MA_CURRENT_HOST_IP`` in ``os.environ``.

    Returns:
        dict | bool: a copy of the resulting ``os.environ``, or ``False`` when
        neither variable is set (no table: nothing to do).

    Raises:
        RankTableError: the table is invalid, or did not become ready in time.
        LaunchConfigError: this machine is not one of the table's servers, or
            its server holds several pods and none is named this pod's
            (``MA_CURRENT_INSTANCE_NAME``); ``wait_timeout`` out of range.
    """
    table = generate_rank_table(wait_timeout)
    if table is None:
        return False
    set_rank_env(table)
    return os.environ.copy()
