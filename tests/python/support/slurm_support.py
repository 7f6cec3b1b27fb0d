"""A real Slurm cluster over test hosts (netns_support.py): munged and
slurmctld on this machine, one slurmd per host, each in the host's
namespaces (`slurmd -N <host>`, NodeAddr = the host's address), all from a
temporary configuration and state directory. Debian 12's slurm-wlm (22.05)
and munge (scripts/setup.sh installs them).

    cluster = SlurmCluster(network, tmp_path / "slurm")   # or the `slurm` fixture
    proc = cluster.srun(["-N2", "--ntasks-per-node=1", "-K", "davincirun", ...])
    cluster.close()                                         # scancel, daemons killed by pid, state removed
"""

import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

DAEMONS = ("munged", "slurmctld", "slurmd", "srun", "scontrol", "sinfo", "scancel")

# Proctrack: proctrack/cgroup needs a cgroup hierarchy of its own per
# slurmd, but every test host shares this machine's, where the slurmds'
# job and step cgroups (named by job and step, not by node) would collide;
# proctrack/linuxproc finds a step's processes by their parents in /proc,
# and a stop signals each of them: the engine's own way to signal every
# process at once. KillWait: seconds between that SIGTERM and SIGKILL.
CONFIG = """\
ClusterName=dvrtest
SlurmctldHost={controller}({controller_address})
SlurmctldPort={controller_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
SlurmUser=root
SlurmdUser=root
StateSaveLocation={state}
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.%n.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
KillWait={kill_wait}
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
{nodes}
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


def require_slurm():
    missing = [d for d in DAEMONS if not shutil.which(d)]
    if missing:
        pytest.skip("Slurm and munge are not installed (%s missing): apt-get install slurm-wlm munge"
                    % ", ".join(missing))


def _free_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


class SlurmCluster:
    """slurmctld here, a slurmd on every host of `network` (which must have a
    machine address: Network(..., machine_address=True))."""

    def __init__(self, network, root, kill_wait=10):
        require_slurm()
        self.network = network
        self.root = str(root)
        self.daemons = []  # Popens of munged, slurmctld, the slurmds: killed by pid
        os.makedirs(os.path.join(self.root, "spool"))
        os.makedirs(os.path.join(self.root, "state"))
        self.conf = os.path.join(self.root, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        try:
            self._start_munge()
            self._write_config(kill_wait)
            self._start(["slurmctld", "-D", "-f", self.conf], "slurmctld")
            for host in network.hosts:
                proc = host.popen(["slurmd", "-D", "-N", host.name, "-f", self.conf], env={"SLURM_CONF": self.conf},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                self.daemons.append(proc)
            self._wait_idle(len(network.hosts))
        except BaseException:
            self.close()
            raise

    def _start(self, argv, name):
        log = open(os.path.join(self.root, name + ".out"), "wb")
        proc = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.daemons.append(proc)
        return proc

    def _start_munge(self):
        # The key's directory is private; the socket's must be searchable by all.
        key_dir = os.path.join(self.root, "munge-key")
        self.munge_dir = os.path.join(self.root, "munge")
        os.makedirs(key_dir, mode=0o700)
        os.makedirs(self.munge_dir, mode=0o755)
        key = os.path.join(key_dir, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(128))
        os.chmod(key, 0o400)
        self.munge_socket = os.path.join(self.munge_dir, "munge.socket")
        # --force: munged refuses root and a socket under /tmp without it.
        self._start(["munged", "--foreground", "--force", "--socket=" + self.munge_socket, "--key-file=" + key,
                     "--pid-file=" + os.path.join(self.munge_dir, "munged.pid"),
                     "--seed-file=" + os.path.join(self.munge_dir, "munged.seed"),
                     "--log-file=" + os.path.join(self.munge_dir, "munged.log")], "munged")
        deadline = time.monotonic() + 10
        while not os.path.exists(self.munge_socket):
            if time.monotonic() > deadline:
                raise RuntimeError("munged did not start: " + self.log("munged.out"))
            time.sleep(0.05)

    def _write_config(self, kill_wait):
        nodes = "\n".join("NodeName=%s NodeAddr=%s NodeHostname=%s CPUs=2 State=UNKNOWN"
                          % (h.name, h.address, h.name) for h in self.network.hosts)
        with open(self.conf, "w") as f:
            f.write(CONFIG.format(
                controller=socket.gethostname(),  # slurmctld serves only the host named here
                controller_address=self.network.machine_address,
                controller_port=_free_port(),
                slurmd_port=6818,  # one per host namespace
                munge_socket=self.munge_socket,
                state=os.path.join(self.root, "state"),
                root=self.root,
                kill_wait=kill_wait,
                nodes=nodes))

    def _wait_idle(self, count, timeout=60):
        deadline = time.monotonic() + timeout
        states = ""
        while time.monotonic() < deadline:
            out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=self.env, capture_output=True, text=True)
            states = out.stdout + out.stderr
            if sum(1 for line in out.stdout.splitlines() if line.split()[-1:] == ["idle"]) == count:
                return
            for proc in self.daemons:
                if proc.poll() is not None:
                    raise RuntimeError("a Slurm daemon exited (%s): %s\n%s" % (proc.args[0], proc.returncode,
                                                                             self.log("slurmctld.log")[-3000:]))
            time.sleep(0.2)
        raise RuntimeError("the Slurm nodes did not come up: %s\n%s" % (states, self.log("slurmctld.log")[-3000:]))

    def log(self, name):
        try:
            with open(os.path.join(self.root, name), errors="replace") as f:
                return f.read()
        except OSError as e:
            return str(e)

    def command(self, argv, **kwargs):
        """A Slurm client command run here, to its end (text)."""
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=60, **kwargs)

    def srun(self, args, env=None, **kwargs):
        """`srun <args>` started here (its stdout and stderr: pipes); returns
        the Popen. The tasks inherit `env` over this machine's environment."""
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        return subprocess.Popen(["srun", *args], env=dict(self.env, **(env or {})), stdin=subprocess.DEVNULL, **kwargs)

    def jobs(self):
        out = self.command(["squeue", "-h", "-o", "%i"]).stdout
        return [line.strip() for line in out.splitlines() if line.strip()]

    def close(self):
        """Cancels every job, kills every daemon it started (by pid, then
        waits for it), and leaves the state under `root` to pytest's tmp_path."""
        if shutil.which("scancel") and os.path.exists(self.conf):
            for job in self.jobs() if self.daemons else []:
                self.command(["scancel", job])
        for proc in reversed(self.daemons):
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
