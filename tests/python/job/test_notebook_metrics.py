"""log_metric() in a real notebook (scripts/notebook_env.sh kernels): a
4-rank job whose ranks log metrics shows, while it runs and at its end, one
chart per rank in the cell's status view, each with that rank's own last
value (docs/metrics.md)."""

import re

import pytest
from conftest import MARKER_VARIABLE, processes_with_marker
from notebook_support import IMPORTS, cell_displays, cell_errors, execute_notebook, launch_call

pytestmark = pytest.mark.notebook

# 60 steps of 50 ms: three seconds of training, time for the view to chart it while it runs.
RANKS = (
    "import os, time\n"
    "from davincirunsdk import log_metric\n"
    "rank = int(os.environ['RANK_ID'])\n"
    "for step in range(60):\n"
    "    assert log_metric('loss', 1000 * rank + step, step=step)\n"
    "    log_metric('lr', 0.1)\n"
    "    time.sleep(0.05)\n"
)

CELL = (r'<td [^>]*class="davincirun-metric" data-rank="(\d+)" data-name="(\w+)">'
        r'(<svg .*?</svg>) <span>(.*?)</span></td>')


def charts(page):
    """{(rank, name): (svg, last value text)} of a view's HTML."""
    return {(int(rank), name): (svg, last) for rank, name, svg, last in re.findall(CELL, page)}


def test_every_rank_has_its_chart_with_its_own_last_value(kernel_name, tmp_path, rank_table, job_env):
    call = launch_call("start_and_wait_distributed_train", RANKS, rank_table(4), str(tmp_path / "log"), job_env,
                       output_notebook=True)
    messages = []
    nb = execute_notebook([IMPORTS, call], kernel_name, cwd=tmp_path, iopub=messages, timeout=120)
    assert [cell_errors(cell) for cell in nb.cells] == [[], []]
    [view] = cell_displays(nb.cells[1])
    final = charts(view["text/html"])
    assert sorted(final) == [(rank, name) for rank in range(4) for name in ("loss", "lr")]
    for rank in range(4):
        svg, last = final[(rank, "loss")]
        assert last == "%.4g @ step 59" % (1000 * rank + 59)
        assert svg.startswith("<svg ") and re.search(r'<path d="M0\.0 [\d.]+ L', svg)
        assert final[(rank, "lr")][1] == "0.1"
        assert "  rank %d: loss %.4g @ step 59, lr 0.1" % (rank, 1000 * rank + 59) in view["text/plain"].splitlines()
    # While the job ran, the view already charted the ranks: an update whose headline says they run.
    live = [charts(m.content["data"]["text/html"]) for m in messages
            if m.msg_type == "update_display_data" and m.cell_index == 1
            and re.search(r", [1-4] running</b>", m.content["data"]["text/html"])]
    charted = [c for c in live if c]
    assert charted, "no update of the view charted the metrics while the job ran"
    assert any(len({rank for rank, _ in c}) == 4 for c in charted)
    for c in charted:  # each rank's chart only ever shows that rank's values
        for (rank, name), (_, last) in c.items():
            if name == "loss":
                assert 1000 * rank <= float(last.split(" @ ")[0]) <= 1000 * rank + 59
    assert processes_with_marker(job_env[MARKER_VARIABLE]) == []
