"""A fresh MindSpore compiler cache directory per job (``random_cache_dir``)."""

import os
import shutil
import tempfile


def make_cache_dir():
    """Creates and returns a new empty directory for ``MS_COMPILER_CACHE_PATH``.

    Under ``/cache`` when it exists and is writable (the large local disk of
    ModelArts and OpenI notebooks), else under the system temporary directory.
    The name is unique; the directory has mode 0700.
    """
    base = "/cache" if os.path.isdir("/cache") and os.access("/cache", os.W_OK | os.X_OK) else None
    return tempfile.mkdtemp(prefix="davincirun-ms-cache-", dir=base)


def remove_cache_dir(path):
    """Removes a directory made by make_cache_dir; errors are ignored."""
    shutil.rmtree(path, ignore_errors=True)
