"""bench/compare.py runs end to end on a tiny subset (launch+exit, one
round, the native davincirun and the Python API against the bash loop) and
writes the figures it prints as JSON."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import REPO


@pytest.mark.skipif(shutil.which("davincirun") is None, reason="davincirun is not on PATH (pip install . first)")
def test_compare_launch_subset_writes_positive_times(tmp_path):
    out = tmp_path / "compare.json"
    # The native column is the program on PATH, named as a development build would be.
    done = subprocess.run(
        [sys.executable, os.path.join(REPO, "bench", "compare.py"), "--only", "launch", "--repeat", "1",
         "--peers", "dvr,api,api-call", "--calls", "2", "--davincirun", shutil.which("davincirun"), "--json",
         str(out)],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads(out.read_text())["rows"]
    for row in ("launch-true", "launch-pass"):
        cells = rows[row]["cells"]
        for peer in ("bash", "dvr", "api", "api-call"):
            assert cells[peer]["samples"], (row, peer, cells.get(peer))
            assert all(t > 0 for t in cells[peer]["samples"]), (row, peer)
        assert rows[row]["summary"]["dvr"]["ratio"] > 0
    assert "launch+exit" in done.stdout and "davincirun" in done.stdout
