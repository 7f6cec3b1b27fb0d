"""Which Python the ranks run: in a notebook, ``python`` looked up in PATH
is often not the kernel's own interpreter (another venv, conda env or
version, with other packages), a frequent surprise."""

import os
import re
import sys
import warnings
from typing import Any, List, Mapping, Optional

from . import _core

# A command word that names a Python interpreter: python, python3, python3.11.
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?$")


def _same_interpreter(found: str, executable: str) -> bool:
    # The same file in the same directory: a venv's bin/python links to the
    # base interpreter, but is another environment (its own site-packages).
    found, executable = os.path.abspath(found), os.path.abspath(executable)
    return os.path.realpath(found) == os.path.realpath(executable) and os.path.realpath(
        os.path.dirname(found)) == os.path.realpath(os.path.dirname(executable))


def foreign_interpreter(program: str, path_list: Optional[str], work_dir: str, executable: str) -> Optional[str]:
    """The interpreter a command starting with `program` runs when `program`
    names a Python interpreter that is not `executable` (``sys.executable``),
    else None (also when `program` is not a Python or not found: the launch
    reports that itself).

    Args:
        program: the command's first word.
        path_list: the PATH the ranks get (None or empty: the core's
            default, ``_core.DEFAULT_SEARCH_PATH``), searched as the launch
            searches it (``_core.find_executable``).
        work_dir: where a relative `program` with a slash resolves.
        executable: the caller's interpreter; empty: nothing to compare, None.
    """
    if not executable or not _PYTHON.match(os.path.basename(program)):
        return None
    found: Optional[str]
    if "/" in program:
        path = os.path.join(work_dir, program)  # an absolute program stays itself
        found = path if os.path.isfile(path) else None
    else:
        found = _core.find_executable(os.fsencode(program), os.fsencode(path_list or _core.DEFAULT_SEARCH_PATH))
    if found is None or _same_interpreter(found, executable):
        return None
    return os.path.abspath(found)


def warn_if_foreign(argv: List[bytes], env: Mapping[Any, Any], work_dir: Any, stacklevel: int) -> None:
    """One UserWarning when the command (`argv`, at least its first word)
    runs a Python that is not this process's (``sys.executable``). `env`:
    the ranks' extra variables (their PATH, when given, else this process's);
    `work_dir`: the ranks' working directory; `stacklevel`: as for
    ``warnings.warn``, 1 being this function."""
    if not argv:
        return
    program = os.fsdecode(argv[0])
    path_list = env.get("PATH", env.get(b"PATH", os.environ.get("PATH")))
    found = foreign_interpreter(program, None if path_list is None else os.fsdecode(path_list),
                                os.fsdecode(work_dir) or ".", sys.executable)
    if found:
        warnings.warn(
            "the ranks run %s (%s), not this kernel's Python %s, whose packages may differ: give sys.executable "
            "as the command's first word to use the kernel's" % (found, program, sys.executable),
            UserWarning,
            stacklevel=stacklevel,
        )
