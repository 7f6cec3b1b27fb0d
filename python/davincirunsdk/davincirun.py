"""``davincirunsdk.davincirun`` of davincirunsdk 0.1.x, whose ``main()`` was
the ``davincirun`` command: now that command is a compiled program
installed with this package, and ``main()`` runs it.
``python -m davincirunsdk.davincirun train.py`` works as ``davincirun train.py``."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from typing import List, NoReturn, Optional

from .errors import LaunchConfigError

__all__ = ["main", "program"]

PROGRAM = "davincirun"


def program() -> str:
    """The ``davincirun`` program installed with this package: in this
    interpreter's scripts directory, else beside the interpreter, else the
    first in ``PATH``.

    Raises:
        LaunchConfigError: none is found (the message names where it looked).
    """
    places = [sysconfig.get_path("scripts"), os.path.dirname(os.path.abspath(sys.executable))]
    for directory in places:
        candidate = os.path.join(directory, PROGRAM)
        if directory and os.access(candidate, os.X_OK) and os.path.isfile(candidate):
            return candidate
    found = shutil.which(PROGRAM)
    if found:
        return found
    raise LaunchConfigError("the davincirun program is not installed: not in %s, nor in PATH (reinstall davincirunsdk)"
                            % " or ".join(p for p in places if p))


def main(argv: Optional[List[str]] = None) -> NoReturn:
    """Runs the ``davincirun`` program with `argv` (default ``sys.argv[1:]``)
    in place of this process (``os.execv``), as 0.1.x's ``main()`` ended it
    with the job's exit status. Does not return.

    Raises:
        LaunchConfigError: the program is not found.
        OSError: it cannot be executed.
    """
    path = program()
    arguments = sys.argv[1:] if argv is None else list(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(path, [path] + arguments)


if __name__ == "__main__":
    main()
