"""Where the ranks' live output goes when a Python caller waits on a job,
and how it is written there (text, rank colours, skipped-line notices)."""

import os
import sys

from . import _core


def in_ipython_kernel():
    """True when running inside an IPython (Jupyter) kernel."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # an unusual IPython install must not break a launch
        return False
    return shell is not None and getattr(shell, "kernel", None) is not None


# Where the ranks' live output goes (_core.Job's `console`).
CONSOLE_PYTHON = "python"  # queued for the waiting Python thread, which writes sys.stdout
CONSOLE_TERMINAL = "terminal"  # file descriptors 1 and 2, written by the supervisor process
CONSOLE_NONE = "none"  # the log files only


def console_mode(output_notebook):
    """The C++ console mode for ``output_notebook`` (see start_distributed_train).

    ``False`` shows nothing live (log files only). Otherwise lines are shown:
    written by the job's supervisor process straight to file descriptor 1
    when that is where ``sys.stdout`` writes outside a kernel (fastest),
    else handed to Python, which writes them to ``sys.stdout`` (a notebook
    cell, a captured or redirected stream).
    """
    if output_notebook is False:
        return CONSOLE_NONE
    if output_notebook is None and not in_ipython_kernel():
        try:
            if sys.stdout is sys.__stdout__ and sys.stdout.fileno() == 1:
                sys.stdout.flush()
                return CONSOLE_TERMINAL
        except (AttributeError, OSError, ValueError):
            pass
    return CONSOLE_PYTHON


def output_watched(output_notebook):
    """Whether someone watches the ranks' lines as they come: a notebook
    cell, or a terminal on sys.stdout or sys.stderr. Python ranks then get
    PYTHONUNBUFFERED=1 (unless it is set), so each line shows at once;
    otherwise (a batch job writing to files or pipes, or ``output_notebook
    =False``) they keep Python's block buffer, far cheaper for a flood of
    print() (LaunchOptions.output_watched)."""
    if output_notebook is False:
        return False
    if in_ipython_kernel():
        return True
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None and stream.isatty():
                return True
        except (AttributeError, OSError, ValueError):
            pass
    return False


def stop_request_name(in_kernel):
    """How the user stops a job here, as the notice that starts a stop names
    it: "SIGKILL in 10 s, or at once on a second Ctrl-C". A second stop
    (KeyboardInterrupt while the stop runs, or terminate()) kills at once."""
    return "interrupt (the stop button)" if in_kernel else "Ctrl-C"


def wants_colour(in_kernel):
    """Colour rank prefixes in a notebook (front ends render ANSI colours in
    streams) or on a terminal, unless NO_COLOR is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    if in_kernel:
        return True
    try:
        return sys.stdout.isatty()
    except (AttributeError, OSError, ValueError):
        return False


def colourize(text):
    """`text` (whole lines) with each "[rank N]" prefix in the rank's colour
    and each "[davincirun]" prefix in bold: the same colours as the C++
    console's (console_sink.hpp colourize_prefixes)."""
    return _core.colourize_prefixes(text)


class ConsoleWriter:
    """Writes text to ``sys.stdout``. A display that fails (a closed pipe, no
    sys.stdout) is given up for the rest of the job: the ranks and their log
    files must never suffer for it."""

    def __init__(self, colour=False):
        self.colour = colour
        self._broken = False

    def lines(self, text):
        """Shows whole lines of the ranks (and the launcher's notices)."""
        if text:
            self._write(colourize(text) if self.colour else text)

    def text(self, text):
        """Shows `text` as it is."""
        self._write(text)

    def note(self, text):
        """Shows one line of the launcher's own, e.g. where the logs are."""
        self.lines(_core.NOTICE_PREFIX + text.rstrip("\n") + "\n")

    def _write(self, text):
        if self._broken:
            return
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except Exception:  # OSError (EPIPE), AttributeError (no stdout), ValueError (closed)
            self._broken = True
