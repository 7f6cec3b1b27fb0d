"""``davincirunsdk.sdr`` of davincirunsdk 0.1.x: ModelArts' route planning
(``RouteHelper``). Not carried over: importing works, using ``RouteHelper``
raises :class:`~davincirunsdk.errors.NotCarriedOverError`. The two paths
keep 0.1.x's values (``TOPO_FILE_PATH`` from the variable of that name,
else ``/user/config/ranktable_tor.json``)."""

import os

from ._not_carried_over import stand_in_class
from .common import ModelArtsLog

log = ModelArtsLog.get_modelarts_logger()

TOPO_FILE_PATH = os.getenv("TOPO_FILE_PATH", "/user/config/ranktable_tor.json")
SDR_LIBRARY_PATH = "/usr/local/route"

RouteHelper = stand_in_class(
    "davincirunsdk.sdr.RouteHelper",
    "route planning is not done; the ranks read the rank table as given (rank_table=, RANK_TABLE_FILE)")

__all__ = ["RouteHelper", "SDR_LIBRARY_PATH", "TOPO_FILE_PATH", "log"]
