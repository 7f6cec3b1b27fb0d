"""How fast every state of a job answers a stop (docs/architecture.md, "The
life cycle"): for each state a job can wait in, and each way to stop it
(SIGINT, SIGTERM, SIGKILL of `davincirun`), the time from the signal until
no process of the job is left and its devices are free for the next job.
Two ranks of a small Python program that obeys SIGTERM, on this machine.

    python3 bench/lifecycle_stops.py [--repeat 5]

States held for the measure with DAVINCIRUN_TEST_HOLD where they are too
short to reach otherwise; `waiting_for_servers` is a real wait: server 2
of a two-server table whose rank 0's server never comes. Prints the median
and the range in milliseconds."""

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(os.path.dirname(HERE), "tests", "python", "support"),
                os.path.join(os.path.dirname(HERE), "tests", "fault")]

from lifecycle_support import Scenario  # noqa: E402

STATES = ("waiting_for_table", "planning", "starting", "running", "draining", "waiting_for_servers")
SIGNALS = (("SIGINT", signal.SIGINT), ("SIGTERM", signal.SIGTERM), ("SIGKILL", signal.SIGKILL))


def reach(state, directory):
    """A scenario with its davincirun in `state`."""
    if state == "waiting_for_servers":
        s = Scenario(directory, ("127.0.0.1", "127.0.0.2"))
        launch = s.start("exit", "--wait-timeout", "60", server=1, seconds=0.1)
        ok = launch.wait_for_state(state)
        return s, launch, 1, ok
    s = Scenario(directory, devices=2)
    if state == "waiting_for_table":
        launch = s.start("exit", table=s.table + ".never", seconds=0.1)
        time.sleep(0.5)
        return s, launch, 0, launch.proc.poll() is None
    if state in ("planning", "starting"):
        launch = s.start("working", hold="%s:30000" % state)
        return s, launch, 0, launch.wait_for("holding the job in " + state)
    if state == "running":
        launch = s.start("working")
        ok = launch.wait_for_state("running") and launch.wait_for(" up")
        return s, launch, 0, ok
    launch = s.start("exit", seconds=0.1, hold="draining:30000")
    return s, launch, 0, launch.wait_for_state("draining")


def measure(state, signo, directory):
    s, launch, server, ok = reach(state, directory)
    try:
        if not ok:
            raise RuntimeError("could not reach %s: %s" % (state, launch.text()[-500:]))
        sent = time.monotonic()
        launch.signal(signo)
        launch.wait(timeout=30)
        while s.left() and time.monotonic() - sent < 30:
            time.sleep(0.001)
        gone = time.monotonic() - sent
        if not s.devices_free(server):
            raise RuntimeError("devices still held after %s in %s" % (signo, state))
        return gone * 1000
    finally:
        s.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="lifecycle-stops-")
    print("%-20s %s" % ("state", "".join("%-24s" % name for name, _ in SIGNALS)))
    n = 0
    for state in STATES:
        cells = []
        for _, signo in SIGNALS:
            times = []
            for _ in range(args.repeat):
                n += 1
                times.append(measure(state, signo, os.path.join(root, str(n))))
            cells.append("%6.1f (%5.1f-%6.1f) ms" % (statistics.median(times), min(times), max(times)))
        print("%-20s %s" % (state, "".join("%-24s" % c for c in cells)), flush=True)
    print("(median (min-max) of %d runs: signal to davincirun -> no process of the job left)" % args.repeat)


if __name__ == "__main__":
    main()
