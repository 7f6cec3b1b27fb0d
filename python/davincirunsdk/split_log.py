"""``davincirunsdk.split_log`` of davincirunsdk 0.1.x: a script cutting the
device logs under ``/device`` by time. Not carried over: the names import,
calling them raises :class:`~davincirunsdk.errors.NotCarriedOverError`."""

from ._not_carried_over import stand_in_function

_INSTEAD = "each rank's output is in its own log file, log/latest/rank_<rank>.device_<id>.log"

init_parser = stand_in_function("davincirunsdk.split_log.init_parser", _INSTEAD)
parse_log = stand_in_function("davincirunsdk.split_log.parse_log", _INSTEAD)

__all__ = ["init_parser", "parse_log"]
