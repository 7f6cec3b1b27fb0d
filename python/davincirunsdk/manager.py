"""``davincirunsdk.manager`` of davincirunsdk 0.1.x (also
``davincirunsdk.notebook.manager``): its process and platform managers.
None is carried over; each name imports, and using it raises
:class:`~davincirunsdk.errors.NotCarriedOverError` naming what replaces it.
``log`` is the ``ModelArts`` logger, as in 0.1.x."""

from ._not_carried_over import stand_in_class
from .common import ModelArtsLog

log = ModelArtsLog.get_modelarts_logger()

FMKManager = stand_in_class(
    "FMKManager",
    "start_distributed_train(command) starts the ranks and returns a DistributedJob, which keeps wait(), destroy() "
    "and fmk_processes; wait_distributed_train(job) waits")
Manager = stand_in_class("Manager", "the driver's docker_stop_post_sys.sh is not run; every process of a job is "
                                    "stopped when it ends")
SlogdManager = stand_in_class("SlogdManager", "slogd is not started; start it before the job if your driver needs it")
OpManager = stand_in_class("OpManager", "operator packages are not downloaded from OBS or installed; install them "
                                        "before the job")
BatchLogManager = stand_in_class("BatchLogManager", "stdout.log is not uploaded to OBS; the ranks' logs stay in the "
                                                    "run directory (log/latest)")
AscendVersionManager = stand_in_class(
    "AscendVersionManager",
    "the driver version is not read: DEVICE_ID and ASCEND_DEVICE_ID are always the logical device id")

__all__ = ["AscendVersionManager", "BatchLogManager", "FMKManager", "Manager", "OpManager", "SlogdManager", "log"]
