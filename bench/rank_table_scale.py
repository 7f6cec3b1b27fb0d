"""Rank table scale benchmark: how long a table of 1k, 16k and 65k ranks
takes to be read, validated and planned for one of its servers.

Each table has 16 devices per server (64, 1,024 and 4,096 servers), every
scalar a string and every device a device_ip, indented as platforms write
it (about 120 bytes per device: 8 MB at 65,536 ranks). The figures are the
median of --repeat runs, through the Python module's bindings of the C++
core (the conversions cost microseconds):

  load   load_rank_table: read the file, parse, validate, normalize;
  plan   plan_launch for the last server, named by server_id: the load,
         then this server's ranks, environments, job id and ports;
  found  the same, the server found by this machine's address (its
         server_id is 127.0.0.1, so every server is compared with every
         interface address first);
  first  plan, but the first call in a fresh interpreter, as a command
         or a new kernel makes it: every buffer is new memory, page
         faults included (the repeated calls above reuse what the
         previous one freed, when the allocator kept it).

A column per 1,000 ranks shows whether the cost grows linearly, and one
the time CPython's json.loads takes to read the same file (no validation):
a yardstick of how fast this machine is at the moment, since the figures
of a shared machine vary with its load.

Usage: python bench/rank_table_scale.py [--repeat 7] [--servers 64,1024,4096]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from davincirunsdk import _core

DEVICES = 16  # per server: an Atlas 800T A2 has 8, an A3 16


def server_id(index):
    return "10.%d.%d.%d" % (index >> 16, (index >> 8) & 255, index & 255)


def write_table(path, servers, last_server_id):
    server_list = []
    for s in range(servers):
        devices = []
        for d in range(DEVICES):
            rank = s * DEVICES + d
            ip = "172.%d.%d.%d" % (rank >> 16, (rank >> 8) & 255, rank & 255)
            devices.append({"device_id": str(d), "device_ip": ip, "rank_id": str(rank)})
        server_list.append({"server_id": server_id(s), "device": devices, "host_nic_ip": "reserve"})
    server_list[-1]["server_id"] = last_server_id
    table = {"version": "1.0", "server_count": str(servers), "server_list": server_list, "status": "completed"}
    with open(path, "w") as f:
        json.dump(table, f, indent=2)


def median_ms(repeat, call):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def plan_options(path, tmp, server):
    options = _core.LaunchOptions()
    options.command = ["true"]
    options.rank_table = path
    options.server_id = server
    options.wait_timeout = 0
    options.device_dir = os.path.join(tmp, "no-dev")  # no /dev/davinciN: the table's ids are the numbering
    options.log_dir = os.path.join(tmp, "log")
    options.device_lock_dir = "off"
    return options


FIRST_PLAN = r"""
import sys, time
sys.path.insert(0, sys.argv[3])
import rank_table_scale
from davincirunsdk import _core
options = rank_table_scale.plan_options(sys.argv[1], sys.argv[2], "127.0.0.1")
start = time.perf_counter()
_core.plan_launch(options)
print((time.perf_counter() - start) * 1000)
"""


def first_plan_ms(path, tmp, repeat):
    """Median of `repeat` fresh interpreters' first plan_launch, in ms."""
    here = os.path.dirname(os.path.abspath(__file__))
    times = [float(subprocess.run([sys.executable, "-c", FIRST_PLAN, path, tmp, here], check=True,
                                  capture_output=True, text=True).stdout) for _ in range(repeat)]
    return statistics.median(times)


def measure(tmp, servers, repeat):
    """(load, plan, found, json.loads, MB, first) for a table of `servers` servers: median times in ms
    (first: the plan as a fresh interpreter's first call), and the file's size in MB."""
    path = os.path.join(tmp, "hccl_%d.json" % servers)
    write_table(path, servers, "127.0.0.1")
    by_id = plan_options(path, tmp, "127.0.0.1")
    by_address = plan_options(path, tmp, None)
    assert _core.plan_launch(by_address).server_id == "127.0.0.1"  # found, not assumed
    with open(path, "rb") as f:
        text = f.read()
    return (median_ms(repeat, lambda: _core.load_rank_table(path)),
            median_ms(repeat, lambda: _core.plan_launch(by_id)),
            median_ms(repeat, lambda: _core.plan_launch(by_address)),
            median_ms(repeat, lambda: json.loads(text)),
            len(text) / 1e6,
            first_plan_ms(path, tmp, repeat))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--servers", default="64,1024,4096", help="server counts, comma-separated")
    args = ap.parse_args()
    print("rank table scale: %d devices per server, median of %d runs" % (DEVICES, args.repeat))
    print("%8s %8s %7s %9s %9s %9s %9s %12s %13s" % ("ranks", "servers", "MB", "load ms", "plan ms", "found ms",
                                                      "first ms", "plan ms/1k", "json.loads ms"))
    with tempfile.TemporaryDirectory(prefix="davincirun-bench-") as tmp:
        for servers in (int(n) for n in args.servers.split(",")):
            load, plan, found, yardstick, size, first = measure(tmp, servers, args.repeat)
            ranks = servers * DEVICES
            print("%8d %8d %7.1f %9.1f %9.1f %9.1f %9.1f %12.2f %13.1f" % (ranks, servers, size, load, plan, found,
                                                                            first, plan / ranks * 1000, yardstick))


if __name__ == "__main__":
    main()
