"""The status view's model and rendering, outside a kernel: fed with real
plans and results of real jobs, checked as text and HTML."""

import re

from conftest import python_command

from davincirunsdk import start_distributed_train
from davincirunsdk._console import colourize
from davincirunsdk._job_view import JobStatus, describe_exit

FAIL_RANK_1 = "import os, sys, time\nif os.environ['RANK_ID'] == '1':\n    sys.exit(3)\ntime.sleep(30)\n"


def finished_job(rank_table, tmp_path, job_env, code, n=3):
    job = start_distributed_train(
        python_command(code), rank_table=rank_table(n), log_dir=str(tmp_path / "log"), env=job_env,
        output_notebook=False,
    )
    job.wait(raise_exception=False)
    return job


def test_rows_follow_the_plan_and_lines_feed_the_last_output(tmp_path, rank_table, job_env):
    job = finished_job(rank_table, tmp_path, job_env, "pass", n=3)
    status = JobStatus(job.plan, job.pids, job.run_dir)
    assert [(row.rank, row.device, row.pid) for row in status.rows] == [
        (r.rank, r.physical_device_id, pid) for r, pid in zip(job.plan.ranks, job.pids)
    ]
    for index, line in [(0, "first"), (1, "one"), (0, "second"), (7, "not ours"), (-1, "not ours either"),
                        (2, "\x1b[31mred\x1b[0m\x00 \x1b]0;title\x07text")]:
        status.feed_last_line(index, line)
    # Terminal control sequences and control characters do not reach a table cell.
    assert [row.last_line for row in status.rows] == ["second", "one", "red text"]
    status.feed_progress(1, "45%|####")
    status.feed_progress(9, "ignored")
    table = status.text(now=status.started + 2.0).splitlines()
    assert table[0] == "davincirun job %s: 3 rank(s) of 3 on server 127.0.0.1, 3 running" % job.job_id
    assert table[1].split() == ["rank", "device", "pid", "status", "time", "last", "output"]
    assert table[2].split() == ["0", "0", str(job.pids[0]), "running", "2.0", "s", "second"]
    assert table[3].split()[-1] == "45%|####"  # a progress line shows over the last line
    # Columns line up.
    assert len({line.index("running") for line in table[2:5]}) == 1
    assert table[5] == "logs: " + job.run_dir
    status.feed_progress(1, "")  # the bar finished
    assert status.text().splitlines()[3].split()[-1] == "one"


def test_exits_and_the_final_summary_of_a_failed_job(tmp_path, rank_table, job_env):
    job = finished_job(rank_table, tmp_path, job_env, FAIL_RANK_1)
    status = JobStatus(job.plan, job.pids, job.run_dir)
    status.feed_exit(1, 3, None, False)
    status.feed_exit(0, None, 15, True)
    status.feed_exit(5, 0, None, False)  # out of range: ignored
    assert [(row.state, row.status) for row in status.rows] == [
        ("stopped", "stopped: signal 15 (SIGTERM)"), ("failed", "exit code 3"), ("running", "running")]
    status.finish(job.result)
    text = status.text().splitlines()
    assert re.match(r"davincirun job \S+: 3 rank\(s\) of 3 on server 127\.0\.0\.1, failed in [\d.]+ s; "
                    r"first failure: rank 1 \(exit code 3\)$", text[0]), text[0]
    assert text[2].split()[3:7] == text[4].split()[3:7] == ["stopped:", "signal", "15", "(SIGTERM)"]
    assert text[3].split()[3:6] == ["exit", "code", "3"]


def test_ranks_not_shown_live_say_so(tmp_path, rank_table, job_env):
    job = finished_job(rank_table, tmp_path, job_env, "pass", n=2)
    status = JobStatus(job.plan, job.pids, job.run_dir, shown=[0])
    status.feed_last_line(0, "visible")
    rows = status.text().splitlines()[2:4]
    assert rows[0].endswith("visible") and rows[1].endswith("(log file only)")


def test_html_escapes_rank_output_and_colours_each_rank(tmp_path, rank_table, job_env):
    job = finished_job(rank_table, tmp_path, job_env, "pass", n=2)
    status = JobStatus(job.plan, job.pids, job.run_dir)
    status.feed_last_line(0, "<img src=x onerror=alert(1)> & more")
    page = status.html(tail="[rank 1] <b>not bold</b>\nplain <i>\n")
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt; &amp; more" in page
    assert "<b>not bold</b>" not in page and "&lt;b&gt;not bold&lt;/b&gt;" in page
    assert "plain &lt;i&gt;" in page
    assert 'color:#1f6feb"><b>0</b>' in page and 'color:#a23cbf"><b>1</b>' in page


def test_describe_exit():
    assert describe_exit(0, None, False) == ("done", "exited 0")
    assert describe_exit(0, None, True) == ("done", "exited 0")
    assert describe_exit(2, None, False) == ("failed", "exit code 2")
    assert describe_exit(143, None, True) == ("stopped", "stopped: exit code 143")
    assert describe_exit(None, 9, True) == ("stopped", "stopped: signal 9 (SIGKILL)")
    assert describe_exit(None, 11, False) == ("failed", "signal 11 (SIGSEGV)")
    assert describe_exit(None, 7, False) == ("failed", "signal 7 (SIGBUS)")
    assert describe_exit(None, 40, False) == ("failed", "signal 40")
    assert describe_exit(None, None, False) == ("failed", "unknown exit status")


def test_colourize_marks_rank_prefixes_and_notices_only():
    text = "[rank 0] a [rank 1] inside\n[rank 9]+ continued\n[davincirun] note\nplain [davincirun]\n"
    assert colourize(text) == (
        "\x1b[34m[rank 0]\x1b[0m a [rank 1] inside\n"
        "\x1b[94m[rank 9]+\x1b[0m continued\n"
        "\x1b[1m[davincirun]\x1b[0m note\n"
        "plain [davincirun]\n"
    )


def test_a_job_handle_shows_itself(tmp_path, rank_table, job_env):
    job = finished_job(rank_table, tmp_path, job_env, "pass", n=2)
    assert repr(job) == "<DistributedJob %s: 2 rank(s), finished, logs in %s>" % (job.job_id, job.run_dir)
    assert "<table" in job._repr_html_() and str(job.pids[1]) in job._repr_html_()


def test_a_long_last_line_is_cut_by_display_columns(tmp_path, rank_table, job_env):
    job = finished_job(rank_table, tmp_path, job_env, "pass", n=1)
    status = JobStatus(job.plan, job.pids, job.run_dir)
    status.feed_last_line(0, "\u8bad" * 100)  # 200 columns: each CJK character takes two
    assert status.rows[0].last_line == "\u8bad" * 59 + "\u2026"  # 119 columns of the 120
    status.feed_last_line(0, "x" * 200)
    assert status.rows[0].last_line == "x" * 119 + "\u2026"


# The line MindSpore 2.10's CPU build raises from init() in rank-table mode.
MINDSPORE_INIT_ON_CPU = (
    "import os\n"
    "if os.environ['RANK_ID'] == '1':\n"
    "    raise RuntimeError(\"Maybe you are trying to call 'mindspore.communication.init()' without using "
    "'mpirun', which will make MindSpore load several environment variables and check their validation.\")\n"
)


def test_the_root_cause_shows_a_hint_where_the_frameworks_message_misleads(tmp_path, rank_table, job_env):
    from davincirunsdk import _core

    job = finished_job(rank_table, tmp_path, job_env, MINDSPORE_INIT_ON_CPU, n=2)
    status = JobStatus(job.plan, job.pids, job.run_dir)
    status.finish(job.result, read_root_cause=_core.root_cause)
    text = status.text()
    assert "root cause (rank 1" in text and "without using 'mpirun'" in text
    hint = [line.strip() for line in text.splitlines() if line.strip().startswith("hint: ")]
    assert len(hint) == 1 and "--launch-mode dynamic-cluster" in hint[0], text
    assert "--launch-mode dynamic-cluster" in status.html()  # the notebook's rendering of the same view
