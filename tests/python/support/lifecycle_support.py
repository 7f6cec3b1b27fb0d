"""Real jobs to put in a given state of their life cycle and prod there
(docs/architecture.md, "The life cycle"): the rank program, a `davincirun`
whose output is read while it runs, its run directory, journal and
summary, and the checks every scenario ends with: nothing of the job is
left, and its devices are free for the next job."""

import json
import os
import signal
import socket
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
rank = int(os.environ.get("RANK_ID", "-1"))  # -1: MindSpore's scheduler (dynamic-cluster mode)
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
if mode == "exit0":     # rank 0 exits 0 after `seconds`, the others 1.5 s later
    time.sleep(seconds + (0 if rank == 0 else 1.5))
    sys.exit(0)
if mode == "fail1once":  # rank 1 fails in the first attempt only; every later attempt exits 0 after `seconds`
    if os.environ["DAVINCIRUN_RESTART_COUNT"] != "0" or rank != 1:
        time.sleep(seconds if os.environ["DAVINCIRUN_RESTART_COUNT"] != "0" else 120)
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


def write_table(path, servers, devices=1, subnet=None):
    """A format 1.0 table: `devices` devices on each of `servers` (ids
    127.0.0.x: every one of them is this machine's loopback). The device
    addresses are in 10.`subnet`.0.0/16 (random when None): tables that
    differ there make jobs of different ids and ports, which may run side
    by side."""
    if subnet is None:
        subnet = uuid.uuid4().int % 250
    table = {"version": "1.0", "server_count": str(len(servers)), "status": "completed", "server_list": []}
    rank = 0
    for server in servers:
        entries = []
        for d in range(devices):
            entries.append({"device_id": str(d), "device_ip": "10.%d.%d.%d" % (subnet, d, rank + 1),
                            "rank_id": str(rank)})
            rank += 1
        table["server_list"].append({"server_id": server, "device": entries})
    with open(path, "w") as f:
        json.dump(table, f)
    return str(path)


# A launcher through the Python API: it starts the job, prints its run
# directory, and asks for a kill (request_kill(), as a dropped Job does)
# once the file argv[1] exists; then it prints the result.
API_LAUNCHER = r"""
import json, os, sys, time
from davincirunsdk import start_distributed_train
trigger, table, server, log_dir = sys.argv[1:5]
keywords = json.loads(os.environ.get("API_LAUNCHER_KEYWORDS", "{}"))
job = start_distributed_train(sys.argv[5:], rank_table=table, server_id=server, log_dir=log_dir,
                              output_notebook=False, **keywords)
print("logs in " + job.run_dir, flush=True)
while not os.path.exists(trigger):
    time.sleep(0.01)
job._core.request_kill()
code = job.wait(raise_exception=False)
print("RESULT %d %s" % (code, job.result.stop_reason), flush=True)
sys.exit(code)
"""


class Launch:
    """One launcher of a scenario (`davincirun`, or API_LAUNCHER), its output read as it comes."""

    def __init__(self, directory, argv, env, name="job", preexec_fn=None):
        self.directory = directory
        self.name = name
        self.output = ""
        self._lock = threading.Lock()
        self.started = time.monotonic()
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
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

    def ups(self):
        """How many ranks said "up", in the console or in their logs."""
        count = self.text().count(" up\n")
        run = self.run_dir()
        if run and os.path.isdir(run):
            logs = 0
            for name in os.listdir(run):
                if name.endswith(".log"):
                    try:
                        with open(os.path.join(run, name)) as f:
                            logs += " up\n" in f.read()
                    except OSError:
                        pass
            count = max(count, logs)
        return count

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

    def supervisor_pid(self, timeout=5.0):
        deadline = time.monotonic() + timeout
        while True:
            out = subprocess.run(["pgrep", "-P", str(self.proc.pid), "davincirun-sup"],
                                 stdout=subprocess.PIPE).stdout.split()
            if out or time.monotonic() > deadline:
                return int(out[0]) if out else None
            time.sleep(0.02)

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


def free_port():
    """A TCP port no listener holds now (the kernel's pick)."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


class Scenario:
    """The processes, devices and files of one scenario: a marker every
    process of its jobs carries, a lock directory of its own, its table,
    and a peer port of its own (ports derived from the job id may meet
    when scenarios run side by side)."""

    def __init__(self, directory, servers=("127.0.0.1",), devices=1, subnet=None):
        self.directory = directory
        os.makedirs(str(directory), exist_ok=True)
        self.marker = uuid.uuid4().hex
        self.lock_dir = os.path.join(str(directory), "locks")
        os.makedirs(self.lock_dir, exist_ok=True)
        self.servers = list(servers)
        self.devices = devices
        self.table = write_table(os.path.join(str(directory), "table.json"), self.servers, devices, subnet)
        self.script = os.path.join(str(directory), "ranks.py")
        with open(self.script, "w") as f:
            f.write(RANKS)
        self.launches = []
        self.peer_port = free_port()

    def env(self, server=0, **extra):
        """The environment of server `server`'s launcher: each server locks
        its devices in a directory of its own, as separate machines would."""
        env = dict(os.environ)
        lock_dir = os.path.join(self.lock_dir, "server%d" % server)
        os.makedirs(lock_dir, exist_ok=True)
        env.update({MARKER_VARIABLE: self.marker, "DAVINCIRUN_LOCK_DIR": lock_dir,
                    "DAVINCIRUN_CACHE_ROOT": "off", "PYTHONUNBUFFERED": "1",
                    "DAVINCIRUN_PEER_PORT": str(self.peer_port)})
        env.pop("DAVINCIRUN_TEST_HOLD", None)
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def ranks_argv(self, mode, seconds):
        return [sys.executable, self.script, mode] + ([str(seconds)] if seconds is not None else [])

    def log_dir(self, server):
        return os.path.join(str(self.directory), "log%d" % server)

    def start(self, mode, *options, server=0, seconds=None, hold=None, env=None, table=None, preexec_fn=None):
        """davincirun on server `server` of the table, running the rank program in `mode`."""
        extra = dict(env or {})
        if hold:
            extra["DAVINCIRUN_TEST_HOLD"] = hold
        argv = ["davincirun", "-r", table or self.table, "--server-id", self.servers[server],
                "-l", self.log_dir(server), *options] + self.ranks_argv(mode, seconds)
        launch = Launch(self.directory, argv, self.env(server, **extra), name="server %d" % server,
                        preexec_fn=preexec_fn)
        self.launches.append(launch)
        return launch

    def start_api(self, mode, seconds=None, hold=None, keywords=None):
        """The job through the Python API (API_LAUNCHER), with `keywords` for
        start_distributed_train(); kill_request() asks it for a kill."""
        path = os.path.join(str(self.directory), "api_launcher.py")
        with open(path, "w") as f:
            f.write(API_LAUNCHER)
        self.trigger = os.path.join(str(self.directory), "kill-now")
        argv = [sys.executable, path, self.trigger, self.table, self.servers[0], self.log_dir(0)]
        env = self.env(**({"DAVINCIRUN_TEST_HOLD": hold} if hold else {}))
        env["API_LAUNCHER_KEYWORDS"] = json.dumps(keywords or {})
        launch = Launch(self.directory, argv + self.ranks_argv(mode, seconds), env, name="api")
        self.launches.append(launch)
        return launch

    def kill_request(self):
        with open(self.trigger, "w"):
            pass

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
                               "--wait-timeout", "0", "true"], env=self.env(server), stdout=subprocess.DEVNULL,
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
