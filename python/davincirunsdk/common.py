"""``davincirunsdk.common`` of davincirunsdk 0.1.x: the names of the
platform's environment variables and paths, and their readers.

Working as in 0.1.x: ``RankTableEnv`` (the rank-table variables and the
platform's default table), ``BatchEnv``, ``ModelArts`` (its variable names
and the readers of this pod's name and address), ``HwHiAiUser``'s names,
``ModelArtsLog`` and ``logo``. Not carried over (using them raises
:class:`~davincirunsdk.errors.NotCarriedOverError`): ``OpEnv`` (operator
packages from OBS), ``SigHandler`` (this package never installs signal
handlers), and ``ModelArts``' log upload, channel rewriting and job id."""

from __future__ import annotations

import logging
import os
from typing import Optional

from ._not_carried_over import refuse, stand_in_class

__all__ = ["BatchEnv", "HwHiAiUser", "ModelArts", "ModelArtsLog", "OpEnv", "RankTableEnv", "SigHandler", "logo"]

logo = "ModelArts"


class BatchEnv:
    """ModelArts' batch-job variables (read from ``os.environ`` at each call)."""

    BATCH_JOB_ID = "BATCH_JOB_ID"
    POD_NAME = "BATCH_TASK_CURRENT_INSTANCE"
    BATCH_TASK_LOG_PATH = "BATCH_TASK_LOG_PATH"

    @staticmethod
    def get_pod_name() -> Optional[str]:
        """``BATCH_TASK_CURRENT_INSTANCE``, or ``None`` when unset or empty."""
        return os.environ.get(BatchEnv.POD_NAME) or None

    @staticmethod
    def get_batch_stdout_log() -> Optional[str]:
        """``$BATCH_TASK_LOG_PATH/stdout.log``, or ``None`` when that variable is unset or empty."""
        directory = os.environ.get(BatchEnv.BATCH_TASK_LOG_PATH)
        return os.path.join(directory, "stdout.log") if directory else None


class RankTableEnv:
    """The rank-table variables, and where the platform puts the table."""

    RANK_TABLE_FILE = "RANK_TABLE_FILE"
    RANK_TABLE_FILE_V1 = "RANK_TABLE_FILE_V_1_0"
    # The name Cloud Container Engine's ring controller gives the table.
    HCCL_JSON_FILE_NAME = "jobstart_hccl.json"
    # The first of rank_table.DEFAULT_RANK_TABLE_PATHS.
    RANK_TABLE_FILE_DEFAULT_VALUE = "/user/config/%s" % HCCL_JSON_FILE_NAME

    @staticmethod
    def get_rank_table_v1_file_dir() -> str:
        refuse("davincirunsdk.common.RankTableEnv.get_rank_table_v1_file_dir",
               "init_rank_table() and set_rank_env() no longer write to $MA_HOME/rank_table; the file they "
               "write is os.environ['RANK_TABLE_FILE'] after the call")

    @staticmethod
    def get_rank_table_file_path() -> str:
        """Where the platform's table is: ``RANK_TABLE_FILE`` itself when it
        names a file (this package reads a file there too), else
        ``$RANK_TABLE_FILE/jobstart_hccl.json`` (0.1.x: always this); when
        unset, the first of ``davincirunsdk.rank_table.DEFAULT_RANK_TABLE_PATHS``
        (``/user/config/jobstart_hccl.json``). The file need not exist."""
        named = os.environ.get(RankTableEnv.RANK_TABLE_FILE)
        if named is None:
            from .rank_table import DEFAULT_RANK_TABLE_PATHS

            return DEFAULT_RANK_TABLE_PATHS[0]
        if os.path.isfile(named):
            return named
        return os.path.join(os.path.normpath(named), RankTableEnv.HCCL_JSON_FILE_NAME)

    @staticmethod
    def set_rank_table_env(path: str) -> None:
        """Sets ``RANK_TABLE_FILE`` to `path` in ``os.environ``."""
        os.environ[RankTableEnv.RANK_TABLE_FILE] = path


class ModelArts:
    """ModelArts' variable names, and readers of this pod's name and address."""

    MA_MODELARTS_DOWNLOADER = "/home/ma-user/modelarts-downloader.py"
    tmp_log_dir = "/tmp/log/"
    modelarts_pipe_cmd = "tee"
    MA_HOME_ENV = "MA_HOME"
    MA_MOUNT_PATH_ENV = "MA_MOUNT_PATH"
    MA_CURRENT_INSTANCE_NAME_ENV = "MA_CURRENT_INSTANCE_NAME"
    MA_VJ_NAME = "MA_VJ_NAME"
    MA_JOB_KIND = "MA_JOB_KIND"
    MA_INPUTS = "MA_INPUTS"
    MA_OUTPUTS = "MA_OUTPUTS"
    MA_UPLOAD_LOG_OBS_ENV = "DLS_UPLOAD_LOG_OBS_DIR"
    MA_USE_UPLOADER_ENV = "DLS_USE_UPLOADER"
    MA_CURRENT_HOST_IP = "MA_CURRENT_HOST_IP"

    @staticmethod
    def get_current_instance_name() -> Optional[str]:
        """This pod's name: ``BATCH_TASK_CURRENT_INSTANCE``, else
        ``MA_CURRENT_INSTANCE_NAME``, else ``None``."""
        for name in (BatchEnv.POD_NAME, ModelArts.MA_CURRENT_INSTANCE_NAME_ENV):
            if name in os.environ:
                return os.environ[name]
        return None

    @staticmethod
    def get_current_host_ip() -> Optional[str]:
        """``MA_CURRENT_HOST_IP``, or ``None``."""
        return os.environ.get(ModelArts.MA_CURRENT_HOST_IP)

    @staticmethod
    def is_edge_job() -> bool:
        """Whether ``MA_JOB_KIND`` is ``edge_job``."""
        return os.environ.get(ModelArts.MA_JOB_KIND) == "edge_job"

    @staticmethod
    def get_job_id() -> str:
        refuse("davincirunsdk.common.ModelArts.get_job_id",
               "each rank's JOB_ID variable, or DistributedJob.job_id (BATCH_JOB_ID or JOB_ID when set)")

    @staticmethod
    def enable_log_upload() -> bool:
        refuse("davincirunsdk.common.ModelArts.enable_log_upload", _NO_UPLOAD)

    @staticmethod
    def get_log_upload_url() -> Optional[str]:
        refuse("davincirunsdk.common.ModelArts.get_log_upload_url", _NO_UPLOAD)

    @staticmethod
    def generate_v1_channel_from_v2_channel(channel_type: str, v2_channel: dict, special_parameter: str) -> str:
        refuse("davincirunsdk.common.ModelArts.generate_v1_channel_from_v2_channel", _NO_CHANNELS)

    @staticmethod
    def only_keep_v1_special_channel_env() -> None:
        refuse("davincirunsdk.common.ModelArts.only_keep_v1_special_channel_env", _NO_CHANNELS)


_NO_UPLOAD = "the ranks' logs stay in the run directory (log/latest); copy them where you need them"
_NO_CHANNELS = "MA_INPUTS and MA_OUTPUTS reach the ranks as the platform set them"


class HwHiAiUser:
    """Names of the Ascend driver's files and variables."""

    PRE_STOP_SCRIPTS = "/usr/local/Ascend/driver/tools/docker_stop_post_sys.sh"
    MIND_STUDIO_OP_DIR = "operator_info"
    FMK_WORKSPACE_ENV = "FMK_WORKSPACE"
    FMK_WORKSPACE = "workspace"
    FMK_WORKSPACE_DEFAULT_VALUE = os.path.join("/home/ma-user", FMK_WORKSPACE)
    HCCL_CONNECT_TIMEOUT = "HCCL_CONNECT_TIMEOUT"
    ASCEND_GLOBAL_LOG_LEVEL = "ASCEND_GLOBAL_LOG_LEVEL"
    ASCEND_GLOBAL_EVENT_ENABLE = "ASCEND_GLOBAL_EVENT_ENABLE"
    ASCEND_SLOG_PRINT_TO_STDOUT = "ASCEND_SLOG_PRINT_TO_STDOUT"
    MINDSPORE_FRAMEWORK_NAME = "mindspore"
    MINDSPORE_FRAMEWORK_FAULTS_DIAG_VERSION = "1.4"

    @staticmethod
    def get_fmk_workspace_dir() -> str:
        refuse("davincirunsdk.common.HwHiAiUser.get_fmk_workspace_dir",
               "every rank runs in work_dir= (davincirun --work-dir), default the current directory")


class ModelArtsLog:
    """The ``logging`` logger named ``ModelArts`` (``logo``); this package
    itself does not log through it."""

    @staticmethod
    def setup_modelarts_logger() -> logging.Logger:
        """That logger at level INFO, with one stderr handler printing
        ``[DavincirunSDK]<time> - <level> - <message>``, not propagating
        (calling it again adds no second handler)."""
        logger = logging.getLogger(logo)
        logger.setLevel(logging.INFO)
        logger.propagate = False
        if not any(getattr(h, "_davincirunsdk", False) for h in logger.handlers):
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter(fmt="[DavincirunSDK]%(asctime)s - %(levelname)s - %(message)s"))
            handler._davincirunsdk = True  # type: ignore[attr-defined]
            logger.addHandler(handler)
        return logger

    @staticmethod
    def get_modelarts_logger() -> logging.Logger:
        return logging.getLogger(logo)


OpEnv = stand_in_class("davincirunsdk.common.OpEnv",
                       "operator packages (MA_ALGORITHM_OPERATOR) are not downloaded or installed; install them "
                       "before the job")
SigHandler = stand_in_class("davincirunsdk.common.SigHandler",
                            "this package never installs signal handlers; every rank's exit is collected by the "
                            "job's supervisor process")
