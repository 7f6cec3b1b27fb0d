"""Restart benchmark: how long after one rank fails is the whole job running
again, in place? davincirun --max-restarts against torchrun --max-restarts
(torch.distributed.elastic: the agent stops its workers, runs a new
rendezvous round and starts them again; msrun, mpirun and davincirunsdk
0.1.x do not restart).

N ranks of the same Python script; in the first attempt rank 1 records the
wall-clock time and exits 1 once every rank is up; in the second attempt
each rank records the time its script began. The figure is the time from the
failure to the last rank of the second attempt beginning: stopping the
others, the launcher's own work, the restart delay (davincirun: 1 s by
default, also measured with --restart-delay 0; torchrun has no delay of its
own) and Python's start. Median and range of --repeat runs, interleaved.

With --hosts 2 the ranks are split over two test hosts in network
namespaces (tests/python/support/netns_support.py; needs root): one
davincirun per host (rank 1 on the first), and torchrun with a c10d
rendezvous on the first host, one per host.

Usage: python bench/restart.py [--ranks 8] [--repeat 5] [--hosts 1|2]
"""

import argparse
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "tests", "python", "support")]
from _common import davincirun_path  # noqa: E402

# Restart count: davincirun sets both names, torchrun the torch one.
RANK = r"""
import os, sys, time
began = time.time()
out = sys.argv[1]
rank = os.environ["RANK"]
count = os.environ["TORCHELASTIC_RESTART_COUNT"]
open(os.path.join(out, "up.%s.%s" % (count, rank)), "w").write(repr(began))
if count == "0":
    if rank == "1":
        while len([n for n in os.listdir(out) if n.startswith("up.0.")]) < int(os.environ["WORLD_SIZE"]):
            time.sleep(0.01)
        time.sleep(0.2)
        open(os.path.join(out, "failed"), "w").write(repr(time.time()))
        sys.exit(1)
    time.sleep(300)
"""


# Across hosts, a run not over this many seconds after its start is shown as "> CAP s".
CAP = 60


def launchers(ranks, script, out):
    python = sys.executable
    return {
        "davincirun --max-restarts 1": [davincirun_path(), "--nproc", str(ranks), "-l", os.path.join(out, "log"),
                                        "--max-restarts", "1", python, script, out],
        "davincirun --max-restarts 1 --restart-delay 0": [
            davincirun_path(), "--nproc", str(ranks), "-l", os.path.join(out, "log"), "--max-restarts", "1",
            "--restart-delay", "0", python, script, out],
        "torchrun --max-restarts 1": [shutil.which("torchrun") or "torchrun", "--standalone", "--nproc-per-node",
                                      str(ranks), "--max-restarts", "1", script, out],
    }


def host_launchers(hosts, ranks, script, out, table):
    """Per launcher, the argv of each host (netns hosts, ranks split evenly)."""
    python = sys.executable
    per = ranks // len(hosts)
    torchrun = shutil.which("torchrun") or "torchrun"
    runs = {}
    for name, delay in (("davincirun --max-restarts 1", ()), ("davincirun --max-restarts 1 --restart-delay 0",
                                                                 ("--restart-delay", "0"))):
        runs[name] = [[davincirun_path(), "-r", table, "-l", os.path.join(out, "log", h.name), "--max-restarts", "1",
                       *delay, python, script, out] for h in hosts]
    runs["torchrun --max-restarts 1"] = [
        [torchrun, "--nnodes", str(len(hosts)), "--nproc-per-node", str(per), "--node-rank", str(i),
         "--rdzv-backend", "c10d", "--rdzv-endpoint", "%s:29400" % hosts[0].address, "--rdzv-id", "bench",
         "--local-addr", h.address, "--max-restarts", "1", script, out] for i, h in enumerate(hosts)]
    return runs


def clear(out):
    for path in glob.glob(os.path.join(out, "up.*")) + glob.glob(os.path.join(out, "failed")):
        os.unlink(path)


def one_run(name, argv, out, hosts=None):
    clear(out)
    if hosts is None:
        proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300)
        codes, errs = [proc.returncode], [proc.stderr]
    else:
        procs = [h.popen(a) for h, a in zip(hosts, argv)]
        try:
            done = [p.communicate(timeout=CAP) for p in procs]
        except subprocess.TimeoutExpired:
            for h in hosts:
                h.kill_all()
            return None  # not running again within the cap: shown as such
        codes, errs = [p.returncode for p in procs], [e.decode(errors="replace") for _, e in done]
    if any(codes):
        sys.exit("%s failed (exit %s):\n%s" % (name, codes, "\n".join(e[-2000:] for e in errs)))
    with open(os.path.join(out, "failed")) as f:
        failed = float(f.read())
    ups = []
    for path in glob.glob(os.path.join(out, "up.1.*")):
        with open(path) as f:
            ups.append(float(f.read()))
    return max(ups) - failed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--hosts", type=int, choices=(1, 2), default=1)
    args = ap.parse_args()
    network = None
    with tempfile.TemporaryDirectory() as out:
        script = os.path.join(out, "rank.py")
        with open(script, "w") as f:
            f.write(RANK)
        os.chmod(out, 0o755)
        if args.hosts == 1:
            runs, hosts = launchers(args.ranks, script, out), None
        else:
            from netns_support import Network

            network = Network(args.hosts, os.path.join(out, "hosts"))
            hosts = network.hosts[:args.hosts]
            table = network.rank_table(os.path.join(out, "table.json"), hosts, devices=args.ranks // args.hosts)
            runs = host_launchers(hosts, args.ranks, script, out, table)
        if shutil.which("torchrun") is None:
            del runs["torchrun --max-restarts 1"]
        times = {name: [] for name in runs}
        try:
            for _ in range(args.repeat):
                for name, argv in runs.items():  # interleaved: a slow moment of the machine hits every launcher
                    times[name].append(one_run(name, argv, out, hosts))
                    time.sleep(0.2)
        finally:
            if network is not None:
                network.close()
    where = "one machine" if args.hosts == 1 else "%d hosts (network namespaces)" % args.hosts
    print("restart: %d ranks on %s, rank 1 fails once; failure -> every rank of the second attempt running, "
          "%d runs each" % (args.ranks, where, args.repeat))
    print("| launcher | median | range |")
    print("| --- | --- | --- |")
    for name, values in times.items():
        done = [v for v in values if v is not None]
        if len(done) < len(values):
            print("| %s | > %d s in %d of %d runs (not running again) | %s |" % (
                name, CAP, len(values) - len(done), len(values), " ".join("%.3f s" % v for v in done) or "-"))
        else:
            print("| %s | %.3f s | %.3f-%.3f s |" % (name, statistics.median(values), min(values), max(values)))


if __name__ == "__main__":
    main()
