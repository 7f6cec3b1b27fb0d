"""``davincirunsdk.fmk`` of davincirunsdk 0.1.x (also
``davincirunsdk.notebook.fmk``): ``FMK``, one training process. Not carried
over: importing works, using it raises
:class:`~davincirunsdk.errors.NotCarriedOverError`. ``log`` is the
``ModelArts`` logger, as in 0.1.x."""

from ._not_carried_over import stand_in_class
from .common import ModelArtsLog

log = ModelArtsLog.get_modelarts_logger()

FMK = stand_in_class(
    "FMK",
    "each rank's process and environment (RANK_ID, DEVICE_ID, ...; docs/environment.md) come from "
    "start_distributed_train(); DistributedJob.plan shows them")

__all__ = ["FMK", "log"]
