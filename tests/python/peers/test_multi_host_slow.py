"""Slow ranks across real hosts (network namespaces, netns_support.py): a
server whose only rank falls behind the other server's is named slow, which
neither server could tell from its own ranks alone (one rank each). The
servers' paces travel in the peer channel's heartbeats (docs/multi-server.md,
"Slow ranks across servers")."""

import json
import re
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.multihost

# Rank 1 (the second host's only rank) takes ten times as long per step.
STEPS = r"""
import os, time
rank = int(os.environ["RANK"])
for step in range(1, 31 if rank == 1 else 151):
    print("step %d" % step, flush=True)
    time.sleep(0.4 if rank == 1 else 0.04)
"""


def test_a_rank_behind_the_other_server_is_named_slow_on_both(netns_hosts, tmp_path):
    hosts = netns_hosts.hosts[:2]
    table = netns_hosts.rank_table(tmp_path / "table.json", hosts, devices=1)
    script = tmp_path / "steps.py"
    script.write_text(STEPS)
    # A heartbeat every 0.5 s (peer timeout / 6); slow once behind for 1 s.
    command = ["-r", table, "--peer-timeout", "3", "--slow-window", "1", "--", sys.executable, str(script)]
    procs = [host.start_davincirun(command, cwd=host.root) for host in hosts]
    outputs = []
    for host, proc in zip(hosts, procs):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, (host.name, err[-3000:])
        outputs.append((out + err).decode(errors="replace"))
    member = hosts[1].address
    # Rank 0's server names the member's rank; the member says against what.
    assert "rank 1 on server %s is slow" % member in outputs[0], outputs[0][-3000:]
    said = re.search(r"rank 1 on server %s is slow: at step \d+ while the job's median across its servers is "
                     r"\d+ steps in" % re.escape(member), outputs[1])
    assert said, outputs[1][-3000:]
    # The job's record (on either server: the hub sent it back) holds the spell.
    for host in hosts:
        record = json.loads((Path(host.log_dir) / "latest" / "job.json").read_text())
        ranks = {r["rank"]: r for r in record["ranks"]}
        assert ranks[1]["slow"] and not ranks[0]["slow"]
