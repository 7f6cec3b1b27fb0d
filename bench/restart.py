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

Usage: python bench/restart.py [--ranks 8] [--repeat 5]
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
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


def one_run(name, argv, out):
    for path in glob.glob(os.path.join(out, "up.*")) + glob.glob(os.path.join(out, "failed")):
        os.unlink(path)
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300)
    if proc.returncode != 0:
        sys.exit("%s failed (exit %d):\n%s" % (name, proc.returncode, proc.stderr[-2000:]))
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
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as out:
        script = os.path.join(out, "rank.py")
        with open(script, "w") as f:
            f.write(RANK)
        runs = launchers(args.ranks, script, out)
        if shutil.which("torchrun") is None:
            del runs["torchrun --max-restarts 1"]
        times = {name: [] for name in runs}
        for _ in range(args.repeat):
            for name, argv in runs.items():  # interleaved: a slow moment of the machine hits every launcher
                times[name].append(one_run(name, argv, out))
                time.sleep(0.2)
    print("restart: %d ranks, rank 1 fails once; failure -> every rank of the second attempt running, "
          "%d runs each" % (args.ranks, args.repeat))
    print("| launcher | median | range |")
    print("| --- | --- | --- |")
    for name, values in times.items():
        print("| %s | %.3f s | %.3f-%.3f s |" % (name, statistics.median(values), min(values), max(values)))


if __name__ == "__main__":
    main()
