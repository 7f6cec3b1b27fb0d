"""Per-rank metrics: ``log_metric(name, value, step=None)`` appends one JSON
line to the file the launcher gave this rank (``DAVINCIRUN_METRICS_FILE``,
``<run dir>/metrics/rank_<RANK>.jsonl``), so ranks never overwrite one
another. The notebook view charts these files while the job runs, and the
job record keeps them (docs/metrics.md).

A line (the format is a contract, docs/metrics.md)::

    {"time": 1733412345.123456, "name": "loss", "value": 0.25, "step": 100, "attempt": 1, "rank": 0}

Standard library only, nothing imported that davincirunsdk does not
already import; a call costs one ``write(2)`` and a few microseconds.
"""

import json
import math
import operator
import os
import threading
import time
import warnings
from typing import Set

__all__ = ["log_metric", "METRICS_FILE_VARIABLE", "MAX_NAME_LENGTH"]

# The variable the supervisor sets for every rank (not MindSpore's scheduler).
METRICS_FILE_VARIABLE = "DAVINCIRUN_METRICS_FILE"
# The longest metric name, in characters.
MAX_NAME_LENGTH = 200
# Seconds between two checks that the open file is still in its folder.
CHECK_SECONDS = 1.0

_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
_NONFINITE = {math.inf: "inf", -math.inf: "-inf"}


def _bad_character(name):
    """The first control character of `name` (C0, DEL, C1), or None."""
    for ch in name:
        if ch < " " or "\x7f" <= ch <= "\x9f":
            return ch
    return None


# Names already found good (a script logs the same few names again and again), up to _NAMES_KEPT.
_good_names: Set[str] = set()
_NAMES_KEPT = 4096


def _check_name(name):
    if not isinstance(name, str):
        raise TypeError("log_metric: name must be a str, not %s (%r)" % (type(name).__name__, name))
    if name in _good_names:
        return
    if not name:
        raise ValueError("log_metric: name must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError("log_metric: name %r... is %d characters long; at most %d"
                         % (name[:40], len(name), MAX_NAME_LENGTH))
    bad = _bad_character(name)
    if bad is not None:
        raise ValueError("log_metric: name %r holds the control character %r" % (name, bad))
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("log_metric: name %r is not valid Unicode (a lone surrogate)" % (name,)) from None
    if len(_good_names) < _NAMES_KEPT:
        _good_names.add(name)


def _to_float(name, value):
    """`value` as a float: an int, a float (bool: 1.0 or 0.0), or anything
    with __float__ (a numpy scalar, a 0-d tensor, Decimal, Fraction)."""
    if type(value) is float:
        return value
    if isinstance(value, (str, bytes, bytearray)) or not hasattr(type(value), "__float__"):
        raise TypeError("log_metric(%r): value must be a real number (int, float, or an object with __float__ "
                        "such as a numpy scalar or a 0-d tensor), not %s" % (name, type(value).__name__))
    try:
        return float(value)
    except Exception as e:  # a tensor of several elements, a complex, an int too large for a float
        raise ValueError("log_metric(%r): value %s cannot be made a float: %s"
                         % (name, type(value).__name__, e)) from None


def _to_step(name, step):
    if step is None:
        return None
    if isinstance(step, bool):
        raise TypeError("log_metric(%r): step must be None or an int, not bool" % (name,))
    try:
        index = operator.index(step)
    except TypeError:
        raise TypeError("log_metric(%r): step must be None or an int (a numpy integer too), not %s (%r)"
                        % (name, type(step).__name__, step)) from None
    if index < 0:
        raise ValueError("log_metric(%r): step must not be negative, got %d" % (name, index))
    return index


def _int_variable(name):
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def _rank_of(path):
    """This process's rank: RANK_ID, else RANK, else N of the file name
    rank_N.jsonl, else None."""
    for variable in ("RANK_ID", "RANK"):
        rank = _int_variable(variable)
        if rank is not None:
            return rank
    base = os.path.basename(path)
    if base.startswith("rank_") and base.endswith(".jsonl") and base[5:-6].isdigit():
        return int(base[5:-6])
    return None


class _Sink:
    """The open metrics file of this process (one per process: reopened
    after a fork), and whether an I/O error was already reported."""

    def __init__(self):
        self.lock = threading.Lock()
        self.pid = None
        self.path = None
        self.fd = None
        self.rank = None
        self.attempt = 1
        self.warned = False
        self.checked = 0.0  # time.time() the file was last seen still linked

    def open(self, path, now):
        """The descriptor for `path` in this process (opened now if needed), or raises OSError."""
        pid = os.getpid()
        with self.lock:
            if self.fd is not None and self.pid == pid and self.path == path:
                # Still linked? A removed file (its folder deleted) would swallow every line unseen;
                # looked at once a second (a call costs a few microseconds, fstat(2) one more).
                if now - self.checked < CHECK_SECONDS:
                    return self.fd
                if os.fstat(self.fd).st_nlink > 0:
                    self.checked = now
                    return self.fd
            if self.fd is not None and self.pid == pid:
                os.close(self.fd)  # removed, or another file named since: ours to close
            # After a fork the inherited descriptor is left alone (the parent's,
            # closed at exec by O_CLOEXEC): its number may be reused here.
            self.fd = None
            folder = os.path.dirname(path)
            if folder and not os.path.isdir(folder):
                try:
                    os.mkdir(folder, 0o700)  # the metrics folder only: never a missing run directory
                except FileExistsError:
                    pass  # another rank made it first
            self.fd = os.open(path, _FLAGS, 0o600)
            self.pid, self.path, self.checked = pid, path, now
            self.rank = _rank_of(path)
            restarts = _int_variable("DAVINCIRUN_RESTART_COUNT")
            self.attempt = 1 + restarts if restarts is not None and restarts >= 0 else 1
            return self.fd

    def failed(self, path, error):
        # The descriptor is kept: the next call tries again (a disk freed meanwhile).
        if not self.warned:
            self.warned = True
            warnings.warn("davincirunsdk.log_metric: cannot write %s (%s); metrics of this process are not "
                          "recorded while this lasts (training goes on; this warning is not repeated)"
                          % (path, error), RuntimeWarning, stacklevel=3)
        return False


_sink = _Sink()


def log_metric(name, value, step=None):
    """Records `value` of metric `name` (at training step `step`) for this
    rank: one JSON line appended to this rank's own metrics file, which the
    launcher's notebook view charts and the job record keeps.

    Args:
        name: a non-empty str of at most 200 characters, no control characters.
        value: a real number: int, float, bool (1 or 0), or any object with
            ``__float__`` (numpy scalars, 0-d torch tensors). NaN and
            infinities are recorded with ``"value": null`` and
            ``"nonfinite": "nan" | "inf" | "-inf"``.
        step: None or a non-negative int (numpy integers too).

    Returns:
        True when the line was written. False when this process was not
        started by davincirun (``DAVINCIRUN_METRICS_FILE`` unset: nothing
        is done, silently) or the file cannot be written (disk full, folder
        removed: warns once per process with a RuntimeWarning, never raises).

    Raises:
        TypeError, ValueError: a bad name, value or step, whether or not
        the process runs under davincirun.
    """
    _check_name(name)
    number = _to_float(name, value)
    step = _to_step(name, step)
    path = os.environ.get(METRICS_FILE_VARIABLE)
    if not path:
        return False
    now = time.time()
    try:
        fd = _sink.open(path, now)
    except OSError as e:
        return _sink.failed(path, e)
    record = {"time": now, "name": name, "value": number, "step": step, "attempt": _sink.attempt,
              "rank": _sink.rank}
    if not math.isfinite(number):
        record["value"], record["nonfinite"] = None, "nan" if number != number else _NONFINITE[number]
    line = (json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
    try:
        written = os.write(fd, line)  # one write(2) on an O_APPEND file: whole lines, never interleaved
    except OSError as e:
        return _sink.failed(path, e)
    if written != len(line):  # a short write (disk full): end the broken line so the next one is whole
        try:
            os.write(fd, b"\n")
        except OSError:
            pass
        return _sink.failed(path, OSError("only %d of %d bytes written" % (written, len(line))))
    return True
