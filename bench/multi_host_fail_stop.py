"""Across hosts: how long after something goes wrong on one host every rank
on every host is gone, with davincirun's peer channel and without it
(--no-peers: each host learns only through the framework, here gloo).

Three hosts in network namespaces (tests/python/support/netns_support.py; needs
root), one davincirun each, one rank per host all-reducing every 50 ms.
Events: a rank SIGKILLed on h2; h2's link cut (`ip link set down`).

    python bench/multi_host_fail_stop.py [--runs 3] [--cap 60] [--peer-timeout 5]

A run that is not over `--cap` seconds later is counted as "> cap" and its
processes are killed.
"""

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests", "python")
# The test helpers: support/, peers/ (test_multi_host_peers) and conftest.py.
sys.path[:0] = [os.path.join(TESTS, "support"), os.path.join(TESTS, "peers"), TESTS]

from netns_support import Network  # noqa: E402
from test_multi_host_peers import STEADY, rank_pids, wait_joined  # noqa: E402


def gone_after(hosts, since, cap):
    while time.monotonic() - since < cap:
        if not any(rank_pids(h) for h in hosts):
            return time.monotonic() - since
        time.sleep(0.01)
    return None


def one_run(root, event, peers, cap, peer_timeout):
    network = Network(3, root)
    try:
        hosts = network.hosts
        script = os.path.join(str(root), "steady.py")
        with open(script, "w") as f:
            f.write(STEADY)
        table = network.rank_table(os.path.join(str(root), "table.json"), hosts, devices=1)
        flags = ["--peer-timeout", str(peer_timeout)] if peers else ["--no-peers"]
        for h in hosts:
            h.start_davincirun(["-r", table, *flags, "--", sys.executable, script], cwd=h.root)
        wait_joined(hosts, 3)
        start = time.monotonic()
        if event == "rank killed":
            os.kill(rank_pids(hosts[1])[1], signal.SIGKILL)
        else:
            hosts[1].cut_link()
        return gone_after(hosts, start, cap)
    finally:
        network.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cap", type=float, default=60.0)
    parser.add_argument("--peer-timeout", type=float, default=5.0)
    args = parser.parse_args()
    print("%-12s %-28s %s" % ("event", "launcher", "every rank on every host gone after (s), per run"))
    for event in ("rank killed", "link cut"):
        for peers in (True, False):
            times = []
            for _ in range(args.runs):
                with tempfile.TemporaryDirectory() as root:
                    times.append(one_run(root, event, peers, args.cap, args.peer_timeout))
            shown = ["> %g" % args.cap if t is None else "%.3f" % t for t in times]
            done = [t for t in times if t is not None]
            median = "median %.3f" % statistics.median(done) if len(done) == len(times) else ""
            name = "davincirun (peer timeout %gs)" % args.peer_timeout if peers else "davincirun --no-peers"
            print("%-12s %-28s %s %s" % (event, name, " ".join(shown), median), flush=True)


if __name__ == "__main__":
    main()
