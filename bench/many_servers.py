"""Many servers of one job on this machine: N `davincirun` processes, each
its own server of an N-server table (server_id 127.0.x.y: the whole 127/8
is loopback), one rank each, joined by the peer channel.

--mode fail (default): the last server's rank fails --fail-after seconds
after every rank runs; every other rank would sleep on. Prints, for each N:
the time from the first launch until every server's rank runs, the time
from the failure until every rank is gone (the job-wide stop) and until
every server's `davincirun` has exited (after the job record went to rank
0's server and back), the hub's supervisor CPU time per member (until the
failure), its peak memory (VmHWM), what it read and wrote while the job
idled (--idle seconds with every rank up: the heartbeats, /proc/<pid>/io's
rchar + wchar) and its CPU then, and the processes left behind (none
expected).

--mode lose: no rank fails; --idle seconds after every rank runs, the last
server's supervisor is frozen (SIGSTOP: its agent goes silent, its socket
stays open, as a hung host's would), and the time until every other
server's rank is gone is measured against --peer-timeout (the hub must
find the server lost within it).

Usage: python bench/many_servers.py [--servers 16,64,256] [--mode fail|lose]
       [--fail-after 5] [--idle 10] [--peer-timeout 30] [--rank python|sh]
(the `davincirun` on PATH; DAVINCIRUN=<path> for another)
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import davincirun_path  # noqa: E402
from process_scan import alive  # noqa: E402 (on the path through _common)

RANK = r"""
import os, sys, time
marks = sys.argv[1]
rank = int(os.environ["RANK_ID"])

def mark(name, text):
    # Written whole, then renamed: a reader never sees an empty mark.
    with open(os.path.join(marks, ".%s.tmp" % name), "w") as f:
        f.write(text)
    os.rename(os.path.join(marks, ".%s.tmp" % name), os.path.join(marks, name))

mark("up.%d" % rank, str(os.getpid()))
if rank == int(os.environ["RANK_SIZE"]) - 1 and float(sys.argv[2]) >= 0:
    # Every rank up first, so that the failure always stops a running job.
    while len([n for n in os.listdir(marks) if n.startswith("up.")]) < int(os.environ["RANK_SIZE"]):
        time.sleep(0.01)
    time.sleep(float(sys.argv[2]))
    mark("failed", repr(time.time()))
    sys.exit(1)
time.sleep(3600)
"""

# The same rank in POSIX sh (--rank sh): about 1 MB a rank instead of
# Python's 9, so that 1,024 servers' launchers, supervisors and ranks fit
# in memory on one machine.
RANK_SH = r"""marks=$1
mark() { printf %s "$2" > "$marks/.$1.tmp" && mv "$marks/.$1.tmp" "$marks/$1"; }
mark "up.$RANK_ID" "$$"
if [ "$RANK_ID" -eq $((RANK_SIZE - 1)) ] && [ "${2#-}" = "$2" ]; then
  while [ "$(ls "$marks" | grep -c '^up\.')" -lt "$RANK_SIZE" ]; do sleep 0.01; done
  sleep "$2"
  mark failed "$(date +%s.%N)"
  exit 1
fi
exec sleep 3600
"""


def server_id(index):
    return "127.0.%d.%d" % ((index + 1) >> 8, (index + 1) & 255)


def write_table(path, servers):
    server_list = [{"server_id": server_id(i), "device": [{"device_id": "0", "device_ip": "192.168.%d.%d" % (
        i >> 8, i & 255), "rank_id": str(i)}]} for i in range(servers)]
    table = {"version": "1.0", "server_count": str(servers), "status": "completed", "server_list": server_list}
    with open(path, "w") as f:
        json.dump(table, f)


def supervisor_pid(launcher_pid):
    children = open("/proc/%d/task/%d/children" % (launcher_pid, launcher_pid)).read().split()
    return int(children[0])


def supervisor_stats(launcher_pid):
    """(CPU seconds, VmHWM KiB, rchar + wchar bytes) of the supervisor under a launcher, or None."""
    try:
        pid = supervisor_pid(launcher_pid)
        fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        cpu = (int(fields[11]) + int(fields[12])) / ticks
        hwm = next(int(line.split()[1]) for line in open("/proc/%d/status" % pid) if line.startswith("VmHWM"))
        io = {k: int(v) for k, v in (line.split(": ") for line in open("/proc/%d/io" % pid))}
        return cpu, hwm, io["rchar"] + io["wchar"]
    except (OSError, IndexError, StopIteration, ValueError, KeyError):
        return None


def ups(marks):
    return len([n for n in os.listdir(marks) if n.startswith("up.")])


def run(servers, mode, fail_after, idle, peer_timeout, tmp, rank="python", davincirun=None):
    marks = os.path.join(tmp, "marks-%d" % servers)
    os.makedirs(marks)
    table = os.path.join(tmp, "table-%d.json" % servers)
    write_table(table, servers)
    script = os.path.join(tmp, "rank.py" if rank == "python" else "rank.sh")
    with open(script, "w") as f:
        f.write(RANK if rank == "python" else RANK_SH)
    program = [sys.executable] if rank == "python" else ["/bin/sh"]
    env = dict(os.environ)
    rank_fails_after = idle + fail_after if mode == "fail" else -1
    started = time.time()
    procs = []
    for i in range(servers):
        argv = [davincirun or davincirun_path(), "-r", table, "--server-id", server_id(i), "-l",
                os.path.join(tmp, "log-%d" % i), "--peer-timeout", "%g" % peer_timeout, "--"] + program + [
                    script, marks, str(rank_fails_after)]
        procs.append(subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
    out = {"up": None, "idle_io": None, "idle_cpu": None, "hub": None, "frozen": None}
    while ups(marks) < servers and time.time() - started < 300:
        time.sleep(0.01)
    out["up"] = time.time() - started if ups(marks) == servers else None
    before = supervisor_stats(procs[0].pid)
    idle_start = time.time()
    time.sleep(idle)
    after = supervisor_stats(procs[0].pid)
    if before and after:
        span = time.time() - idle_start
        out["idle_io"] = (after[2] - before[2]) / span
        out["idle_cpu"] = (after[0] - before[0]) / span
    pids = []
    for name in os.listdir(marks):
        if name.startswith("up."):
            with open(os.path.join(marks, name)) as f:
                pids.append((name, int(f.read())))
    if mode == "fail":
        while not os.path.exists(os.path.join(marks, "failed")) and time.time() - started < 600:
            out["hub"] = supervisor_stats(procs[0].pid) or out["hub"]
            time.sleep(0.01)
        with open(os.path.join(marks, "failed")) as f:
            event_at = float(f.read())
        watched = [pid for _, pid in pids]
    else:
        out["hub"] = supervisor_stats(procs[0].pid)
        frozen = supervisor_pid(procs[-1].pid)
        os.kill(frozen, signal.SIGSTOP)
        event_at = time.time()
        last = "up.%d" % (servers - 1)
        watched = [pid for name, pid in pids if name != last]
    while any(alive(pid) for pid in watched) and time.time() - event_at < peer_timeout + 120:
        time.sleep(0.005)
    ranks_gone = time.time()
    if mode == "lose":
        os.kill(frozen, signal.SIGCONT)  # it finds the job gone and ends
    for p in procs:
        try:
            p.wait(timeout=peer_timeout + 120)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    ended = time.time()
    codes = sorted({p.returncode for p in procs})
    left = sum(alive(pid) for _, pid in pids)
    return out, ranks_gone - event_at, ended - event_at, codes, left


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default="16,64,256")
    parser.add_argument("--mode", choices=("fail", "lose"), default="fail")
    parser.add_argument("--fail-after", type=float, default=1.0, help="seconds after the idle span")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds every rank runs before the event")
    parser.add_argument("--peer-timeout", type=float, default=30.0)
    parser.add_argument("--rank", choices=("python", "sh"), default="python",
                        help="the ranks' program: Python, or POSIX sh (lighter, for 1,024 servers)")
    args = parser.parse_args()
    event = "failure" if args.mode == "fail" else "freeze"
    print("mode %s, peer timeout %g s, idle %g s" % (args.mode, args.peer_timeout, args.idle))
    print("%8s %9s %14s %16s %13s %9s %15s %13s %5s  %s" % (
        "servers", "all up s", "ranks gone s", "launchers gone s", "hub CPU ms/mb", "hub MiB", "idle hub B/s",
        "idle hub CPU", "left", "exit codes"))
    for n in (int(x) for x in args.servers.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            out, gone, stop, codes, left = run(n, args.mode, args.fail_after, args.idle, args.peer_timeout, tmp,
                                               args.rank)
            cpu, hwm, _ = out["hub"] if out["hub"] else (float("nan"),) * 3
            up = "%.2f" % out["up"] if out["up"] is not None else "-"
            io = "%.0f" % out["idle_io"] if out["idle_io"] is not None else "-"
            idle_cpu = "%.2f %%" % (out["idle_cpu"] * 100) if out["idle_cpu"] is not None else "-"
            print("%8d %9s %14.3f %16.3f %13.2f %9.1f %15s %13s %5d  %s" % (
                n, up, gone, stop, cpu * 1000 / n, hwm / 1024, io, idle_cpu, left, codes))
    print("ranks gone / launchers gone: seconds after the %s (lose: the frozen server's own rank aside)" % event)


if __name__ == "__main__":
    main()
