"""The status line of `davincirun` on a real terminal shows what the ranks'
plain lines say of their progress, their output rate and which rank is slow,
and is gone when they are: the job's last row is never a stale status."""

import re
import shutil
import sys

import pytest
from conftest import MARKER_VARIABLE
from pty_support import run_on_pty

DAVINCIRUN = shutil.which("davincirun")
pytestmark = pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH (pip install . first)")

# Plain "epoch E step S" lines (no bar), rank 2 four times slower.
TRAIN = r"""
import os, time
rank = int(os.environ["RANK_ID"])
for step in range(1, 41):
    print("epoch 1 step %d loss %.3f" % (step, 1.0 / step), flush=True)
    time.sleep(0.2 if rank == 2 else 0.05)
"""


def test_status_line_shows_progress_rate_and_the_slow_rank(tmp_path, rank_table, job_env):
    argv = [DAVINCIRUN, "-q", "--slow-window", "1", "--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE]),
            "-r", rank_table(4), sys.executable, "-c", TRAIN]
    code, output = run_on_pty(argv, cwd=tmp_path, columns=120, rows=24)
    assert code == 0, output[-3000:]
    text = re.sub(r"\x1b\[[0-9;]*m", "", output.decode("utf-8"))  # rank prefixes in colour
    # Each draw is "\r<line>\x1b[K"; clearing is "\r\x1b[K".
    drawn = [d for d in re.findall(r"\r([^\r\n]*?)\x1b\[K", text) if d]
    assert any(re.search(r"\[rank \d\] epoch 1 step \d+", d) and "output " in d for d in drawn), drawn[-5:]
    assert any(d.startswith("slow: rank 2") for d in drawn), drawn[-5:]
    assert "B/s" in "".join(drawn)
    # The last status drawn is cleared again: the prompt comes on a clean row.
    last = list(re.finditer(r"\r([^\r\n]+?)\x1b\[K", text))[-1]
    assert "\r\x1b[K" in text[last.end():], repr(text[-300:])
