"""Rank-table helpers kept from davincirunsdk 0.1.x."""

from __future__ import annotations

import os
import tempfile
from typing import Dict, Union

from . import _core


def init_rank_table(wait_timeout: float = 300) -> Union[Dict[str, str], bool]:
    """Prepares ``RANK_TABLE_FILE`` for a script that starts its own processes.

    As in davincirunsdk 0.1.x (where ModelArts training jobs provide a 0.1
    table in ``/user/config``): reads the table ``RANK_TABLE_FILE`` names (a
    file, or a directory holding ``jobstart_hccl.json`` or ``hccl.json``),
    waiting up to ``wait_timeout`` seconds for the platform to finish writing
    it; writes its 1.0 (or 1.2) form, scalars as decimal strings, to a new
    private file (mode 0600, in a fresh 0700 temporary directory); and sets
    in ``os.environ`` (this helper exists to set them): ``RANK_TABLE_FILE``
    (that file), ``RANK_SIZE``, ``RANK_START`` (the first rank of this
    machine's server, or of this pod when pods share a host) and ``MA_CURRENT_HOST_IP`` (its ``host_ip``, else its
    ``server_id``) unless already set.

    Returns:
        dict | bool: a copy of the resulting ``os.environ``, or ``False`` when
        ``RANK_TABLE_FILE`` is not set (no table: nothing to do).

    Raises:
        RankTableError: the table is invalid, or did not become ready in time.
        LaunchConfigError: this machine is not one of the table's servers, or
            its server holds several pods and none is named this pod's
            (``MA_CURRENT_INSTANCE_NAME``); ``wait_timeout`` out of range.
    """
    source = os.environ.get("RANK_TABLE_FILE")
    if not source:
        return False
    table, _resolved = _core.wait_for_rank_table(source, wait_timeout)
    # This machine's server, narrowed to this pod's devices when pods of a 0.1 table share it.
    server = _core.find_local_server(table).server
    directory = tempfile.mkdtemp(prefix="davincirun-rank-table-")
    path = os.path.join(directory, "hccl.json")
    _core.write_normalized_rank_table(table, path)
    os.environ["RANK_TABLE_FILE"] = path
    os.environ["RANK_SIZE"] = str(table.world_size)
    os.environ["RANK_START"] = str(server.rank_start)
    os.environ.setdefault("MA_CURRENT_HOST_IP", server.host_ip or server.server_id)
    return os.environ.copy()
