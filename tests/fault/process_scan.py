"""Finding the processes of a test job: every process a job starts inherits
its environment, so a unique value of MARKER_VARIABLE in it finds them all,
daemons that left the job's process groups and sessions included. Used by the
pytest suite (tests/python/conftest.py) and the fault run (fault_checks.py)."""

import os

MARKER_VARIABLE = "DAVINCIRUN_TEST_MARKER"


def processes_with_marker(marker):
    """Pids of live (not zombie) processes whose environment holds MARKER_VARIABLE=marker."""
    return processes_with(MARKER_VARIABLE, marker)


def processes_with(variable, value):
    """Pids of live (not zombie) processes whose environment holds variable=value."""
    needle = ("%s=%s" % (variable, value)).encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as f:
                env = f.read()
            with open("/proc/%s/stat" % name, "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != b"Z" and needle in env.split(b"\0"):
            found.append(int(name))
    return found


def alive(pid):
    """Whether `pid` runs (a zombie, which its parent has not reaped yet, does not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def process_environ(pid):
    """The environment of process `pid` as {name: value} (bytes), or None when it is gone."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
    except OSError:
        return None
