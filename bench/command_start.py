"""What the `davincirun` command costs when the ranks do nothing: N ranks of
/bin/true through the command, against a bash loop that starts N /bin/true
with each one's output redirected to its own file and waits for them.
Runs alternate (command, loop, command, ...), so that a change in the
machine's load reaches both; prints the median and quartiles of each and
the ratio of the medians.

Usage: python bench/command_start.py [--davincirun PATH]... [--ranks 8] [--repeat 20]
(default: the `davincirun` on PATH; several --davincirun compare commands,
e.g. an installed one and a build's). Each command runs from a copy, as pip
installs it (_common.installed_copy() says why).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import davincirun_path, installed_copy, write_table  # noqa: E402


def timed(argv, env):
    start = time.perf_counter()
    code = subprocess.call(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    if code != 0:
        sys.exit("%s exited %d" % (" ".join(argv), code))
    return elapsed


def describe(name, times):
    q1, median, q3 = statistics.quantiles(times, n=4) if len(times) > 1 else (times[0],) * 3
    print("%-60s median %6.1f ms  (quartiles %.1f-%.1f ms, %d runs)" % (name, median * 1e3, q1 * 1e3, q3 * 1e3,
                                                                         len(times)))
    return median


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--davincirun", action="append", help="a davincirun command (repeatable)")
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    commands = args.davincirun or [davincirun_path()]
    with tempfile.TemporaryDirectory() as tmp:
        table = write_table(os.path.join(tmp, "table.json"), args.ranks)
        # The jobs lock their devices here, never where real jobs do.
        env = dict(os.environ, DAVINCIRUN_LOCK_DIR=os.path.join(tmp, "locks"))
        loop_dir = os.path.join(tmp, "loop")
        os.mkdir(loop_dir)
        # Counted by bash itself, as compare.py's loop: `$(seq ...)` would start
        # two more processes and make the floor ~1 ms slower than it is.
        loop = ["bash", "-c", 'for ((i = 0; i < %d; i++)); do /bin/true > %s/$i.log 2>&1 & done; wait'
                % (args.ranks, loop_dir)]
        copies = [installed_copy(c) for c in commands]
        runs = [[c, "-r", table, "-l", os.path.join(tmp, "log"), "/bin/true"] for c in copies] + [loop]
        times = [[] for _ in runs]
        for argv in runs:  # once each, unmeasured: the page cache
            timed(argv, env)
        for _ in range(args.repeat):
            for argv, bucket in zip(runs, times):
                bucket.append(timed(argv, env))
    print("%d ranks of /bin/true, %d alternating runs, load average %s" % (args.ranks, args.repeat,
                                                                          " ".join(open("/proc/loadavg").read()
                                                                                   .split()[:3])))
    loop_median = describe("bash loop", times[-1])
    for command, bucket in zip(commands, times):
        median = describe(command, bucket)
        print("%-60s %.2f x the bash loop" % ("", median / loop_median))


if __name__ == "__main__":
    main()
