"""Running one launcher invocation for bench/compare.py and measuring it:
wall time, the CPU and peak memory of the launcher's side of the process
tree, the processes it leaves, the machine's load.

How the launcher side's CPU is measured: this process makes itself a child
subreaper (prctl PR_SET_CHILD_SUBREAPER), so every process of a job ends up
waited for by its parent or by this process, and its CPU time lands in this
process's RUSAGE_CHILDREN. Around one run, the growth of RUSAGE_CHILDREN is
the CPU of the whole tree (launcher, its helpers, the ranks); the ranks each
record their own CPU (os.times()) just before they leave, the console reader
(a `cat` this script starts) is measured by wait4(); the launcher side is
what is left. Its peak memory is sampled every 50 ms: the sum of VmHWM of
the processes below this one that are neither ranks nor the console reader
(nor forks that have not exec'd yet, which hold their parent's pages).
"""

import ctypes
import os
import re
import resource
import selectors
import signal
import socket
import subprocess
import threading
import time

from _common import MARKER, kill_all, marked

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def reap():
    """Waits for every child that has ended (orphans of a job re-parented to
    this subreaper included). Call only when no Popen of ours is running."""
    for _ in range(100):
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.001)  # an orphan may still be on its way to us


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def machine_busy(seconds=1.0):
    """(load average over 1 min, share of all CPUs busy over `seconds` while
    this script waits), from /proc/stat."""

    def sample():
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        return sum(fields), fields[3] + fields[4]  # idle + iowait

    total0, idle0 = sample()
    time.sleep(seconds)
    total1, idle1 = sample()
    busy = 1.0 - (idle1 - idle0) / max(1, total1 - total0)
    return os.getloadavg()[0], busy


class Waiter:
    """Records the moment a process ends: a thread blocked in waitpid()
    (Popen.wait with a timeout polls, up to 50 ms late)."""

    def __init__(self, proc):
        self.proc, self.ended, self.done = proc, None, threading.Event()
        threading.Thread(target=self._wait, daemon=True).start()

    def _wait(self):
        self.proc.wait()
        self.ended = time.monotonic()
        self.done.set()

    def wait(self, timeout):
        return self.done.wait(timeout)


def descendants():
    """{pid: ppid} of every process below this one."""
    parent = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name, "rb") as f:
                    parent[int(name)] = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    below, frontier = {}, [os.getpid()]
    children = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    while frontier:
        pid = frontier.pop()
        for child in children.get(pid, ()):
            below[child] = pid
            frontier.append(child)
    return below


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


class RssSampler:
    """Peak of the summed VmHWM of the launcher-side processes below this
    one: not the ranks (their argv[1] is the rank program `rank_needle`; a
    launcher's argv holds it further on), nor the processes in `exclude`."""

    def __init__(self, rank_needle, exclude=(), interval=0.05):
        self.needle, self.exclude, self.interval = rank_needle.encode(), set(exclude), interval
        self.peak_kib, self.stopped = 0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopped.is_set():
            total = 0
            below = descendants()
            for pid, ppid in below.items():
                cmdline = _read("/proc/%d/cmdline" % pid)
                if pid in self.exclude or cmdline.split(b"\0")[1:2] == [self.needle]:
                    continue
                # A fork that has not exec'd yet (a launcher starting a rank)
                # holds its parent's pages: counting them twice would be wrong.
                # A fork that renamed itself runs on its own (davincirun's
                # supervisor, a copy of the command): counted, shared pages and all.
                if (ppid in below and cmdline == _read("/proc/%d/cmdline" % ppid)
                        and _read("/proc/%d/comm" % pid) == _read("/proc/%d/comm" % ppid)):
                    continue
                m = re.search(rb"VmHWM:\s+(\d+)", _read("/proc/%d/status" % pid))
                total += int(m.group(1)) if m else 0
            self.peak_kib = max(self.peak_kib, total)
            self.stopped.wait(self.interval)

    def stop(self):
        self.stopped.set()
        self.thread.join()
        return self.peak_kib


def finish_job(tag, linger):
    """After the launcher returned: waits up to `linger` s for the job's
    other processes to end, then SIGKILLs what is left; reaps. Returns
    (seconds until none was left or None, processes killed)."""
    start = time.monotonic()
    while time.monotonic() - start < linger:
        if not marked(tag):
            gone = time.monotonic() - start
            reap()
            return gone, 0
        time.sleep(0.01)
    left = marked(tag)
    kill_all(left)
    deadline = time.monotonic() + 5
    while marked(tag) and time.monotonic() < deadline:
        time.sleep(0.01)
    reap()
    return None, len(left)


def start(argv, env, cwd, tag, stdout, stderr):
    """Starts a launcher in its own process group (so that a timeout can stop
    what it started) with MARKER=tag in its environment."""
    return subprocess.Popen(argv, env=dict(env, **{MARKER: tag}), cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=stdout, stderr=stderr, start_new_session=True)


def stop(proc, tag):
    """A run over its time: the launcher and every process of the job die."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    kill_all(marked(tag))


def kill_session(session):
    """SIGKILL to every process whose MARKER starts with `session` (all the
    runs of this benchmark: on Ctrl-C or an error, nothing is left)."""
    needle = ("%s=%s" % (MARKER, session)).encode()
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            if any(v.startswith(needle) for v in _read("/proc/%s/environ" % name).split(b"\0")):
                pids.append(int(name))
    kill_all(pids)
    return pids


def stderr_reason(path, rc):
    """A short reason for a failed run, from the end of the launcher's stderr."""
    text = _read(path).decode("utf-8", "replace")
    for known in ("Too many open files", "Resource temporarily unavailable", "Cannot allocate memory"):
        if known in text:
            return "failed: " + known
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return "failed (exit %s): %s" % (rc, lines[-1][:60] if lines else "no message")


class Tracker:
    """A Unix socket the fail-fast ranks and their children connect to (see
    compare_ranks.FAIL): each connection says `kind rank pid`, and its end
    is the moment that process ended (the kernel closes a process's files as
    it exits, before its parent hears of it)."""

    def __init__(self, path):
        self.path = path
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.server.listen(4096)
        self.server.setblocking(False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.server, selectors.EVENT_READ)
        self.wake_r, self.wake_w = socket.socketpair()
        self.selector.register(self.wake_r, selectors.EVENT_READ)
        self.members, self.lock, self.running = {}, threading.Lock(), True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while self.running:
            for key, _ in self.selector.select():
                now = time.monotonic()
                sock = key.fileobj
                if sock is self.wake_r:
                    continue
                if sock is self.server:
                    try:
                        conn, _ = self.server.accept()
                    except BlockingIOError:
                        continue
                    self.selector.register(conn, selectors.EVENT_READ)
                    with self.lock:
                        self.members[conn] = {"buf": b"", "up": now, "gone": None, "kind": None}
                    continue
                try:
                    data = sock.recv(4096)
                except OSError:
                    data = b""
                with self.lock:
                    member = self.members[sock]
                    if data:
                        member["buf"] += data
                        if member["kind"] is None and b"\n" in member["buf"]:
                            kind, rank, pid = member["buf"].split(b"\n")[0].split()
                            member.update(kind=kind.decode(), rank=int(rank), pid=int(pid))
                        continue
                    member["gone"] = now
                self.selector.unregister(sock)

    def snapshot(self):
        with self.lock:
            return [dict(m) for m in self.members.values() if m["kind"]]

    def count(self, kind):
        return sum(1 for m in self.snapshot() if m["kind"] == kind)

    def go(self, rank):
        with self.lock:
            for conn, m in self.members.items():
                if m["kind"] == "rank" and m["rank"] == rank:
                    conn.send(b"x")
                    return True
        return False

    def close(self):
        self.running = False
        self.wake_w.send(b"x")
        self.thread.join()
        for conn in list(self.members):
            conn.close()
        self.server.close()
        self.wake_r.close()
        self.wake_w.close()
        os.unlink(self.path)
