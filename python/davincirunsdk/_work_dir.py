"""A missing work directory is created, as davincirunsdk 0.1.x did, and
taken back when the job then cannot start."""

import os
from typing import Optional, Union

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


def make_work_dir(work_dir: PathLike) -> Optional[str]:
    """Creates `work_dir` with its missing parents when it does not exist
    (``os.makedirs``: mode 0777 less the umask, as 0.1.x); returns the
    topmost directory made, or None when nothing was made. A path that
    cannot be made is left alone: the launch plan then says why it cannot be
    used."""
    if os.path.lexists(work_dir or "."):
        return None
    try:
        path = os.path.abspath(os.fsdecode(work_dir))
    except OSError:  # the current directory was removed: the launch plan says so
        return None
    top = path
    while not os.path.lexists(os.path.dirname(top)):
        top = os.path.dirname(top)
    try:
        os.makedirs(path)
    except OSError:
        return None
    return top


def remove_made_dirs(work_dir: PathLike, top: str) -> None:
    """Removes what :func:`make_work_dir` made (`top` is what it returned),
    from `work_dir` up, as far as the directories are still empty."""
    path = os.path.abspath(os.fsdecode(work_dir) or ".")
    while True:
        try:
            os.rmdir(path)
        except OSError:
            return
        if path == top:
            return
        path = os.path.dirname(path)
