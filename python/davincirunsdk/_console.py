"""Where the ranks' live output goes when a Python caller waits on a job."""

import codecs
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


def console_mode(output_notebook):
    """The C++ console mode for ``output_notebook`` (see start_distributed_train).

    ``False`` shows nothing live (log files only). Otherwise lines are shown:
    written by the C++ event loop straight to file descriptor 1 when that is
    where ``sys.stdout`` writes outside a kernel (fastest), else handed to the
    waiting Python thread, which writes them to ``sys.stdout`` (a notebook
    cell, a captured or redirected stream).
    """
    if output_notebook is False:
        return _core.ConsoleMode.none
    if output_notebook is None and not in_ipython_kernel():
        try:
            if sys.stdout is sys.__stdout__ and sys.stdout.fileno() == 1:
                sys.stdout.flush()
                return _core.ConsoleMode.terminal
        except (AttributeError, OSError, ValueError):
            pass
    return _core.ConsoleMode.python


class ConsoleWriter:
    """Writes queued console bytes to ``sys.stdout`` as text.

    Decoding is incremental, so a UTF-8 character split between two chunks
    is shown whole; invalid bytes are shown as U+FFFD, never fatal. The log
    files keep the raw bytes.
    """

    def __init__(self):
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._broken = False

    def note(self, text):
        """Shows one line of the launcher's own (str), e.g. where the logs are."""
        self.write(text.encode("utf-8"))

    def write(self, data, skipped_lines=0):
        """Shows `data`; a display that fails (a closed pipe, no sys.stdout)
        is given up for the rest of the job: the ranks and their log files
        must never suffer for it."""
        if self._broken:
            return
        parts = []
        if skipped_lines:
            parts.append(
                "[davincirun] %d line(s) not shown here (the display fell behind); "
                "the log files have them\n" % skipped_lines
            )
        if data:
            parts.append(self._decoder.decode(data))
        if parts:
            try:
                sys.stdout.write("".join(parts))
                sys.stdout.flush()
            except Exception:  # OSError (EPIPE), AttributeError (no stdout), ValueError (closed)
                self._broken = True
