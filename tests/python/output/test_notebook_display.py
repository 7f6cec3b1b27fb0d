"""What a notebook shows of a job, in real kernels (ipykernel 6 and 7) run by
nbclient: progress bars collapsed, floods paced inside the IOPub limits with
an exact count of what was not shown, the status view updated in place, and
the output of a job started without waiting kept in its starting cell."""

import re

import pytest
from conftest import MARKER_VARIABLE, processes_with_marker
from notebook_support import (
    IMPORTS,
    cell_displays,
    cell_errors,
    cell_text,
    execute_notebook,
    launch_call,
    strip_ansi,
)

# Real Jupyter kernels (scripts/notebook_env.sh): run with -m notebook, leave out with -m "not notebook".
pytestmark = pytest.mark.notebook

# Each rank draws a 2000-step progress bar on stderr the way tqdm does
# ('\r' before each state), then says it is done.
PROGRESS_BAR = (
    "import os, sys, time\n"
    "for i in range(1, 2001):\n"
    "    sys.stderr.write('\\rsteps: %4d/2000 |' % i + '#' * (i // 100))\n"
    "    sys.stderr.flush()\n"
    "    time.sleep(0.0005)\n"
    "sys.stderr.write('\\n')\n"
    "print('done', os.environ['RANK_ID'])\n"
)

FLOOD_LINES = 150000
# Each rank writes FLOOD_LINES numbered lines as fast as it can (about 6 MB).
FLOOD = (
    "import os, sys\n"
    "rank = os.environ['RANK_ID']\n"
    "out = sys.stdout\n"
    "for i in range(%d):\n"
    "    out.write('rank %%s flood line %%06d of a long run\\n' %% (rank, i))\n" % FLOOD_LINES
)

# Ranks say they are ready, then keep running for a while.
READY_THEN_SLEEP = "import time\nprint('ready', flush=True)\ntime.sleep(2.5)\nprint('finished')\n"

# Ranks print a numbered line every 0.2 s for about 1.6 s.
TICKING = (
    "import os, time\n"
    "for i in range(8):\n"
    "    print('tick %d of rank %s' % (i, os.environ['RANK_ID']), flush=True)\n"
    "    time.sleep(0.2)\n"
)


def run_waiting_cell(kernel_name, tmp_path, code, table, job_env, timeout=60):
    """Runs a notebook whose cell 1 calls start_and_wait_distributed_train
    for ranks running `code`; checks it raised nothing. Returns (the executed
    notebook, the IOPub messages)."""
    call = launch_call("start_and_wait_distributed_train", code, table, str(tmp_path / "log"), job_env,
                       output_notebook=True)
    messages = []
    nb = execute_notebook([IMPORTS, call], kernel_name, cwd=tmp_path, iopub=messages, timeout=timeout)
    assert cell_errors(nb.cells[1]) == []
    return nb, messages


def stream_lines(cell):
    return cell_text(cell, displays=False, ansi=False).splitlines()


def view_updates(messages, cell_index):
    """text/plain of every display and update of the status view sent while `cell_index` ran."""
    return [
        m.content["data"]["text/plain"]
        for m in messages
        if m.msg_type in ("display_data", "update_display_data") and m.cell_index == cell_index
    ]


def test_a_progress_bar_is_one_line_per_rank_and_updates_in_the_view(kernel_name, tmp_path, rank_table, job_env):
    nb, messages = run_waiting_cell(kernel_name, tmp_path, PROGRESS_BAR, rank_table(2), job_env)
    lines = stream_lines(nb.cells[1])
    for rank in range(2):
        mine = [line for line in lines if line.startswith("[rank %d] " % rank)]
        # The bar's final state once, not 2000 redraws.
        assert mine == ["[rank %d] steps: 2000/2000 |%s" % (rank, "#" * 20), "[rank %d] done %d" % (rank, rank)]
    # Meanwhile the status view showed the bar moving.
    states = set()
    for text in view_updates(messages, 1):
        states.update(re.findall(r"steps: +(\d+)/2000", text))
    assert any(0 < int(n) < 2000 for n in states), states
    # The log files keep every byte: 2000 redraws each.
    for rank in range(2):
        log = (tmp_path / "log" / "latest" / ("rank_%d.device_%d.log" % (rank, rank))).read_bytes()
        assert log.count(b"\r") == 2000 and log.endswith(b"\ndone %d\n" % rank)


def test_a_flood_is_paced_within_iopub_limits_and_every_skipped_line_is_counted(
    kernel_name, tmp_path, rank_table, job_env
):
    nb, messages = run_waiting_cell(kernel_name, tmp_path, FLOOD, rank_table(2), job_env, timeout=120)
    lines = stream_lines(nb.cells[1])
    shown = [line for line in lines if re.match(r"\[rank \d\] rank \d flood line \d{6} of a long run$", line)]
    notices = [line for line in lines if "not shown here" in line]
    skipped = sum(int(re.search(r"(\d+) line\(s\) not shown here", line).group(1)) for line in notices)
    assert notices and skipped > 0  # it was a flood, and the display says so
    # Exactly every line: shown, or counted as not shown.
    assert len(shown) + skipped == 2 * FLOOD_LINES
    # Shown lines are whole and in each rank's order.
    for rank in range(2):
        mine = [line for line in shown if line.startswith("[rank %d]" % rank)]
        numbers = [int(re.search(r"line (\d{6})", line).group(1)) for line in mine]
        assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    # The log files have every line.
    for rank in range(2):
        log = (tmp_path / "log" / "latest" / ("rank_%d.device_%d.log" % (rank, rank))).read_bytes()
        assert log.count(b"\n") == FLOOD_LINES
    # Within the notebook server's limits (1 MB/s and 1000 messages/s,
    # averaged over 3 s windows) by half at least, and below them over any 1 s.
    sent = sorted((m.sent.timestamp(), m.wire_bytes) for m in messages if m.cell_index == 1 and m.sent is not None)
    assert len(sent) > 5

    def worst(seconds):
        most_bytes = most_messages = 0
        for i, (start, _) in enumerate(sent):
            window = [size for when, size in sent[i:] if when < start + seconds]
            most_bytes, most_messages = max(most_bytes, sum(window)), max(most_messages, len(window))
        return most_bytes / seconds, most_messages / seconds

    assert worst(3.0)[0] < 500_000 and worst(3.0)[1] < 100, worst(3.0)
    assert worst(1.0)[0] < 900_000 and worst(1.0)[1] < 200, worst(1.0)
    assert "IOPub data rate exceeded" not in cell_text(nb.cells[1])


def test_the_status_view_shows_every_rank_live_then_the_summary(kernel_name, tmp_path, rank_table, job_env):
    nb, messages = run_waiting_cell(kernel_name, tmp_path, READY_THEN_SLEEP, rank_table(3), job_env)
    updates = view_updates(messages, 1)
    assert len(updates) >= 3  # shown at the start, updated while running, final
    # An update that shows every rank running, its last line "ready" (the
    # ranks start a little apart: earlier updates show some of them only).
    live = [text for text in updates if "3 running" in text.splitlines()[0]
            and all(line.split()[3] == "running" and line.split()[-1] == "ready"
                    for line in text.splitlines()[2:5])]
    assert live, updates
    rows = [line.split() for line in live[-1].splitlines()[2:5]]
    assert [row[0] for row in rows] == ["0", "1", "2"]  # rank
    assert [row[1] for row in rows] == ["0", "1", "2"]  # device
    # At most two updates a second.
    times = [m.sent.timestamp() for m in messages if m.msg_type == "update_display_data" and m.cell_index == 1]
    assert all(b - a > 0.3 for a, b in zip(times, times[1:-1]))
    # The view in the saved notebook is the final summary.
    [view] = cell_displays(nb.cells[1])
    text = view["text/plain"].splitlines()
    assert "succeeded in" in text[0] and "3 rank(s) of 3" in text[0]
    assert text[1].split() == ["rank", "device", "pid", "status", "time", "last", "output"]
    for rank, line in enumerate(text[2:5]):
        fields = line.split()
        assert fields[0] == str(rank) and fields[3:5] == ["exited", "0"] and fields[-1] == "finished"
    assert text[5].startswith("logs: " + str(tmp_path / "log"))
    assert "<table" in view["text/html"] and "exited 0" in view["text/html"]


def test_a_job_started_without_waiting_keeps_its_output_in_its_starting_cell(
    kernel_name, tmp_path, rank_table, job_env
):
    call = launch_call("start_distributed_train", TICKING, rank_table(2), str(tmp_path / "log"), job_env,
                       output_notebook=True)
    nb = execute_notebook(
        [IMPORTS, "job = " + call, "time.sleep(2.5)\nprint('other work')", "print('waited:', job.wait())"],
        kernel_name, cwd=tmp_path,
    )
    assert [cell_errors(cell) for cell in nb.cells] == [[], [], [], []]
    # Nothing of the ranks in the cells that ran later...
    assert cell_text(nb.cells[2]) == "other work\n"
    assert not any(line.startswith("[rank") for line in stream_lines(nb.cells[3]))
    # ...their lines are in the starting cell's view, updated by display id.
    [view] = cell_displays(nb.cells[1])
    text = strip_ansi(view["text/plain"])
    assert "recent output:" in text
    for rank in range(2):
        assert "[rank %d] tick 7 of rank %d" % (rank, rank) in text
    assert "tick 7 of rank 1" in view["text/html"]
    # The waiting cell gets the outcome: a summary and where the logs are.
    [summary] = cell_displays(nb.cells[3])
    assert "succeeded in" in summary["text/plain"].splitlines()[0]
    assert stream_lines(nb.cells[3])[-2].startswith("[davincirun] logs of all 2 rank(s): ")
    assert stream_lines(nb.cells[3])[-1] == "waited: 0"
    assert processes_with_marker(job_env[MARKER_VARIABLE]) == []


def test_the_view_of_a_job_nobody_waits_for_becomes_its_summary(kernel_name, tmp_path, rank_table, job_env):
    call = launch_call("start_distributed_train", "print('quick')", rank_table(2), str(tmp_path / "log"), job_env,
                       output_notebook=True)
    # Nothing touches the job after the starting cell: the view alone shows the outcome.
    nb = execute_notebook([IMPORTS, "job = " + call, "time.sleep(2)"], kernel_name, cwd=tmp_path)
    [view] = cell_displays(nb.cells[1])
    lines = strip_ansi(view["text/plain"]).splitlines()
    assert "succeeded in" in lines[0]
    assert [line.split()[3:5] for line in lines[2:4]] == [["exited", "0"], ["exited", "0"]]
    assert "[rank 0] quick" in lines and "[rank 1] quick" in lines


def test_split_and_invalid_utf8_and_html_in_rank_output(kernel_name, tmp_path, rank_table, job_env):
    code = (
        "import os, sys, time\n"
        "out = sys.stdout.buffer\n"
        "out.write(b'price: 5 \\xe2\\x82'); out.flush(); time.sleep(0.3)\n"  # a euro sign, split
        "out.write(b'\\xac\\nbad byte: \\xff\\n'); out.flush()\n"
        "out.write(b'long:' + b'x' * 40000 + b'\\nafter the long line\\n')\n"  # longer than a display frame
        "out.write(b'<script>alert(1)</script>\\n')\n"
    )
    nb, _ = run_waiting_cell(kernel_name, tmp_path, code, rank_table(1), job_env)
    lines = stream_lines(nb.cells[1])
    assert "[rank 0] price: 5 \u20ac" in lines
    assert "[rank 0] bad byte: \ufffd" in lines
    assert "[rank 0] long:" + "x" * 40000 in lines and lines.index("[rank 0] after the long line") > 0
    [view] = cell_displays(nb.cells[1])
    # Rank output is text in the view's HTML, never markup.
    assert "<script>" not in view["text/html"] and "&lt;script&gt;alert(1)&lt;/script&gt;" in view["text/html"]


# Each rank floods 3000 lines, then says its last words.
BURST_THEN_FINAL = (
    "import os, sys\n"
    "rank = os.environ['RANK_ID']\n"
    "for i in range(3000):\n"
    "    sys.stdout.write('step %d of a burst of training output, rank %s\\n' % (i, rank))\n"
    "print('FINAL accuracy of rank %s: 0.97' % rank)\n"
)


def test_a_ranks_last_words_are_shown_after_a_burst(kernel_name, tmp_path, rank_table, job_env):
    nb, _ = run_waiting_cell(kernel_name, tmp_path, BURST_THEN_FINAL, rank_table(4), job_env)
    lines = stream_lines(nb.cells[1])
    for rank in range(4):
        # The newest lines win when the display cannot show them all.
        assert "[rank %d] FINAL accuracy of rank %d: 0.97" % (rank, rank) in lines
    [view] = cell_displays(nb.cells[1])
    rows = view["text/plain"].splitlines()[2:6]
    assert all(row.endswith("FINAL accuracy of rank %d: 0.97" % rank) for rank, row in enumerate(rows)), rows


def test_polling_in_the_starting_cell_then_waiting_elsewhere(kernel_name, tmp_path, rank_table, job_env):
    call = launch_call("start_distributed_train", TICKING, rank_table(2), str(tmp_path / "log"), job_env,
                       output_notebook=True)
    messages = []
    nb = execute_notebook(
        [IMPORTS, "job = " + call + "\nwhile job.poll() is None:\n    time.sleep(0.2)\nprint('polled')",
         "time.sleep(1)", "print('waited:', job.wait())"],
        kernel_name, cwd=tmp_path, iopub=messages,
    )
    assert [cell_errors(cell) for cell in nb.cells] == [[], [], [], []]
    # While the starting cell polled, its view followed the ranks.
    assert any(re.search(r"tick [0-6] of rank", text) and "2 running" in text for text in view_updates(messages, 1))
    # The lines went to the starting cell's view after it ended, not to the waiting cell.
    [view] = cell_displays(nb.cells[1])
    assert "succeeded in" in view["text/plain"] and "[rank 1] tick 7 of rank 1" in view["text/plain"]
    assert not any(line.startswith("[rank") for line in stream_lines(nb.cells[3]))
    [summary] = cell_displays(nb.cells[3])
    assert "succeeded in" in summary["text/plain"]
    assert stream_lines(nb.cells[3])[-2:] == [stream_lines(nb.cells[3])[-2], "waited: 0"]
    assert stream_lines(nb.cells[3])[-2].startswith("[davincirun] logs of all 2 rank(s): ")


def test_the_view_follows_a_job_while_its_starting_cell_is_busy(kernel_name, tmp_path, rank_table, job_env):
    fails = "import os, sys, time\nif os.environ['RANK_ID'] == '1':\n    sys.exit(3)\ntime.sleep(30)\n"
    call = launch_call("start_distributed_train", fails, rank_table(2), str(tmp_path / "log"), job_env,
                       output_notebook=True, grace_period=1)
    messages = []
    nb = execute_notebook([IMPORTS, "job = " + call + "\ntime.sleep(2.5)"], kernel_name, cwd=tmp_path,
                          iopub=messages)
    assert cell_errors(nb.cells[1]) == []
    updates = view_updates(messages, 1)
    assert any("first failure: rank 1 (exit code 3)" in text for text in updates), updates[-1]


# Each rank prints a line naming the wall time every 0.25 s with plain
# print() (no flush): a training loop's loss line.
TICKS = (
    "import time\n"
    "for i in range(8):\n"
    "    print('tick %.6f' % time.time())\n"
    "    time.sleep(0.25)\n"
)


def test_plain_print_shows_in_the_cell_while_the_rank_runs(kernel_name, tmp_path, rank_table, job_env):
    """In a kernel someone watches: the ranks get PYTHONUNBUFFERED=1 unless
    set, so a line printed without flush reaches the cell at once, not when
    8 KiB have gathered or the rank ends."""
    call = launch_call("start_and_wait_distributed_train", TICKS, rank_table(2), str(tmp_path / "log"), job_env)
    messages = []
    # The kernel inherits this process's environment: unset, the rule decides.
    nb = execute_notebook([IMPORTS, "import os; os.environ.pop('PYTHONUNBUFFERED', None)\n" + call], kernel_name,
                          cwd=tmp_path, iopub=messages)
    assert cell_errors(nb.cells[1]) == []
    delays = []
    for m in messages:
        if m.msg_type == "stream" and m.cell_index == 1:
            for stamp in re.findall(r"tick (\d+\.\d+)", strip_ansi(m.text)):
                delays.append(m.received_wall - float(stamp))
    assert len(delays) == 16
    delays.sort()
    # The view takes lines every 0.1 s: half of them within that, none late
    # (a buffered rank would show its first line 1.75 s late, at its end).
    assert delays[len(delays) // 2] < 0.15, delays
    assert delays[-1] < 0.6, delays
