"""A fresh MindSpore compiler cache directory per job (``random_cache_dir``)."""

import contextlib
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


@contextlib.contextmanager
def set_random_ms_cache_dir():
    """Context manager from davincirunsdk 0.1.x: points ``MS_COMPILER_CACHE_PATH``
    (MindSpore's compile cache) at a fresh directory for the duration of the
    block, so jobs started inside it do not fill the working directory with
    operator caches, then restores the variable and removes the directory.

    A ``MS_COMPILER_CACHE_PATH`` already set wins: nothing is changed then.
    Unlike the launch functions, this helper changes ``os.environ`` (that is
    its purpose). Yields the directory in use (``None`` when left unchanged).

    Example::

        with set_random_ms_cache_dir():
            job = start_distributed_train(["python", "train.py"])
            ...  # other work
            wait_distributed_train(job)
    """
    if os.environ.get("MS_COMPILER_CACHE_PATH"):
        yield None
        return
    path = make_cache_dir()
    os.environ["MS_COMPILER_CACHE_PATH"] = path
    try:
        yield path
    finally:
        if os.environ.get("MS_COMPILER_CACHE_PATH") == path:
            del os.environ["MS_COMPILER_CACHE_PATH"]
        remove_cache_dir(path)
