"""With the job's console on /dev/null, the relay moves each rank's output
to its log by splice(2) and the progress watch reads only the end of each
move (cpp/include/davincirun/log_streamer.hpp): the record still has every
rank's output bytes and its last progress, whether the rank ends its lines
or redraws a bar with '\\r'."""

import json
import os
import shutil
import subprocess
import sys

import pytest

DAVINCIRUN = shutil.which("davincirun")
pytestmark = pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH (pip install . first)")

# ~4 MiB of noise a rank in 64 KiB writes, its progress between them: rank 0
# in lines, rank 1 as a bar redrawn with '\r'; the last states are 9/9.
FLOOD = r"""
import os, sys
rank = int(os.environ["RANK"])
out = sys.stdout.buffer
noise = b"".join(b"loss %06d of rank %d, nothing to read here\n" % (i, rank) for i in range(1400))
for step in range(1, 10):
    for _ in range(8):
        out.write(noise)
    if rank == 0:
        out.write(b"Step: %d/9\n" % step)
    else:
        out.write(b"\r%3d%%|#    | %d/9 [00:01<00:01, 3.1it/s]" % (step * 11, step))
    out.flush()
"""


def test_a_console_on_dev_null_still_records_every_byte_and_the_last_progress(tmp_path, job_env):
    script = tmp_path / "flood.py"
    script.write_text(FLOOD)
    logs = tmp_path / "log"
    proc = subprocess.run([DAVINCIRUN, "--nproc", "2", "-l", str(logs), sys.executable, str(script)],
                          env=dict(os.environ, **job_env), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    run = os.path.realpath(str(logs / "latest"))
    with open(os.path.join(run, "job.json")) as f:
        record = json.load(f)
    ranks = {r["rank"]: r for r in record["ranks"]}
    for rank in (0, 1):
        log = os.path.join(run, "rank_%d.device_%d.log" % (rank, rank))
        assert ranks[rank]["output_bytes"] == os.path.getsize(log) > 4 * 2**20
        assert sum(ranks[rank]["activity"]["bytes"]) == ranks[rank]["output_bytes"]
        assert ranks[rank]["progress"][-1][2] == "step 9/9", ranks[rank]["progress"]
