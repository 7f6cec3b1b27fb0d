"""Helpers shared by the benchmark scripts: rank tables, the davincirun path."""

import json
import shutil
import sys


def davincirun_path():
    """The `davincirun` command on PATH: the compiled program itself, which
    an installed wheel puts in its scripts directory (and scripts/dev.sh's
    PATH takes from the development build)."""
    path = shutil.which("davincirun")
    if not path:
        sys.exit("davincirun is not on PATH: run `pip install .` (or scripts/setup.sh) first")
    return path


def write_table(path, ranks):
    """A one-server format 1.0 table for this machine with `ranks` devices."""
    table = {
        "version": "1.0",
        "server_count": "1",
        "server_list": [
            {"server_id": "127.0.0.1", "device": [{"device_id": str(i), "rank_id": str(i)} for i in range(ranks)]}
        ],
        "status": "completed",
    }
    with open(path, "w") as f:
        json.dump(table, f)
    return path


def peak_rss_kib(pid):
    """VmHWM (peak resident set) of a live process in KiB, or None."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def launcher_peak_rss_kib(pid):
    """Peak RSS of the launcher: the `davincirun` process plus its per-job
    supervisor process (its only child; the ranks are the supervisor's)."""
    total = peak_rss_kib(pid) or 0
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            children = [int(c) for c in f.read().split()]
    except OSError:
        children = []
    for child in children:
        total += peak_rss_kib(child) or 0
    return total
