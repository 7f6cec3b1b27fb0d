"""The peers' side of many_servers.py: N nodes of one job on this machine,
one small Python worker each, under
- torchrun: N agents, each its own node (--nnodes N --nproc-per-node 1) of
  one c10d rendezvous on 127.0.0.1 (the first agent hosts its store);
- mpirun: one mpirun and an Open MPI daemon (orted) per node, --host
  node1:1,...,nodeN:1, the daemons started through an rsh agent that runs
  them on this machine (bench/fake_rsh.sh) instead of ssh to other hosts.
The last node's worker fails --fail-after seconds after every worker runs;
every other worker would sleep on.

Prints, for each launcher and N: the time from the launch until every
worker runs, the time from the failure until every other worker is gone and
until every launcher process has exited, each capped at --cap seconds
("> cap": still running then), the coordinating process's CPU per node
(torchrun: the store host agent; mpirun: mpirun) and peak memory, and the
processes still running at the cap (then ended by this script).

torchrun's agents watch their own workers only: a failed node leaves the
rendezvous, and the other nodes' workers run on until a collective of theirs
fails (a peer's closed connection, or torch.distributed's default timeout,
30 min: torch.distributed.constants.default_pg_timeout, torch 2.13). The
worker here makes no collective, like many_servers.py's: what is measured
is the launcher's own stop, against davincirun's job-wide stop.

Usage: python bench/many_servers_peers.py [--launchers torchrun,mpirun]
       [--nodes 16,32] [--fail-after 1] [--cap 60]
(torchrun beside this Python: <python dir>/torchrun; mpirun on PATH)
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import MARKER, free_port, kill_all, marked, peak_rss_kib  # noqa: E402
from many_servers import ups  # noqa: E402
from process_scan import alive  # noqa: E402 (on the path through _common)

FAKE_RSH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_rsh.sh")

WORKER = r"""
import os, sys, time
marks = sys.argv[1]
rank = int(os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "-1")))
size = int(os.environ.get("WORLD_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE", "0")))

def mark(name, text):
    with open(os.path.join(marks, ".%s.tmp" % name), "w") as f:
        f.write(text)
    os.rename(os.path.join(marks, ".%s.tmp" % name), os.path.join(marks, name))

mark("up.%d" % rank, str(os.getpid()))
if rank == size - 1:
    while len([n for n in os.listdir(marks) if n.startswith("up.")]) < size:
        time.sleep(0.01)
    time.sleep(float(sys.argv[2]))
    mark("failed", repr(time.time()))
    sys.exit(1)
time.sleep(3600)
"""


def cpu_seconds(pid):
    try:
        fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def start(launcher, program, nodes, script, marks, fail_after, env):
    """The launcher processes of one job: torchrun's N agents, or one mpirun."""
    if launcher == "torchrun":
        port = free_port()
        argv = [[program, "--nnodes", str(nodes), "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                 "--rdzv-endpoint", "127.0.0.1:%d" % port, "--rdzv-id", "bench", "--rdzv-conf",
                 "is_host=%d" % (i == 0), "--max-restarts", "0", script, marks, str(fail_after)]
                for i in range(nodes)]
    else:
        hosts = ",".join("node%d:1" % (i + 1) for i in range(nodes))
        env = dict(env, FAKE_RSH_TMP=os.path.dirname(marks))
        argv = [[program, "--allow-run-as-root", "--mca", "plm_rsh_agent", FAKE_RSH, "--host", hosts, "-np",
                 str(nodes), sys.executable, script, marks, str(fail_after)]]
    errors = open(os.path.join(marks, "..", "launcher.err"), "ab")
    with errors:
        return [subprocess.Popen(a, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors,
                                 start_new_session=True) for a in argv]


def run(launcher, program, nodes, fail_after, cap, tmp, tag, base_env=None):
    marks = os.path.join(tmp, "marks-%d" % nodes)
    os.makedirs(marks)
    script = os.path.join(tmp, "worker.py")
    with open(script, "w") as f:
        f.write(WORKER)
    env = dict(base_env or os.environ, **{MARKER: tag})
    started = time.time()
    agents = start(launcher, program, nodes, script, marks, fail_after, env)
    while ups(marks) < nodes and time.time() - started < 600 and all(a.poll() is None for a in agents):
        time.sleep(0.01)
    up = time.time() - started if ups(marks) == nodes else None
    if up is None:
        with open(os.path.join(tmp, "launcher.err"), "rb") as f:
            sys.stderr.write("%s did not start every worker; its last words:\n%s\n" % (
                launcher, f.read()[-2000:].decode(errors="replace")))
    host_cpu = None
    while up is not None and not os.path.exists(os.path.join(marks, "failed")) and time.time() - started < 900:
        host_cpu = cpu_seconds(agents[0].pid) or host_cpu
        time.sleep(0.01)
    host_hwm = peak_rss_kib(agents[0].pid)
    event_at = float(open(os.path.join(marks, "failed")).read()) if up is not None else time.time()
    workers = []
    for name in os.listdir(marks):
        if name.startswith("up.") and name != "up.%d" % (nodes - 1):
            workers.append(int(open(os.path.join(marks, name)).read()))
    gone = None
    while time.time() - event_at < cap:
        if gone is None and not any(alive(pid) for pid in workers):
            gone = time.time() - event_at
        if gone is not None and all(a.poll() is not None for a in agents):
            break
        time.sleep(0.005)
    agents_gone = time.time() - event_at if all(a.poll() is not None for a in agents) else None
    left = marked(tag)
    kill_all(left)
    for a in agents:
        try:
            a.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(a.pid, signal.SIGKILL)  # its own session, started here
            a.wait()
    return up, gone, agents_gone, host_cpu, host_hwm, len(left)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launchers", default="torchrun,mpirun")
    parser.add_argument("--nodes", default="16,32")
    parser.add_argument("--fail-after", type=float, default=1.0)
    parser.add_argument("--cap", type=float, default=60.0, help="seconds to wait for the stop")
    args = parser.parse_args()
    programs = {"torchrun": os.path.join(os.path.dirname(sys.executable), "torchrun"),
                "mpirun": shutil.which("mpirun") or "mpirun"}
    print("%9s %6s %9s %14s %16s %14s %10s %5s" % ("launcher", "nodes", "all up s", "workers gone s",
                                                  "launcher gone s", "CPU ms/node", "MiB", "left"))
    fmt = lambda v: "> %g" % args.cap if v is None else "%.3f" % v  # noqa: E731
    for launcher in args.launchers.split(","):
        if not os.access(programs[launcher], os.X_OK):
            print("%9s: not found (%s)" % (launcher, programs[launcher]))
            continue
        for n in (int(x) for x in args.nodes.split(",")):
            with tempfile.TemporaryDirectory() as tmp:
                up, gone, agents_gone, cpu, hwm, left = run(launcher, programs[launcher], n, args.fail_after,
                                                            args.cap, tmp, "peers-%d-%s-%d" % (os.getpid(),
                                                                                               launcher, n))
            print("%9s %6d %9s %14s %16s %14s %10s %5d" % (
                launcher, n, "-" if up is None else "%.2f" % up, fmt(gone), fmt(agents_gone),
                "-" if cpu is None else "%.1f" % (cpu * 1000 / n), "-" if hwm is None else "%.1f" % (hwm / 1024),
                left))
    print("workers gone / launcher gone: seconds after the failure; CPU and MiB: torchrun's store host agent, "
          "or mpirun; left: processes still running at the cap")


if __name__ == "__main__":
    main()
