"""Randomized fault injection at scale: by default 1000 random jobs of 8-64
ranks on one server or split across two or three (127.0.0.1-3, this
machine's loopback, one `davincirun --server-id` each), each with random
rank behaviours (exit, fail, crash, hang, ignore SIGTERM, flood, close
stdout, leave a setsid() daemon) and a random ending on one of its servers
(success, a rank failure, SIGINT, terminate, the job timeout, SIGKILL of the
caller), some sent while that server is held in a state of the life cycle
(starting, killing, draining, waiting_for_servers), through the Python API
or the `davincirun` command. Prints the counts; exits 1 if any rep left a
survivor or a locked device, lost a byte, misreported its end on any server
or crashed a caller. The logic is tests/fault/fault_driver.py.

    python bench/fault_run.py [--reps 1000] [--seed S] [--max-ranks 64] [--jobs 1]

`davincirun` must be on PATH and davincirunsdk importable (pip install .).
A failed rep prints its seed: `--seed S --reps 1` replays it.
"""

import argparse
import os
import random
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "fault"))

import fault_driver  # noqa: E402


def _package_dir():
    try:
        import davincirunsdk
    except ImportError as e:
        return "not importable (%s)" % e
    return os.path.dirname(davincirunsdk.__file__)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=None, help="seed of the first rep (default: random)")
    parser.add_argument("--max-ranks", type=int, default=64)
    parser.add_argument("--jobs", type=int, default=1, help="reps run at once (default 1: the machine has 2 cores)")
    args = parser.parse_args()
    if args.reps < 1 or args.jobs < 1 or not 8 <= args.max_ranks <= 4096:
        parser.error("--reps and --jobs must be positive, --max-ranks between 8 and 4096")
    if not shutil.which("davincirun"):
        sys.exit("davincirun is not on PATH: run `pip install .` first")
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    print("fault run: %d reps from seed %d, 8-%d ranks, %d at once" % (args.reps, seed, args.max_ranks, args.jobs),
          flush=True)
    # A pyenv shim runs Python with its own bin directory first in PATH,
    # where an installed wheel's davincirun can hide the one meant.
    print("davincirun: %s; davincirunsdk: %s" % (shutil.which("davincirun"), _package_dir()), flush=True)

    def progress(r, totals):
        if r.failures:
            print(fault_driver.describe_failure(r), flush=True)
        if totals.reps % 50 == 0:
            print("... %d reps, %d failed" % (totals.reps, len(totals.failed)), flush=True)

    totals, wall = fault_driver.run_many(args.reps, seed, args.max_ranks, args.jobs, progress)
    print(totals.text(wall))
    return 1 if totals.failed else 0


if __name__ == "__main__":
    sys.exit(main())
