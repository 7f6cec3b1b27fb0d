"""Test hosts in network namespaces: N machines on one Linux bridge, for
multi-server jobs on one real machine.

Each host is a network namespace with its own IPv4 address on the bridge
(10.77.0.11/24, 10.77.0.12/24, ...) and loopback up. Every command a host
runs enters that namespace (nsenter --net, which keeps /sys and so
/sys/fs/cgroup, unlike `ip netns exec`), then a mount and UTS namespace of its
own (unshare --mount --uts) where the host name is the host's ("h1") and
/etc/hosts is the host's file (bind-mounted) naming every host by its
address, so that a program resolving its own host name, as gloo does without
GLOO_SOCKET_IFNAME, finds the host's address. Each host has its own
device-lock directory and log directory.

    network = Network(3, tmp_path)          # or the `hosts` fixture
    table = network.rank_table(tmp_path / "t.json", network.hosts[:2], devices=2)
    procs = [h.start_davincirun(["-r", table, "--", sys.executable, "train.py"]) for h in network.hosts[:2]]
    network.hosts[1].pids()                 # every process in h2
    network.hosts[1].kill_all()             # SIGKILL them, by pid
    network.hosts[1].cut_link()             # ip link set <its veth> down
    network.close()                         # kill everything, delete the namespaces and the bridge

Needs root and a kernel that lets it create network namespaces; otherwise
require_netns() skips the test saying why.
"""

import json
import os
import shutil
import signal
import subprocess
import time
import uuid

import pytest

SUBNET = "10.77.0"
FIRST_HOST = 11  # h1 is 10.77.0.11
ROOT_HOST = 1  # this machine's own address on the bridge, when it has one

# Variables of the rank identity and the rendezvous that must not leak from
# the test's own environment into a host: the jobs find everything themselves.
_SCRUBBED = (
    "RANK_TABLE_FILE", "RANK_TABLE_FILE_V_1_0", "RANK_ID", "RANK_SIZE", "RANK", "LOCAL_RANK", "WORLD_SIZE",
    "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "JOB_ID", "BATCH_JOB_ID", "MA_VJ_NAME", "DEVICE_ID",
    "ASCEND_DEVICE_ID", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME", "HCCL_IF_IP",
    "MA_CURRENT_HOST_IP", "POD_IP", "XDL_IP", "SLURM_NODEID", "OMPI_COMM_WORLD_RANK", "VC_TASK_INDEX",
)


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def require_netns():
    """Skips the calling test unless this process can build test hosts:
    root, the tools, and a kernel that allows network namespaces."""
    if os.geteuid() != 0:
        pytest.skip("test hosts need root (network namespaces, a bridge, mount namespaces)")
    missing = [tool for tool in ("ip", "nsenter", "unshare", "mount") if not shutil.which(tool)]
    if missing:
        pytest.skip("test hosts need %s (iproute2, util-linux)" % ", ".join(missing))
    probe = "dvrprobe%d" % os.getpid()
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        pytest.skip("network namespaces are not allowed here: ip netns add: %s" % made.stderr.strip())
    _ip("netns", "del", probe, check=False)


class Host:
    """One test machine: a network namespace on the bridge, its name, its
    address, its files."""

    def __init__(self, network, index):
        self.network = network
        self.index = index
        self.name = "h%d" % (index + 1)
        self.address = "%s.%d" % (network.subnet, FIRST_HOST + index)
        self.netns = "%sh%d" % (network.tag, index + 1)
        self.veth = "%sv%d" % (network.tag, index + 1)  # the bridge's end; the host's end is eth0
        self.interface = "eth0"
        self.root = os.path.join(network.root, self.name)
        self.lock_dir = os.path.join(self.root, "locks")
        self.log_dir = os.path.join(self.root, "log")
        self.hosts_file = os.path.join(self.root, "hosts")
        self.processes = []  # every Popen this host started, reaped by close()
        for d in (self.lock_dir, self.log_dir):
            os.makedirs(d)

    # -- setup, teardown --

    def _create(self):
        _ip("netns", "add", self.netns)
        _ip("link", "add", self.veth, "type", "veth", "peer", "name", self.interface, "netns", self.netns)
        _ip("link", "set", self.veth, "master", self.network.bridge)
        _ip("link", "set", self.veth, "up")
        _ip("-n", self.netns, "addr", "add", self.address + "/24", "dev", self.interface)
        _ip("-n", self.netns, "link", "set", self.interface, "up")
        _ip("-n", self.netns, "link", "set", "lo", "up")
        self.write_hosts_file()

    def write_hosts_file(self, own_address=None):
        """This host's /etc/hosts: every host by its address; this host's own
        name by `own_address` when given (Debian's installer writes
        127.0.1.1 there, which a program binding to its host name's address
        cannot be reached on)."""
        with open(self.hosts_file, "w") as f:
            f.write("127.0.0.1 localhost\n")
            for other in self.network.hosts:
                address = own_address if other is self and own_address else other.address
                f.write("%s %s\n" % (address, other.name))

    def _netns_inode(self):
        try:
            return os.stat("/run/netns/" + self.netns).st_ino
        except FileNotFoundError:
            return None

    # -- running things on the host --

    def argv(self, command):
        """`command` (argv) as run on this host: in its network namespace,
        then its own mount and UTS namespaces with its host name and
        /etc/hosts. The wrappers exec, so a Popen's pid is the command's."""
        setup = 'hostname "$1" && mount --bind "$2" /etc/hosts && shift 2 && exec "$@"'
        return [
            "nsenter", "--net=/run/netns/" + self.netns, "--",
            "unshare", "--mount", "--uts", "--",
            "/bin/sh", "-c", setup, "host-" + self.name, self.name, self.hosts_file, *command,
        ]

    def env(self, extra=None):
        """This process's environment without any rank or rendezvous
        variable, with the host's own device-lock directory and no cache disk."""
        env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
        env["DAVINCIRUN_LOCK_DIR"] = self.lock_dir
        env["DAVINCIRUN_CACHE_ROOT"] = "off"
        env.update(extra or {})
        return env

    def popen(self, command, env=None, **kwargs):
        """Starts `command` on this host (stdout and stderr: pipes unless
        given); returns the Popen, which close() reaps."""
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        proc = subprocess.Popen(self.argv(command), env=self.env(env), stdin=subprocess.DEVNULL, **kwargs)
        self.processes.append(proc)
        return proc

    def run(self, command, env=None, timeout=60, **kwargs):
        """Runs `command` on this host to its end; returns CompletedProcess (text)."""
        return subprocess.run(self.argv(command), env=self.env(env), stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=timeout, **kwargs)

    def start_davincirun(self, args, env=None, **kwargs):
        """`davincirun --log-dir <this host's> <args>` on this host; returns its Popen."""
        return self.popen([davincirun_path(), "--log-dir", self.log_dir, *args], env=env, **kwargs)

    def run_log(self, rank, device):
        """The text of a rank's log in this host's latest run."""
        with open(os.path.join(self.log_dir, "latest", "rank_%d.device_%d.log" % (rank, device))) as f:
            return f.read()

    # -- inspecting and breaking the host --

    def pids(self):
        """Every process in this host's network namespace."""
        inode = self._netns_inode()
        if inode is None:
            return []
        link = "net:[%d]" % inode
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                if os.readlink("/proc/%s/ns/net" % entry) == link:
                    found.append(int(entry))
            except OSError:
                pass  # gone meanwhile, or a kernel thread
        return found

    def kill_all(self, sig=signal.SIGKILL, timeout=5.0):
        """Sends `sig` to every process of this host, by pid, and (for
        SIGKILL) waits until none is left; returns the pids signalled."""
        pids = self.pids()
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        if sig == signal.SIGKILL:
            self.wait_empty(timeout)
        return pids

    def wait_empty(self, timeout):
        """Waits until no process is left in this host (reaping the ones it
        started); returns the pids still alive at the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            for proc in self.processes:
                proc.poll()
            left = [pid for pid in self.pids() if not _is_zombie(pid)]
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.05)

    def cut_link(self):
        """Cuts this host off the network: its veth on the bridge goes down."""
        _ip("link", "set", self.veth, "down")

    def restore_link(self):
        _ip("link", "set", self.veth, "up")


def _is_zombie(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def davincirun_path():
    path = shutil.which("davincirun")
    if path is None:
        pytest.skip("davincirun is not on PATH (bash scripts/dev.sh, or pip install .)")
    return path


class Network:
    """`count` test hosts on a bridge of their own, their files under
    `root`. Names carry a random tag, so that concurrent runs do not meet.

    With `machine_address`, this machine itself gets <subnet>.1 on the
    bridge (`self.machine_address`), for daemons that run here and talk to
    the hosts (slurmctld); the subnet is then random (10.77.<2..254>), so
    that two runs' routes do not clash."""

    def __init__(self, count, root, machine_address=False):
        require_netns()
        self.tag = "dvr" + uuid.uuid4().hex[:4]
        self.bridge = self.tag + "b"
        self.root = str(root)
        self.subnet = "10.77.%d" % (2 + int(uuid.uuid4().hex[:4], 16) % 253) if machine_address else SUBNET
        self.machine_address = "%s.%d" % (self.subnet, ROOT_HOST) if machine_address else None
        self.hosts = []
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("link", "set", self.bridge, "up")
            if self.machine_address:
                _ip("addr", "add", self.machine_address + "/24", "dev", self.bridge)
            self.hosts = [Host(self, i) for i in range(count)]
            for host in self.hosts:
                host._create()
        except BaseException:
            self.close()
            raise

    def rank_table(self, path, hosts, devices=1, device_ids=None, server_ids=None):
        """Writes a format 1.0 table of `hosts` (server_id = each host's
        address, or `server_ids` with host_ip = the address, as the
        Kubernetes operator writes them) with `devices` devices each (ids
        0.., or `device_ids`), ranks in host order; returns its path."""
        ids = device_ids if device_ids is not None else list(range(devices))
        servers, rank = [], 0
        for host in hosts:
            device_list = []
            for d in ids:
                device_ip = "192.168.%d.%d" % (100 + d, FIRST_HOST + host.index)  # HCCL's; unused on the CPU
                device_list.append({"device_id": str(d), "device_ip": device_ip, "rank_id": str(rank)})
                rank += 1
            server = {"server_id": host.address}
            if server_ids:
                server = {"server_id": server_ids[hosts.index(host)], "host_ip": host.address}
            server["device"] = device_list
            servers.append(server)
        table = {"version": "1.0", "server_count": str(len(hosts)), "server_list": servers, "status": "completed"}
        with open(str(path), "w") as f:
            json.dump(table, f, indent=2)
        return str(path)

    def leftovers(self):
        """{host name: pids} of every host that still has processes."""
        return {h.name: h.pids() for h in self.hosts if h.pids()}

    def close(self):
        """Kills every process of every host (by pid), reaps what it
        started, deletes the namespaces and the bridge (which takes the
        veths along)."""
        for host in self.hosts:
            host.kill_all()
            for proc in host.processes:
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
                for stream in (proc.stdout, proc.stderr):
                    if stream:
                        stream.close()
        for host in self.hosts:
            _ip("netns", "del", host.netns, check=False)
            _ip("link", "del", host.veth, check=False)
        _ip("link", "del", self.bridge, check=False)
