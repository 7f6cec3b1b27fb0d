"""The ranks' metrics in real jobs and in the status view (docs/metrics.md):
every rank of a 4-rank job writes its own file, through the CLI and the
Python API; a job that restarts keeps every attempt's lines; the reader of
the view takes whole lines as files grow, skips what is not a record, keeps
the newest points and the latest attempt, and draws one chart per rank and
name. The same view in a real notebook kernel: tests/python/job/test_notebook_metrics.py."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import MARKER_VARIABLE, python_command

from davincirunsdk import _metrics_view, start_and_wait_distributed_train
from davincirunsdk._metrics_view import KEEP, MetricsReader

DAVINCIRUN = shutil.which("davincirun")

# Each rank logs "loss" = 1000 * rank + step for 50 steps and its rank id,
# and one forked child (a DataLoader worker) logs too.
FOUR_RANKS = r"""
import os, time
from davincirunsdk import log_metric
rank = int(os.environ["RANK_ID"])
for step in range(50):
    assert log_metric("loss", 1000 * rank + step, step=step)
assert log_metric("rank_id", rank)
pid = os.fork()
if pid == 0:
    os._exit(0 if log_metric("worker", rank + 0.5) else 1)
assert os.waitpid(pid, 0)[1] == 0
"""


def read_lines(path):
    with open(str(path), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def check_own_values(metrics_dir, ranks):
    """Each rank's file holds its own lines only, all of them."""
    assert sorted(os.listdir(str(metrics_dir))) == ["rank_%d.jsonl" % r for r in ranks]
    assert os.stat(str(metrics_dir)).st_mode & 0o077 == 0  # made by the first rank, private
    for rank in ranks:
        lines = read_lines(metrics_dir / ("rank_%d.jsonl" % rank))
        assert {(line["rank"], line["attempt"]) for line in lines} == {(rank, 1)}
        loss = [(line["step"], line["value"]) for line in lines if line["name"] == "loss"]
        assert loss == [(step, 1000.0 * rank + step) for step in range(50)]
        assert [line["value"] for line in lines if line["name"] == "rank_id"] == [rank]
        assert [line["value"] for line in lines if line["name"] == "worker"] == [rank + 0.5]


@pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH (pip install . first)")
def test_four_ranks_of_the_cli_each_write_their_own_file(tmp_path, job_env):
    proc = subprocess.run(
        [DAVINCIRUN, "--nproc", "4", "-l", str(tmp_path / "log"), "--env",
         "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE]), sys.executable, "-c", FOUR_RANKS],
        cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        timeout=120)
    assert proc.returncode == 0, proc.stderr
    check_own_values(tmp_path / "log" / "latest" / "metrics", range(4))


def test_four_ranks_of_the_python_api_and_the_last_values_in_its_summary(tmp_path, rank_table, job_env, capfd):
    code = start_and_wait_distributed_train(python_command(FOUR_RANKS), rank_table=rank_table(4),
                                            log_dir=str(tmp_path / "log"), env=job_env)
    assert code == 0
    check_own_values(tmp_path / "log" / "latest" / "metrics", range(4))
    out = capfd.readouterr().out.splitlines()
    # The text summary (outside a notebook) ends with the last value of every metric of every rank.
    start = out.index("metrics (last value, step):")
    assert out[start + 1:start + 5] == [
        "  rank %d: loss %s @ step 49, rank_id %d, worker %s" % (r, "%.4g" % (1000 * r + 49), r, "%.4g" % (r + 0.5))
        for r in range(4)]
    assert out[start + 5].startswith("logs: ")


RESTARTS = r"""
import os, sys
from davincirunsdk import log_metric
count = int(os.environ["DAVINCIRUN_RESTART_COUNT"])
for step in range(3):
    log_metric("loss", 10 * count + step, step=step)
if count == 0 and os.environ["RANK_ID"] == "1":
    raise RuntimeError("lost a link")
"""


def test_a_job_that_restarts_keeps_every_attempts_lines_and_shows_the_last(tmp_path, rank_table, job_env, capfd):
    code = start_and_wait_distributed_train(python_command(RESTARTS), rank_table=rank_table(2),
                                            log_dir=str(tmp_path / "log"), env=job_env, max_restarts=1,
                                            restart_delay=0.1)
    assert code == 0
    metrics_dir = tmp_path / "log" / "latest" / "metrics"
    for rank in (0, 1):
        got = [(line["attempt"], line["step"], line["value"]) for line in read_lines(metrics_dir / ("rank_%d.jsonl"
                                                                                                  % rank))]
        # Rank 0 may be stopped before its three steps of attempt 1; attempt 2 is whole.
        assert got[-3:] == [(2, step, 10.0 + step) for step in range(3)]
        assert all(attempt == 1 and value == step for attempt, step, value in got[:-3])
        assert rank == 0 or len(got) == 6
    out = capfd.readouterr().out
    assert "  rank 1: loss 12 @ step 2 (attempt 2)\n" in out


# ------------------------------------------------------------- the reader


def append(path, text):
    with open(str(path), "ab") as f:
        f.write(text.encode("utf-8"))


def line(name, value, step=None, attempt=1, rank=0, **extra):
    record = dict(time=1700000000.5, name=name, value=value, step=step, attempt=attempt, rank=rank, **extra)
    return json.dumps(record, ensure_ascii=False) + "\n"


@pytest.fixture
def run_dir(tmp_path):
    (tmp_path / "metrics").mkdir()
    return tmp_path


def points(reader, rank, name):
    return [(step, value) for step, value, _ in reader.series[rank][name].points]


def test_whole_lines_only_as_the_files_grow(run_dir):
    reader = MetricsReader(str(run_dir), [0, 1], 2)
    reader.poll(force=True)  # no file yet: nothing, no error
    assert reader.names == [] and reader.html() == "" and reader.text_lines() == []
    path = run_dir / "metrics" / "rank_1.jsonl"
    whole = line("loss", 0.5, 1, rank=1)
    append(path, whole + whole[:20])  # the second line is still being written
    reader.poll(force=True)
    assert points(reader, 1, "loss") == [(1, 0.5)]
    append(path, line("loss", 0.25, 2, rank=1)[20:])
    reader.poll()  # less than a second after the last read: nothing read
    assert points(reader, 1, "loss") == [(1, 0.5)]
    reader.poll(force=True)
    assert points(reader, 1, "loss") == [(1, 0.5), (2, 0.25)]
    assert reader.series[0] == {} and reader.skipped == 0


def test_lines_that_are_not_records_are_skipped_and_counted(run_dir):
    reader = MetricsReader(str(run_dir), [0], 1)
    path = run_dir / "metrics" / "rank_0.jsonl"
    bad = ["not json\n", "[1, 2]\n", line("", 1.0), line("x", "1.0"), line("x", True), line("x", 1.0, step=-1),
           line("x", 1.0, attempt=0), line("x", None), line("x", None, nonfinite="huge"), "\xff\n"]
    append(path, "".join(bad) + "\n" + line("x", None, 3, nonfinite="nan") + line("x", 2, 4))
    reader.poll(force=True)
    assert reader.skipped == len(bad)
    assert points(reader, 0, "x") == [(3, None), (4, 2.0)]
    assert "%d line(s) of the metrics files are not records and were skipped" % len(bad) in reader.text_lines()[-1]


def test_the_newest_points_of_the_latest_attempt_are_kept(run_dir):
    reader = MetricsReader(str(run_dir), [0], 1)
    path = run_dir / "metrics" / "rank_0.jsonl"
    append(path, "".join(line("loss", float(step), step) for step in range(KEEP + 50)))
    reader.poll(force=True)
    assert points(reader, 0, "loss") == [(step, float(step)) for step in range(50, KEEP + 50)]
    append(path, line("loss", 7.0, 0, attempt=2) + line("loss", 99.0, 500, attempt=1))
    reader.poll(force=True)
    assert points(reader, 0, "loss") == [(0, 7.0)]  # a later attempt starts the chart again; an older one is ignored
    assert reader.text_lines()[1] == "  rank 0: loss 7 @ step 0 (attempt 2)"


def test_a_file_far_ahead_is_read_from_its_end(run_dir, monkeypatch):
    monkeypatch.setattr(_metrics_view, "READ_LIMIT", 4096)
    reader = MetricsReader(str(run_dir), [0], 1)
    path = run_dir / "metrics" / "rank_0.jsonl"
    append(path, "".join(line("loss", float(step), step) for step in range(1000)))
    reader.poll(force=True)
    got = points(reader, 0, "loss")
    assert got[-1] == (999, 999.0) and 20 < len(got) < 60  # about 4 KiB of the newest lines, each whole
    assert got == [(step, float(step)) for step in range(got[0][0], 1000)]
    assert reader.skipped == 0


def test_one_chart_per_rank_and_name_with_the_last_value(run_dir):
    reader = MetricsReader(str(run_dir), [4, 5], 16)
    for rank in (4, 5):
        path = run_dir / "metrics" / ("rank_%d.jsonl" % rank)
        append(path, "".join(line("loss", 1.0 / (step + 1) + rank, step, rank=rank) for step in range(100)))
        append(path, line("acc<&>", None, 100, rank=rank, nonfinite="inf"))
    reader.poll(force=True)
    page = reader.html()
    cells = re.findall(r'<td [^>]*class="davincirun-metric" data-rank="(\d+)" data-name="([^"]*)">(.*?)</td>', page)
    assert [(rank, name) for rank, name, _ in cells] == [("4", "loss"), ("4", "acc&lt;&amp;&gt;"), ("5", "loss"),
                                                         ("5", "acc&lt;&amp;&gt;")]
    for rank, name, cell in cells:
        assert cell.startswith('<svg xmlns="http://www.w3.org/2000/svg" width="120" height="22"')
        path = re.search(r'<path d="([^"]*)"', cell).group(1)
        if name == "loss":
            assert path.startswith("M0.0 ") and path.count("L") == _metrics_view.DRAWN - 1  # 100 points drawn as 60
            assert cell.endswith("<span>%s @ step 99</span>" % ("%.4g" % (0.01 + int(rank))))
        else:
            assert path == "" and cell.endswith("<span>inf @ step 100</span>")
    # Only this server's ranks: said under the charts and in the text.
    note = "only this server&#x27;s 2 rank(s) of 16 are charted"
    assert note in page
    assert reader.text_lines() == [
        "metrics (last value, step):",
        "  rank 4: loss 4.01 @ step 99, acc<&> inf @ step 100",
        "  rank 5: loss 5.01 @ step 99, acc<&> inf @ step 100",
        "  only this server's 2 rank(s) of 16 are charted: the ranks on other servers write their metrics on "
        "their own servers",
    ]


def test_many_charts_draw_fewer_points_each(run_dir):
    """16 ranks of 12 metrics of 200 points: the view, sent up to twice a
    second, stays small (the notebook server allows 1 MB/s)."""
    ranks = list(range(16))
    reader = MetricsReader(str(run_dir), ranks, 16)
    for rank in ranks:
        append(run_dir / "metrics" / ("rank_%d.jsonl" % rank),
               "".join(line("metric_%02d" % n, float(step % 7), step, rank=rank) for step in range(KEEP)
                       for n in range(12)))
    reader.poll(force=True)
    page = reader.html()
    paths = re.findall(r'<path d="([^"]*)"', page)
    assert len(paths) == 16 * 12
    drawn = _metrics_view.DRAWN_TOTAL // len(paths)
    assert {path.count("L") + 1 for path in paths} == {drawn}
    assert len(page) < 160000, len(page)


def test_the_charts_of_one_metric_share_one_scale(run_dir):
    """A rank whose loss is apart from the others' is drawn apart."""
    reader = MetricsReader(str(run_dir), [0, 1], 2)
    for rank, base in ((0, 0.0), (1, 10.0)):
        append(run_dir / "metrics" / ("rank_%d.jsonl" % rank),
               "".join(line("loss", base + step / 10.0, step, rank=rank) for step in range(11)))
    reader.poll(force=True)
    heights = {}
    for rank, path in re.findall(r'data-rank="(\d)" data-name="loss"><svg .*?<path d="([^"]*)"', reader.html()):
        heights[int(rank)] = [float(y) for y in re.findall(r"[ML][\d.]+ ([\d.]+)", path)]
    height = _metrics_view.HEIGHT
    assert heights[0][0] == height - 1 and heights[1][-1] == 1.0  # the lowest and the highest of both ranks
    assert min(heights[0]) > height - 4 and max(heights[1]) < 4  # rank 0 along the bottom, rank 1 along the top
    assert "11 point(s), lowest 10, highest 11" in reader.html()  # the tooltip: the chart's own points
