"""A fresh MindSpore compiler cache directory per job (``random_cache_dir``)."""

import contextlib
import os
import shutil
import tempfile


def cache_root():
    """The cache disk's root when usable, else None: ``$DAVINCIRUN_CACHE_ROOT``
    when set and not empty (``off``: none), else ``/cache`` (the large local
    disk of ModelArts and OpenI notebooks); usable when it is a directory
    this process may write into. The core applies the same rule for the log
    directory and ASCEND_WORK_PATH (``usable_cache_dir``, which also refuses
    a relative path: here that is simply not used)."""
    root = os.environ.get("DAVINCIRUN_CACHE_ROOT") or "/cache"
    if root == "off" or not os.path.isabs(root):
        return None
    return root if os.path.isdir(root) and os.access(root, os.W_OK | os.X_OK) else None


def make_cache_dir():
    """Creates and returns a new empty directory for ``MS_COMPILER_CACHE_PATH``.

    Under the cache root (:func:`cache_root`) when usable, else under the
    system temporary directory. The name is unique; the directory has mode 0700.
    """
    return tempfile.mkdtemp(prefix="davincirun-ms-cache-", dir=cache_root())


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
