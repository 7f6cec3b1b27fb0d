"""davincirunsdk 0.1.x's rank-table classes (``davincirunsdk.rank_table``'s
``RankTable``, ``RankTableV0``, ``RankTableV1``, ``Group``, ``Instance``,
``Device``), as views over this package's parser: a table is read,
validated and ordered by ``_core`` (pods of a 0.1 table by their number,
as 0.1.x ordered them), and these classes show it with 0.1.x's attribute
names and string values. What differs from 0.1.x: an invalid or unready
table raises :class:`~davincirunsdk.errors.RankTableError` (0.1.x raised
whatever its parser hit, or waited forever); this machine's instance is
found as a launch finds it, never guessed
(:class:`~davincirunsdk.errors.LaunchConfigError` when it is not in the
table); the converted 1.0 table goes to this process's one exported file
(_exported_table.py), not ``$MA_HOME/rank_table``."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Tuple, Union

from . import _core, _exported_table
from .errors import RankTableError

# How long RankTable.wait_for_available waits for a table still being written.
WAIT_TIMEOUT = 300.0


class Device:
    """One device, as 0.1.x had it: ``device_id``, ``device_ip``, ``rank_id``
    (strings; ``device_ip`` is ``""`` when the table gives none, ``rank_id``
    ``""`` when unknown)."""

    def __init__(self, device_id: Any, device_ip: Any, rank_id: Any) -> None:
        self.device_id = device_id
        self.device_ip = device_ip
        self.rank_id = rank_id

    @classmethod
    def of(cls, device: _core.RankTableDevice) -> "Device":
        return cls(str(device.device_id), device.device_ip or "", str(device.rank_id))

    def __repr__(self) -> str:
        return "Device(device_id=%r, device_ip=%r, rank_id=%r)" % (self.device_id, self.device_ip, self.rank_id)


class Instance:
    """One pod (0.1 table) or server: ``pod_name`` (``""`` for a 1.0 server),
    ``server_id`` and ``devices`` (a list of :class:`Device`). `devices` may
    be a list of dicts with ``device_id`` and ``device_ip``, as in a 0.1
    table, or of :class:`Device`."""

    def __init__(self, pod_name: str, server_id: str, devices: Optional[List[Any]]) -> None:
        self.pod_name = pod_name
        self.server_id = server_id
        self.devices = self.parse_devices(devices)

    @staticmethod
    def parse_devices(devices: Optional[List[Any]]) -> List[Device]:
        if devices is None:
            return []
        return [d if isinstance(d, Device) else Device(d["device_id"], d.get("device_ip", ""), "") for d in devices]

    def set_devices(self, devices: List[Device]) -> None:
        self.devices = devices

    def __repr__(self) -> str:
        return "Instance(pod_name=%r, server_id=%r, devices=%r)" % (self.pod_name, self.server_id, self.devices)


class Group:
    """One group of a 0.1 table: ``group_name``, ``device_count`` and
    ``instance_count`` (ints), ``instance_list`` (a list of :class:`Instance`;
    given as dicts of the table, or as Instances)."""

    def __init__(self, group_name: str, device_count: Any, instance_count: Any, instance_list: List[Any]) -> None:
        self.group_name = group_name
        self.device_count = int(device_count)
        self.instance_count = int(instance_count)
        self.instance_list = self.parse_instance_list(instance_list)

    @staticmethod
    def parse_instance_list(instance_list: List[Any]) -> List[Instance]:
        return [i if isinstance(i, Instance) else Instance(i["pod_name"], i["server_id"], i["devices"])
                for i in instance_list]


def _refuse_format(source: str, table: _core.RankTable, wanted: str, other: str) -> RankTableError:
    error = RankTableError("%s: a format %s table, not %s: read it with %s (or generate_rank_table())"
                           % (source, table.format, wanted, other))
    error.kind, error.source, error.pointer = "unsupported", source, ""
    error.detail = "format %s, not %s" % (table.format, wanted)
    return error


class RankTable:
    """The base of :class:`RankTableV0` and :class:`RankTableV1`:
    ``rank_table_path`` (the 1.0 file), ``rank_table`` (its JSON as a dict)
    and ``table`` (this package's parsed ``RankTable``, ``None`` on a bare
    instance), as 0.1.x's base class had the first two."""

    STATUS_FIELD = "status"
    COMPLETED_STATUS = "completed"

    def __init__(self) -> None:
        self.rank_table_path = ""
        self.rank_table: Dict[str, Any] = {}
        self.table: Optional[_core.RankTable] = None

    @staticmethod
    def read_from_file(file_path: Union[str, "os.PathLike[str]"]) -> Any:
        """The JSON of `file_path`, unchecked (as 0.1.x)."""
        with open(file_path) as json_file:
            return json.load(json_file)

    @staticmethod
    def wait_for_available(rank_table_file: Union[str, "os.PathLike[str]"], period: float = 1) -> bool:
        """Waits until the table at `rank_table_file` is ``completed`` and
        valid, at most ``WAIT_TIMEOUT`` (300) seconds (0.1.x waited forever;
        `period` is accepted and unused: the wait polls by itself). Returns
        True.

        Raises:
            RankTableError: invalid, or not ready in time.
        """
        _core.wait_for_rank_table(os.fspath(rank_table_file), WAIT_TIMEOUT)
        return True

    @staticmethod
    def convert_server_to_instance(server: Dict[str, Any]) -> Instance:
        """An :class:`Instance` of a 1.0 ``server_list`` entry (devices with ``rank_id``)."""
        devices = [Device(d["device_id"], d.get("device_ip", ""), d["rank_id"]) for d in server["device"]]
        return Instance("", server["server_id"], devices)

    def get_rank_table_path(self) -> str:
        return self.rank_table_path

    def get_server(self, server_id: str) -> Optional[Dict[str, Any]]:
        """The ``server_list`` entry of `server_id`, or ``None`` (as 0.1.x)."""
        for server in self.rank_table.get("server_list", []):
            if server["server_id"] == server_id:
                return server
        return None

    def get_device_num(self) -> int:
        """The number of ranks (``world_size``); 0 on a bare instance."""
        return self.table.world_size if self.table is not None else 0

    def get_current_instance(self) -> Instance:
        """This machine's server (this pod's devices, when pods of a 0.1 table
        share it), found as a launch finds it: from ``MA_CURRENT_HOST_IP``,
        ``MA_CURRENT_INSTANCE_NAME`` and the machine's addresses. 0.1.x took
        the first entry when it could not tell.

        Raises:
            LaunchConfigError: this machine is not in the table.
            TypeError: a bare instance, without a table.
        """
        if self.table is None:
            raise TypeError("get_current_instance: this RankTable holds no table (use RankTableV0 or RankTableV1)")
        server = _core.find_local_server(self.table).server
        pods = {d.pod_name for d in server.devices}  # the narrowed server's own pods
        pod = pods.pop() if len(pods) == 1 else None
        return Instance(pod or "", server.server_id, [Device.of(d) for d in server.devices])


class RankTableV0(RankTable):
    """A format 0.1 table (ModelArts' ``jobstart_hccl.json``), converted to
    1.0 on construction as in 0.1.x: ``rank_table_path`` is this process's
    exported file (see :func:`~davincirunsdk.rank_table.set_rank_env`);
    ``status``, ``group_count``, ``group_list`` show the 0.1 table.

    Args:
        rank_table_v0_path: the file, or a directory holding
            ``jobstart_hccl.json`` or ``hccl.json``.

    Raises:
        RankTableError: unreadable, invalid, not ``completed`` (0.1.x kept a
            half-made object), or not format 0.1 (kind ``unsupported``).
    """

    def __init__(self, rank_table_v0_path: Union[str, "os.PathLike[str]"]) -> None:
        super().__init__()
        source = os.fspath(rank_table_v0_path)
        table, resolved = _core.wait_for_rank_table(source, 0)
        if table.format != "0.1":
            raise _refuse_format(source, table, "0.1", "RankTableV1")
        self.table = table
        self.status = table.status
        raw = self.read_from_file(resolved)  # valid: the names the parser does not keep
        by_pod = {pod: [Device.of(d) for d in server.devices if d.pod_name == pod]
                  for server in table.servers for pod in server.pod_names}
        servers = {pod: server.server_id for server in table.servers for pod in server.pod_names}
        self.group_count = int(raw["group_count"])
        self.group_list = []
        for group in raw["group_list"]:
            pods = sorted((i["pod_name"] for i in group["instance_list"] if i["pod_name"] in by_pod),
                          key=lambda p: list(by_pod).index(p))
            instances = [Instance(p, servers[p], by_pod[p]) for p in pods]
            self.group_list.append(Group(group["group_name"], group["device_count"], group["instance_count"],
                                         instances))
        self.rank_table_path, self.rank_table = self.convert_v0_to_v1_format_file()

    @staticmethod
    def get_index(instance: Dict[str, Any]) -> int:
        """The number ending a pod's name (``job-x-3`` -> 3), its place in the job."""
        pod_name = instance["pod_name"]
        return int(pod_name[pod_name.rfind("-") + 1:])

    def convert_v0_to_v1_format_file(self) -> Tuple[str, Dict[str, Any]]:
        """Writes the table's 1.0 form to this process's exported file;
        returns (its path, its JSON as a dict)."""
        assert self.table is not None
        path = _exported_table.export(self.table)
        return path, self.read_from_file(path)


class RankTableV1(RankTable):
    """A format 1.0 (or 1.2, 2.0) table: ``rank_table_path`` is the path given,
    ``rank_table`` the file's JSON.

    Raises:
        RankTableError: unreadable, invalid, not ``completed``, or format 0.1
            (kind ``unsupported``: use :class:`RankTableV0`).
    """

    def __init__(self, rank_table_path: Union[str, "os.PathLike[str]"]) -> None:
        super().__init__()
        source = os.fspath(rank_table_path)
        table, resolved = _core.wait_for_rank_table(source, 0)
        if table.format == "0.1":
            raise _refuse_format(source, table, "1.0", "RankTableV0")
        self.table = table
        self.rank_table_path = source
        self.rank_table = self.read_from_file(resolved)
