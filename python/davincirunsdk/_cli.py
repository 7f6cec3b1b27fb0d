"""The ``davincirun`` command on PATH: replaces itself with the compiled
program shipped inside the package (``bin/davincirun``), which finds its
``davincirun-supervisor`` next to itself. Python is gone once it runs; it
only passes its own interpreter on in ``DAVINCIRUN_PYTHON``."""

import os
import sys


def main():
    program = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "davincirun")
    # `davincirun train.py` (a script without execute permission) runs it with
    # this interpreter, the one davincirun was installed for, unless the
    # caller chose another.
    if sys.executable:
        os.environ.setdefault("DAVINCIRUN_PYTHON", sys.executable)
    try:
        os.execv(program, [program] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write("davincirun: cannot run %s: %s\n" % (program, e.strerror))
        return 127


if __name__ == "__main__":
    sys.exit(main())
