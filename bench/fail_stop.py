"""Fail-fast benchmark: how long after one rank fails are all the others gone?

8 ranks start; all but one sleep; the failing rank records the wall-clock time
just before it exits with code 1. The figure is the time from that moment to
the exit of the last other rank as the launcher observed it (result.ranks[].ended),
median and worst over the repetitions. A second scenario has the sleeping
ranks ignore SIGTERM, so they are only stopped by SIGKILL after the grace
period (set here with --grace).

Usage: python bench/fail_stop.py [--ranks 8] [--repeat 10] [--grace 1.0]
"""

import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import write_table  # noqa: E402

from davincirunsdk import DistributedRuntimeError, start_and_wait_distributed_train  # noqa: E402

RANK = r"""
import os, signal, sys, time
if sys.argv[1] == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.environ["RANK_ID"] == "3":
    time.sleep(1.0)  # every rank is up by now
    with open(sys.argv[2], "w") as f:
        f.write(repr(time.time()))
    os._exit(1)
time.sleep(300)
"""


def one_run(tmp, ranks, mode, grace):
    stamp = os.path.join(tmp, "failed_at")
    try:
        start_and_wait_distributed_train(
            [sys.executable, "-c", RANK, mode, stamp], log_dir=os.path.join(tmp, "log"),
            rank_table=write_table(os.path.join(tmp, "t.json"), ranks), output_notebook=False,
            random_cache_dir=False, grace_period=grace,
        )
    except DistributedRuntimeError as e:
        with open(stamp) as f:
            failed_at = float(f.read())
        last = max(r.ended for r in e.result.ranks if r.rank != 3)
        return last - failed_at
    sys.exit("the job did not fail as planned")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--grace", type=float, default=1.0, help="grace period (s) for the SIGTERM-ignoring case")
    args = ap.parse_args()
    print("fail-fast: %d ranks, one fails, %d repetitions" % (args.ranks, args.repeat))
    modes = (("obey", "others obey SIGTERM"), ("ignore", "others ignore SIGTERM (grace %.1f s)" % args.grace))
    for mode, label in modes:
        times = []
        for _ in range(args.repeat if mode == "obey" else max(1, args.repeat // 3)):
            with tempfile.TemporaryDirectory(prefix="davincirun-bench-") as tmp:
                times.append(one_run(tmp, args.ranks, mode, args.grace))
        print("  %-40s median %7.1f ms   worst %7.1f ms" % (label, statistics.median(times) * 1000, max(times) * 1000))


if __name__ == "__main__":
    main()
