"""A slow rank in a real notebook (scripts/notebook_env.sh kernels): of a
4-rank job, rank 2 sleeps longer per step; within the slow window the
cell's status view marks it "slow", and the job record names it with its
server (docs/job-record.md)."""

import json
import os
import re

import pytest
from conftest import MARKER_VARIABLE, processes_with_marker
from notebook_support import IMPORTS, cell_displays, cell_errors, execute_notebook, launch_call

pytestmark = pytest.mark.notebook

# 40 steps: 0.1 s each, rank 2's 0.4 s; no collective, so rank 2 falls behind.
RANKS = (
    "import os, time\n"
    "rank = int(os.environ['RANK_ID'])\n"
    "for step in range(1, 41):\n"
    "    print('epoch: 1 step: %d, loss is 0.5' % step, flush=True)\n"
    "    time.sleep(0.4 if rank == 2 else 0.1)\n"
)

ROW = r'<tr><td [^>]*><b>(\d+)</b></td>(?:<td [^>]*>[^<]*</td>){2}<td [^>]*>([^<]*)</td>'


def test_a_rank_behind_is_marked_slow_in_the_view_and_named_in_the_record(kernel_name, tmp_path, rank_table, job_env):
    log_dir = tmp_path / "log"
    call = launch_call("start_and_wait_distributed_train", RANKS, rank_table(4), str(log_dir), job_env,
                       output_notebook=True, slow_window=1.0)
    messages = []
    nb = execute_notebook([IMPORTS, call], kernel_name, cwd=tmp_path, iopub=messages, timeout=120)
    assert [cell_errors(cell) for cell in nb.cells] == [[], []]
    [_] = cell_displays(nb.cells[1])
    statuses = [dict(re.findall(ROW, m.content["data"]["text/html"])) for m in messages
                if m.msg_type == "update_display_data" and m.cell_index == 1]
    slow_views = [s for s in statuses if s.get("2", "").startswith("slow: ")]
    assert slow_views, "no update of the view marked rank 2 slow"
    assert all(not s.get(r, "").startswith("slow") for s in slow_views for r in ("0", "1", "3"))
    # Progress shows for a running rank that is not slow.
    assert any("epoch 1 step" in s.get("0", "") for s in statuses)
    run = os.path.realpath(str(log_dir / "latest"))
    record = json.loads(open(os.path.join(run, "job.json")).read())
    [rank2] = [r for r in record["ranks"] if r["rank"] == 2]
    assert rank2["slow"] and "behind" in rank2["slow"][0]["detail"]
    assert [e for e in record["events"] if e["kind"] == "slow" and e["rank"] == 2]
    assert all(not r["slow"] for r in record["ranks"] if r["rank"] != 2)
    events = open(os.path.join(run, "events.txt")).read()
    assert re.search(r"rank 2 on server \S+ is slow: at epoch 1 step \d+ while rank \d \(the median\)", events)
    assert processes_with_marker(job_env[MARKER_VARIABLE]) == []
