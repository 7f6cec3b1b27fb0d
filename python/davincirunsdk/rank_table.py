"""Rank-table helpers kept from davincirunsdk 0.1.x, for scripts that start
their own processes: find the platform's table, write its 1.0 form and
export it (``init_rank_table``, or its two halves ``generate_rank_table``
and ``set_rank_env``), read the exported one (``get_rank_table``). And
tables made by hand, as MindSpore's hccl_tools.py and merge_hccl.py made
them: this machine's (``write_rank_table``), several servers' as one
(``merge_rank_tables``).

Also 0.1.x's classes of this module (``RankTable``, ``RankTableV0``,
``RankTableV1``, ``Group``, ``Instance``, ``Device``), as views over this
package's parsing (_rank_table_01x.py)."""

from __future__ import annotations

import logging
import os
import warnings
from typing import Dict, Iterable, Optional, Sequence, Tuple, Union

from . import _core, _exported_table
from ._console import in_ipython_kernel, stop_request_name
from ._rank_table_01x import Device, Group, Instance, RankTable, RankTableV0, RankTableV1
from .errors import SURFACED, NoRankTableError, OptionTypeError, surfaced
from .launch import _NO_WAIT, PathLike, _device_list, _option_error

__all__ = [
    "DEFAULT_RANK_TABLE_PATHS",
    "default_rank_table",
    "Device",
    "Group",
    "Instance",
    "RankTable",
    "RankTableV0",
    "RankTableV1",
    "generate_rank_table",
    "get_rank_table",
    "log",
    "init_rank_table",
    "merge_rank_tables",
    "set_rank_env",
    "write_rank_table",
]

# 0.1.x's logger of this module (its name, "ModelArts"); nothing here logs.
log = logging.getLogger("ModelArts")

# Where the platform puts the rank table when no variable names one, in the
# order they are tried: ModelArts training jobs (Cloud Container Engine's
# ring controller writes a 0.1 table there), as davincirunsdk 0.1.x read it.
DEFAULT_RANK_TABLE_PATHS: Tuple[str, ...] = ("/user/config/jobstart_hccl.json",)


def default_rank_table() -> Optional[str]:
    """The first of :data:`DEFAULT_RANK_TABLE_PATHS` that exists, else ``None``."""
    for path in DEFAULT_RANK_TABLE_PATHS:
        if os.path.exists(path):
            return path
    return None


def generate_rank_table(wait_timeout: float = 300) -> Optional[_core.RankTable]:
    """Reads the platform's rank table, as in davincirunsdk 0.1.x.

    The table ``RANK_TABLE_FILE_V_1_0`` names, else the one ``RANK_TABLE_FILE``
    names (a file, or a directory holding ``jobstart_hccl.json`` or
    ``hccl.json``), else, when neither is set, the first of
    :data:`DEFAULT_RANK_TABLE_PATHS` that exists
    (``/user/config/jobstart_hccl.json``); in any format (0.1, 1.0, 1.2, 2.0),
    waiting up to ``wait_timeout`` seconds while the platform is still
    writing it.

    Returns:
        RankTable | None: the table (``format``, ``world_size``, ``servers``...),
        to pass to :func:`set_rank_env`; ``None`` when neither variable is set
        and no default path exists.
        (0.1.x returned its own RankTableV0/V1 objects: ``world_size`` replaces
        ``get_device_num()``, ``servers`` the ``server_list``.)

    Raises:
        RankTableError: the table is invalid, or did not become ready in time.
        LaunchConfigError: ``wait_timeout`` out of range.
    """
    # Where 0.1.x looked, in its order (the core's, as for a launch).
    source = _core.rank_table_named_by_environment() or default_rank_table()
    if not source:
        return None
    table, _resolved = _core.wait_for_rank_table(source, wait_timeout, _NO_WAIT, stop_request_name(in_ipython_kernel()))
    return table


def set_rank_env(rank_table: _core.RankTable) -> Dict[str, str]:
    """Exports `rank_table` for processes started by hand, as in 0.1.x.

    Writes its 1.0 (or 1.2) form, scalars as decimal strings (a 2.0 table:
    its 2.0 form, integers as JSON integers), to this
    process's one private file (mode 0600, ``hccl.json`` in a 0700 directory
    ``davincirun-rank-table-*`` under ``TMPDIR``, the same for every call,
    replaced atomically, removed when the process exits) and sets in
    ``os.environ`` (this helper exists to set them): ``RANK_TABLE_FILE``
    (that file), ``RANK_SIZE``, ``RANK_START`` (the first rank of this
    machine's server, or of this pod when pods share a host) and
    ``MA_CURRENT_HOST_IP`` (its ``host_ip``, else its ``server_id``) unless
    already set.

    Args:
        rank_table (RankTable): from :func:`generate_rank_table`,
            :func:`get_rank_table` or ``load_rank_table(path)``; or 0.1.x's
            ``RankTableV0`` / ``RankTableV1`` of this module.

    Returns:
        dict: the variables set (0.1.x returned nothing).

    Raises:
        TypeError: `rank_table` is not a RankTable.
        LaunchConfigError: this machine is not one of the table's servers, or
            its server holds several pods and none is named this pod's
            (``MA_CURRENT_INSTANCE_NAME``).
    """
    if isinstance(rank_table, RankTable) and rank_table.table is not None:
        rank_table = rank_table.table  # a 0.1.x view: the table it shows
    if not isinstance(rank_table, _core.RankTable):
        raise TypeError(
            "set_rank_env: expected a RankTable (from generate_rank_table(), get_rank_table() or "
            "load_rank_table(path)), got %r" % (rank_table,)
        )
    # This machine's server, narrowed to this pod's devices when pods of a 0.1 table share it.
    server = _core.find_local_server(rank_table).server
    path = _exported_table.export(rank_table)
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
    ``hccl.json``), else the first of :data:`DEFAULT_RANK_TABLE_PATHS` that
    exists (``/user/config/jobstart_hccl.json``, where 0.1.x looked too),
    waiting up to ``wait_timeout`` seconds for the platform to finish
    writing it; writes its 1.0 (1.2, 2.0) form to this process's one private
    file (see :func:`set_rank_env`: the same file for every call, removed
    when the process exits) and sets ``RANK_TABLE_FILE``, ``RANK_SIZE``, ``RANK_START`` and (unless
    set) ``MA_CURRENT_HOST_IP`` in ``os.environ``.

    Returns:
        dict | bool: a copy of the resulting ``os.environ``, or ``False`` when
        neither variable is set and no default path exists (no table:
        nothing to do).

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


def _path(option: str, value: PathLike) -> str:
    try:
        return os.fsdecode(os.fspath(value))
    except TypeError:
        raise _option_error(option, "%s: expected a path, got %r" % (option, value), OptionTypeError) from None


def write_rank_table(
    path: PathLike,
    *,
    server_id: Optional[str] = None,
    devices: Optional[Union[int, Sequence[int]]] = None,
    system_root: Optional[PathLike] = None,
) -> _core.RankTable:
    """Writes the rank table of this machine alone (one server), as
    ``davincirun --write-rank-table`` does.

    Lists every NPU of this machine (``/dev/davinci<N>``, digits only), in
    ascending physical id as ranks 0..N-1, each with its address from the
    ``address_<N>=<ip>`` lines hccn_tool writes in ``/etc/hccn.conf``, in
    format 1.0 as MindSpore's hccl_tools.py wrote it (docs/rank-tables.md,
    "Writing this machine's table"). The table is validated by this
    package's parser, then written atomically (a temporary file renamed over
    ``path``) with mode 0644; a file already at ``path`` is replaced.

    Args:
        path (str | os.PathLike): the file to write; HCCL wants a ``.json`` name.
        server_id (str | None): this machine's ``server_id``. Default: its
            address: of the interface of the default route, else its first
            IPv4 address (loopback and 169.254/16 aside).
        devices (list[int] | int | None): only these physical device ids,
            each present. Default: all.
        system_root (str | os.PathLike | None): read ``dev/`` and
            ``etc/hccn.conf`` under this directory instead of ``/``: for
            tests (regular files named ``davinci<N>`` do) and containers that
            see the host's files elsewhere.

    Returns:
        RankTable: the table written; ``servers[0].server_id`` is the one chosen.

    Warns:
        UserWarning: devices without an address (no ``address_<N>`` line, or
            no hccn.conf) are listed without ``device_ip``: one server needs
            none, but :func:`merge_rank_tables` refuses such a table.

    Raises:
        LaunchConfigError: no ``/dev/davinci<N>``; hccn.conf unreadable or
            with a malformed address line (the message names file and line);
            ``option`` ``"devices"``: a device not present or given twice;
            ``option`` ``"server_id"``: none given and this machine has no
            address, or one a rank table cannot hold (over 64 bytes).
        OptionTypeError: an argument of the wrong type.
        LauncherSystemError: ``path`` cannot be written (an ``OSError``).
    """
    target = _path("path", path)
    if server_id is not None and not isinstance(server_id, str):
        raise _option_error("server_id", "server_id: expected a str, got %r" % (server_id,), OptionTypeError)
    ids = None if devices is None else _device_list(devices)
    root = "/" if system_root is None else _path("system_root", system_root)
    try:
        made = _core.machine_rank_table(server_id, ids, root)
        _core.write_rank_table_file(made.table, target)
    except SURFACED as error:
        raise surfaced(error) from None
    for warning in made.warnings:
        warnings.warn(warning, UserWarning, stacklevel=2)
    return made.table


def merge_rank_tables(output: PathLike, inputs: Iterable[PathLike]) -> _core.RankTable:
    """Writes one rank table of the servers of several tables, as
    ``davincirun --merge-rank-tables OUTPUT INPUT...`` and MindSpore's
    merge_hccl.py do.

    Servers come in the order of ``inputs`` (within one input, in its rank
    order); ranks are renumbered consecutively across them, each device
    keeping its place within its server; the result is format 1.0 with
    ``server_count`` updated (format 2.0 tables: a 2.0 table of their ranks,
    ``rank_count`` updated), validated by this package's parser, and
    written atomically with mode 0644 (docs/rank-tables.md, "Merging
    tables").

    Args:
        output (str | os.PathLike): the file to write; may be one of ``inputs``.
        inputs (list[str | os.PathLike]): the tables (formats 0.1 and 1.0,
            or 2.0 only; status ``completed``), at least one.

    Returns:
        RankTable: the merged table.

    Raises:
        RankTableError: an input cannot be read or is invalid (naming it);
            kind ``duplicate``: a ``server_id`` or ``device_ip`` in two inputs
            (naming both files and pointers); ``missing``: a device without
            ``device_ip`` in a 1.0 merge of several servers; ``unsupported``:
            a format 1.2 input, or 2.0 inputs beside others (naming both);
            ``inconsistent``: 2.0 inputs with and without ``host_ip``;
            ``bad_value``: an input not ``completed``.
        OptionTypeError: an argument of the wrong type, or no input.
        LauncherSystemError: ``output`` cannot be written (an ``OSError``).
    """
    target = _path("output", output)
    if isinstance(inputs, (str, bytes, os.PathLike)):
        raise _option_error("inputs", "inputs: expected a list of paths, got %r" % (inputs,), OptionTypeError)
    files = [_path("inputs", item) for item in inputs]
    if not files:
        raise _option_error("inputs", "inputs: no rank table to merge", OptionTypeError)
    try:
        table = _core.merge_rank_tables(files, target)
        _core.write_rank_table_file(table, target)
    except SURFACED as error:
        raise surfaced(error) from None
    return table
