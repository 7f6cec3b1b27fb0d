"""How fault_rep.py starts a caller: with the signals the driver sends it
to end a job (SIGINT, SIGTERM) at their default disposition, as a program a
person starts from a terminal has them. The pytest suite puts every stop
signal back at its default in its own process (restore_defaults, from
tests/python/conftest.py) for the same reason.

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

# The signals fault_rep.py sends a caller to end its job (SIGKILL cannot be ignored).
SENT_SIGNALS = (signal.SIGINT, signal.SIGTERM)

# The signals that stop a davincirun job from a terminal, a session or an engine.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)

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


def restore_defaults(signals):
    """Those of `signals` this process ignores back at their default (SIGINT:
    Python's KeyboardInterrupt, as Python sets it when SIGINT is not ignored
    at start-up), so that the processes it starts get them at their default
    too."""
    for number in signals:
        if signal.getsignal(number) == signal.SIG_IGN:
            signal.signal(number, signal.default_int_handler if number == signal.SIGINT else signal.SIG_DFL)


def caller_argv(argv):
    """`argv` to start with subprocess so that its program gets SENT_SIGNALS at
    their default disposition: `argv` itself when this process ignores none of
    them (the usual case: no extra interpreter in between), else `argv`
    behind a Python that resets them and execs it."""
    ignored = ignored_signals()
    if not ignored:
        return list(argv)
    return [sys.executable, "-c", _RESET % (ignored,)] + list(argv)
