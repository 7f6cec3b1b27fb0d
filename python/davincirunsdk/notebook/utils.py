"""``davincirunsdk.notebook.utils`` of davincirunsdk 0.1.x: its small
helpers, working as there."""

from __future__ import annotations

import errno
import logging
import os

from .._console import in_ipython_kernel
from ..common import ModelArtsLog


def init_log() -> logging.Logger:
    """The ``ModelArts`` logger, set up once (``ModelArtsLog.setup_modelarts_logger``)."""
    return ModelArtsLog.setup_modelarts_logger()


def is_in_notebook() -> bool:
    """Whether this code runs in an IPython (Jupyter) kernel, as this
    package decides where the ranks' lines go."""
    return in_ipython_kernel()


def fsync_dir(dir_path: str) -> None:
    """Flushes the directory `dir_path` to disk (a file system that cannot,
    answering ``EINVAL``, is left as it is).

    Raises:
        OSError: it cannot be opened as a directory, or the flush fails.
    """
    fd = os.open(dir_path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as error:
        if error.errno != errno.EINVAL:
            raise
    finally:
        os.close(fd)


__all__ = ["fsync_dir", "init_log", "is_in_notebook"]
