"""Waiting for a job's log file to say something: the training tests act
(kill a rank, check a restart) once a rank has reached an epoch."""

import time


def wait_for_text(path, needle, timeout=120.0):
    """Waits until file `path` holds `needle`; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path, errors="replace") as f:
                if needle in f.read():
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError("%r never appeared in %s within %s s" % (needle, path, timeout))
