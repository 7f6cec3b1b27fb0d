"""What a VM's free page reporting costs a flood of output.

Linux's free page reporting (mm/page_reporting.c, turned on by a balloon
driver) hands free pages back to the host in passes at most every 2 s; a
page handed back costs the host's fault when the guest uses it again. This
fills and frees 768 MB of page cache, then runs the log relay's fast flood
(8 ranks, 256 MiB in 8 KiB writes) through `| cat` and through davincirun
with its console to /dev/null, either at once (the flood reuses the pages
just freed) or after --wait seconds (they have been handed back), and
prints the median wall and CPU of each, with the MiB reported meanwhile
(/sys/module/page_reporting/parameters/reported_kib).

Usage: PATH=build/dev/cpp:$PATH python bench/page_reporting.py [--repeat 5] [--wait 4]
"""

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import log_relay  # noqa: E402


def fill_and_free(directory, wait):
    """Writes and removes 768 MB, waits `wait` s; returns the MiB reported meanwhile."""
    path = os.path.join(directory, "churn")
    with open(path, "wb") as f:
        for _ in range(96):
            f.write(b"\1" * (8 << 20))
    os.sync()
    os.unlink(path)
    os.sync()
    before = log_relay.reported_kib() or 0
    time.sleep(wait)
    return ((log_relay.reported_kib() or 0) - before) // 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--wait", type=float, default=4.0, help="seconds between the free and the flood")
    args = ap.parse_args()
    if log_relay.reported_kib() is None:
        sys.exit("this kernel does not report free pages (no %s)" % log_relay.REPORTED_KIB)
    per_rank = 256 * (1 << 20) // 8 // 100 * 100
    log_relay.settle = lambda: None  # each run's memory is prepared here
    results = {}
    for _ in range(args.repeat):
        for wait in (0.0, args.wait):
            for mode in ("cat", "cli-null"):
                with tempfile.TemporaryDirectory(prefix="davincirun-bench-") as tmp:
                    reported = fill_and_free(tmp, wait)
                    before = resource.getrusage(resource.RUSAGE_CHILDREN)
                    if mode == "cat":
                        wall = log_relay.run_bare(tmp, 8, per_rank, 82, "cat")[0]
                    else:
                        wall = log_relay.run_cli(tmp, 8, per_rank, 82, os.devnull, mode)[0]
                    after = resource.getrusage(resource.RUSAGE_CHILDREN)
                    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                    results.setdefault((mode, wait), []).append((wall, cpu, reported))
    print("fast flood after 768 MB freed; medians of %d runs" % args.repeat)
    print("%-9s %8s %8s %8s %s" % ("mode", "wait s", "wall s", "CPU s", "MiB reported during the wait"))
    for (mode, wait), runs in sorted(results.items()):
        print("%-9s %8.1f %8.3f %8.2f %s" % (mode, wait, statistics.median(r[0] for r in runs),
                                            statistics.median(r[1] for r in runs), [r[2] for r in runs]))


if __name__ == "__main__":
    main()
