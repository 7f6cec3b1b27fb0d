"""Real jobs to put in a given state of their life cycle and prod there
(docs/architecture.md, "The life cycle"): the rank program, a `davincirun`
whose output is read while it runs, its run directory, journal and
summary, and the checks every scenario ends with: nothing of the job is
left, and its devices are free for the next job."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

from process_scan import MARKER_VARIABLE, processes_with_marker

# The ranks of these scenarios. argv: mode [seconds]. Every rank first
# starts a daemon of its own (double fork, setsid) that only the end of the
# job can stop, then says "up", then does what its mode says.
RANKS = r"""
import os, signal, sys, time
rank = int(os.environ["RANK_ID"])
mode = sys.argv[1]
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.closerange(0, 3)
        time.sleep(120)
    os._exit(0)
os.wait()
if mode == "trap":      # SIGTERM: finish in `seconds`, then exit 0
    def finish(signum, frame):
        time.sleep(seconds)
        sys.exit(0)
    signal.signal(signal.SIGTERM, finish)
if mode == "ignore":    # SIGTERM does nothing
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("rank %d pid %d up" % (rank, os.getpid()), flush=True)
if mode == "exit":      # exit 0 after `seconds`
    time.sleep(seconds)
    sys.exit(0)
if mode == "fail" or (mode.startswith("fail1") and rank == 1):  # exit 3 after `seconds`
    time.sleep(seconds)
    print("Traceback (most recent call last):\nValueError: rank %d broke on purpose" % rank, flush=True)
    sys.exit(3)
if mode == "fail1trap":
    def finish(signum, frame):
        time.sleep(4)
        sys.exit(0)
    signal.signal(signal.SIGTERM, finish)
if mode == "fail1ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if mode == "quiet":
    time.sleep(120)
while True:
    print("rank %d working" % rank, flush=True)
    time.sleep(0.3)
"""


def write_table(path, servers, devices=1):
    """A format 1.0 table: `devices` devices on each of `servers` (ids
    127.0.0.x: every one of them is this machine's loopback)."""
    table = {"version": "1.0", "server_count": str(len(servers)), "status": "completed", "server_list": []}
    rank = 0
    for server in servers:
        entries = []
        for d in range(devices):
            entries.append({"device_id": str(d), "device_ip": "192.168.%d.%d" % (d, rank + 1), "rank_id": str(rank)})
            rank += 1
        table["server_list"].append({"server_id": server, "device": entries})
    with open(path, "w") as f:
        json.dump(table, f)
    return str(path)


class Launch:
    """One `davincirun` of a scenario, its output read as it comes."""

    def __init__(self, directory, argv, env, name="job", davincirun="davincirun", preexec_fn=None):
        self.directory = directory
        self.name = name
        self.output = ""
        self._lock = threading.Lock()
        self.started = time.monotonic()
        self.proc = subprocess.Popen([davincirun] + argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, env=env, cwd=str(directory), preexec_fn=preexec_fn)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for raw in iter(self.proc.stdout.readline, b""):
            with self._lock:
                self.output += raw.decode(errors="replace")

    def text(self):
        with self._lock:
            return self.output

    def wait_for(self, needle, timeout=20.0):
        """Waits until `needle` shows in the output (or the journal); False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.text() or needle in self.journal():
                return True
            if self.proc.poll() is not None and not self._reader.is_alive():
                return needle in self.text() or needle in self.journal()
            time.sleep(0.02)
        return False

    def wait_for_state(self, state, timeout=20.0):
        """Waits until the supervisor's journal says the job entered `state`."""
        return self.wait_for("-> %s on " % state, timeout)

    def run_dir(self):
        for line in self.text().splitlines():
            if "logs in " in line:
                return line.split("logs in ", 1)[1].strip()
        return None

    def journal(self):
        run = self.run_dir()
        try:
            with open(os.path.join(run, "events.txt")) as f:
                return f.read()
        except (OSError, TypeError):
            return ""

    def summary(self):
        run = self.run_dir()
        if run is None:
            return None
        try:
            with open(os.path.join(run, "summary.json")) as f:
                return json.load(f)
        except OSError:
            return None

    def supervisor_pid(self):
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid), "-f", "davincirun-supervisor"],
                             stdout=subprocess.PIPE).stdout.split()
        return int(out[0]) if out else None

    def signal(self, signo):
        try:
            self.proc.send_signal(signo)
        except ProcessLookupError:
            pass

    def wait(self, timeout=30.0):
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=5)
        self.ended = time.monotonic()
        return code

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Scenario:
    """The processes, devices and files of one scenario: a marker every
    process of its jobs carries, a lock directory of its own, its table."""

    def __init__(self, directory, servers=("127.0.0.1",), devices=1):
        self.directory = directory
        os.makedirs(str(directory), exist_ok=True)
        self.marker = uuid.uuid4().hex
        self.lock_dir = os.path.join(str(directory), "locks")
        os.makedirs(self.lock_dir, exist_ok=True)
        self.servers = list(servers)
        self.devices = devices
        self.table = write_table(os.path.join(str(directory), "table.json"), self.servers, devices)
        self.script = os.path.join(str(directory), "ranks.py")
        with open(self.script, "w") as f:
            f.write(RANKS)
        self.launches = []

    def env(self, **extra):
        env = dict(os.environ)
        env.update({MARKER_VARIABLE: self.marker, "DAVINCIRUN_LOCK_DIR": self.lock_dir,
                    "DAVINCIRUN_CACHE_ROOT": "off", "PYTHONUNBUFFERED": "1"})
        env.pop("DAVINCIRUN_TEST_HOLD", None)
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def start(self, mode, *options, server=0, seconds=None, hold=None, env=None, table=None, preexec_fn=None):
        """davincirun on server `server` of the table, running the rank program in `mode`."""
        extra = dict(env or {})
        if hold:
            extra["DAVINCIRUN_TEST_HOLD"] = hold
        argv = ["-r", table or self.table, "--server-id", self.servers[server],
                "-l", os.path.join(str(self.directory), "log%d" % server), *options,
                sys.executable, self.script, mode] + ([str(seconds)] if seconds is not None else [])
        launch = Launch(self.directory, argv, self.env(**extra), name="server %d" % server, preexec_fn=preexec_fn)
        self.launches.append(launch)
        return launch

    def left(self):
        """Pids of live processes of this scenario's jobs."""
        return processes_with_marker(self.marker)

    def wait_all_gone(self, timeout=3.0):
        """Waits until no process of the scenario is left; returns what is left then."""
        deadline = time.monotonic() + timeout
        left = self.left()
        while left and time.monotonic() < deadline:
            time.sleep(0.02)
            left = self.left()
        return left

    def devices_free(self, server=0):
        """Whether a new job could take this server's devices now (davincirun
        --dry-run exits 2 when another job holds one)."""
        proc = subprocess.run(["davincirun", "--dry-run", "-r", self.table, "--server-id", self.servers[server],
                               "--wait-timeout", "0", "true"], env=self.env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
        return proc.returncode == 0

    def close(self):
        """Kills what the scenario left (after its checks failed)."""
        for launch in self.launches:
            launch.kill()
        for pid in self.left():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
