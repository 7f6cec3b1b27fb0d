"""How fault_driver.py starts a caller: with the signals the driver sends it
to end a job (SIGINT, SIGTERM) at their default disposition, as a program a
person starts from a terminal has them.

A signal ignored when a process starts stays ignored across exec(), and both
callers honour that on purpose: Python installs no KeyboardInterrupt handler
for a SIGINT ignored at start-up, and `davincirun` leaves ignored signals
alone (nohup, a background job of a script). A fault run started as a
background job of a non-interactive shell (`python bench/fault_run.py &`,
for which the shell ignores SIGINT and SIGQUIT) would hand its ignored SIGINT
to every caller: each rep ending in SIGINT would then run on until the
driver's hang limit, the caller never told, though nothing is wrong with it.
"""

import signal
import sys

# The signals fault_driver.py sends a caller to end its job (SIGKILL cannot be ignored).
SENT_SIGNALS = (signal.SIGINT, signal.SIGTERM)

# Run as `python -c RESET ARGV...`: puts the signals back to their default
# and becomes ARGV (same pid, so the driver signals the caller itself).
_RESET = (
    "import os, signal, sys\n"
    "for number in %r:\n"
    "    signal.signal(number, signal.SIG_DFL)\n"
    "os.execvp(sys.argv[1], sys.argv[1:])\n"
)


def ignored_signals():
    """The signals of SENT_SIGNALS this process ignores, hence its children too."""
    return [int(s) for s in SENT_SIGNALS if signal.getsignal(s) == signal.SIG_IGN]


def caller_argv(argv):
    """`argv` to start with subprocess so that its program gets SENT_SIGNALS at
    their default disposition: `argv` itself when this process ignores none of
    them (the usual case: no extra interpreter in between), else `argv`
    behind a Python that resets them and execs it."""
    ignored = ignored_signals()
    if not ignored:
        return list(argv)
    return [sys.executable, "-c", _RESET % (ignored,)] + list(argv)
