"""Helpers shared by the benchmark scripts: rank tables, the davincirun path,
finding and stopping the processes of a benchmark's job."""

import atexit
import json
import os
import shutil
import signal
import socket
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "fault"))
from process_scan import processes_with  # noqa: E402

# Every process a job starts inherits its environment, so a unique value of
# this variable finds them all, daemons that left the job's process groups
# and sessions included (as tests/fault/process_scan.py does for the tests).
MARKER = "DAVINCIRUN_BENCH_MARKER"


def davincirun_path():
    """The `davincirun` command on PATH: the compiled program itself, which
    an installed wheel puts in its scripts directory (and scripts/dev.sh's
    PATH takes from the development build)."""
    path = shutil.which("davincirun")
    if not path:
        sys.exit("davincirun is not on PATH: pip install . (or scripts/setup.sh, then source build/venv/bin/activate)")
    return path


def installed_copy(program):
    """A copy of `program` (and of the davincirun-supervisor beside it, if
    any) in a temporary directory removed at exit, written as pip installs
    a wheel's files. Measure that, not a build's output: the very same bytes
    copied run 0.46-0.68 ms faster per job of 8 ranks than the file the
    linker wrote, even with neither in the page cache (bench/README.md,
    "The launch floor")."""
    directory = tempfile.mkdtemp(prefix="davincirun-installed-")
    atexit.register(shutil.rmtree, directory, True)
    copy = os.path.join(directory, os.path.basename(program))
    shutil.copy2(os.path.realpath(program), copy)
    supervisor = os.path.join(os.path.dirname(os.path.realpath(program)), "davincirun-supervisor")
    if os.access(supervisor, os.X_OK):
        shutil.copy2(supervisor, os.path.join(directory, "davincirun-supervisor"))
    return copy


def write_table(path, ranks, device_ips=False):
    """A one-server format 1.0 table for this machine with `ranks` devices;
    `device_ips`: each device gets a distinct device_ip (davincirunsdk 0.1.x
    cannot read a table without them)."""
    devices = [{"device_id": str(i), "rank_id": str(i)} for i in range(ranks)]
    if device_ips:
        for i, device in enumerate(devices):
            device["device_ip"] = "10.%d.%d.%d" % (i >> 16, (i >> 8) & 255, i & 255)
    table = {
        "version": "1.0",
        "server_count": "1",
        "server_list": [{"server_id": "127.0.0.1", "device": devices}],
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


def marked(tag):
    """Pids of the live (not zombie) processes whose environment holds MARKER=tag."""
    return processes_with(MARKER, tag)


def kill_all(pids):
    """SIGKILL to each of `pids` (processes this benchmark started, found by marked())."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def free_port():
    """A TCP port on 127.0.0.1 free at the moment of asking (the kernel's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
