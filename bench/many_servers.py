"""Many servers of one job on this machine: N `davincirun` processes, each
its own server of an N-server table (server_id 127.0.x.y: the whole 127/8
is loopback), one rank each, joined by the peer channel. The last server's
rank fails after --fail-after seconds; every other rank would sleep on.

Prints, for each N: the time from the first launch until every server's
rank runs, the time from the failure until every rank is gone (the
job-wide stop) and until every server's `davincirun` has exited (after
the job record went to rank 0's server and back), the hub's supervisor CPU time per member
(until the failure) and its peak memory (VmHWM), and the processes left behind (none expected).

Usage: python bench/many_servers.py [--servers 16,64,256] [--fail-after 5]
(the `davincirun` on PATH; DAVINCIRUN=<path> for another)
"""

import argparse
import json
import os
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
if rank == int(os.environ["RANK_SIZE"]) - 1:
    time.sleep(float(sys.argv[2]))
    mark("failed", repr(time.time()))
    sys.exit(1)
time.sleep(600)
"""


def server_id(index):
    return "127.0.%d.%d" % ((index + 1) >> 8, (index + 1) & 255)


def write_table(path, servers):
    server_list = [{"server_id": server_id(i), "device": [{"device_id": "0", "device_ip": "192.168.%d.%d" % (
        i >> 8, i & 255), "rank_id": str(i)}]} for i in range(servers)]
    table = {"version": "1.0", "server_count": str(servers), "status": "completed", "server_list": server_list}
    with open(path, "w") as f:
        json.dump(table, f)


def supervisor_stats(launcher_pid):
    """(CPU seconds, VmHWM KiB) of the supervisor under a launcher, or None."""
    try:
        children = open("/proc/%d/task/%d/children" % (launcher_pid, launcher_pid)).read().split()
        pid = int(children[0])
        fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        cpu = (int(fields[11]) + int(fields[12])) / ticks
        hwm = next(int(line.split()[1]) for line in open("/proc/%d/status" % pid) if line.startswith("VmHWM"))
        return cpu, hwm
    except (OSError, IndexError, StopIteration, ValueError):
        return None


def run(servers, fail_after, tmp):
    marks = os.path.join(tmp, "marks-%d" % servers)
    os.makedirs(marks)
    table = os.path.join(tmp, "table-%d.json" % servers)
    write_table(table, servers)
    script = os.path.join(tmp, "rank.py")
    with open(script, "w") as f:
        f.write(RANK)
    env = dict(os.environ)
    started = time.time()
    procs = []
    for i in range(servers):
        argv = [davincirun_path(), "-r", table, "--server-id", server_id(i), "-l", os.path.join(tmp, "log-%d" % i),
                "--", sys.executable, script, marks, str(fail_after)]
        procs.append(subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
    all_up = None
    hub = None
    while not os.path.exists(os.path.join(marks, "failed")):
        if all_up is None and len([n for n in os.listdir(marks) if n.startswith("up.")]) == servers:
            all_up = time.time() - started
        hub = supervisor_stats(procs[0].pid) or hub
        if time.time() - started > 300:
            break
        time.sleep(0.01)
    hub = supervisor_stats(procs[0].pid) or hub
    pids = []
    for name in os.listdir(marks):
        if name.startswith("up."):
            with open(os.path.join(marks, name)) as f:
                pids.append(int(f.read()))
    while any(alive(pid) for pid in pids) and time.time() - started < 400:
        time.sleep(0.005)
    ranks_gone = time.time()
    for p in procs:
        p.wait(timeout=120)
    ended = time.time()
    with open(os.path.join(marks, "failed")) as f:
        failed_at = float(f.read())
    codes = sorted({p.returncode for p in procs})
    left = sum(alive(pid) for pid in pids)
    return all_up, ranks_gone - failed_at, ended - failed_at, hub, codes, left


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default="16,64,256")
    parser.add_argument("--fail-after", type=float, default=5.0)
    args = parser.parse_args()
    print("%8s %10s %14s %16s %18s %13s %5s  %s" % ("servers", "all up s", "ranks gone s", "launchers gone s",
                                                     "hub CPU ms/member", "hub peak MiB", "left", "exit codes"))
    for n in (int(x) for x in args.servers.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            up, gone, stop, hub, codes, left = run(n, args.fail_after, tmp)
            cpu, hwm = hub if hub else (float("nan"), float("nan"))
            print("%8d %10s %14.3f %16.3f %18.2f %13.1f %5d  %s" % (
                n, "%.2f" % up if up is not None else "-", gone, stop, cpu * 1000 / n, hwm / 1024, left, codes))


if __name__ == "__main__":
    main()
