"""The Python API inside real notebooks: real kernels (ipykernel 6 and 7, from
scripts/notebook_env.sh) run by nbclient, the ranks started by the kernel's
own interpreter."""

import os
import re
import time

import pytest
from conftest import MARKER_VARIABLE, processes_with_marker
from notebook_support import (
    IMPORTS,
    cell_displays,
    cell_errors,
    cell_text,
    execute_notebook,
    iopub_stats,
    kernel_python,
    launch_call,
)

# Real Jupyter kernels (scripts/notebook_env.sh): run with -m notebook, leave out with -m "not notebook".
pytestmark = pytest.mark.notebook

# Each rank prints three lines and the interpreter it runs.
THREE_LINES = (
    "import os, sys\n"
    "rank = os.environ['RANK_ID']\n"
    "print('interpreter', sys.executable)\n"
    "for i in range(3):\n"
    "    print('line %d of rank %s' % (i, rank))\n"
)

# Rank 1 prints its last words and exits 3; the others sleep until stopped.
RANK1_FAILS = (
    "import os, sys, time\n"
    "if os.environ['RANK_ID'] == '1':\n"
    "    time.sleep(0.3)\n"
    "    for i in range(3):\n"
    "        print('last words %d' % i)\n"
    "    sys.exit(3)\n"
    "time.sleep(120)\n"
)


def library_frames(traceback):
    """The functions of davincirunsdk an IPython traceback shows a frame of
    ("File .../davincirunsdk/launch.py:12, in f(...)"; before IPython 8
    ".../davincirunsdk/launch.py in f(...)")."""
    return re.findall(r"^(?:File )?\S*/davincirunsdk/\S+\.py(?::\d+)?,? in (\w+)", traceback, re.MULTILINE)


def assert_no_process_left(marker, within=5.0):
    deadline = time.monotonic() + within
    left = processes_with_marker(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = processes_with_marker(marker)
    assert left == [], "processes of the notebook's job still alive: %s" % left


def test_rank_output_lands_in_the_calling_cell_only(kernel_name, tmp_path, rank_table, job_env):
    call = launch_call("start_and_wait_distributed_train", THREE_LINES, rank_table(2), str(tmp_path / "log"),
                       job_env, output_notebook=True)
    messages = []
    nb = execute_notebook(
        [IMPORTS, "code = " + call + "\nprint('returned', code)", "print('a later cell')"],
        kernel_name, cwd=tmp_path, iopub=messages,
    )
    assert [cell_errors(cell) for cell in nb.cells] == [[], [], []]
    raw = cell_text(nb.cells[1], displays=False)
    lines = cell_text(nb.cells[1], displays=False, ansi=False).splitlines()
    # Each rank's prefix in its colour (front ends render ANSI colours in streams).
    assert "\x1b[34m[rank 0]\x1b[0m line 0 of rank 0\n" in raw
    assert "\x1b[35m[rank 1]\x1b[0m line 0 of rank 1\n" in raw
    python = kernel_python(kernel_name)
    for rank in range(2):
        # The ranks run the kernel's interpreter (its venv), as sys.executable says.
        assert "[rank %d] interpreter %s" % (rank, python) in lines
        mine = [line for line in lines if line.startswith("[rank %d] line " % rank)]
        assert mine == ["[rank %d] line %d of rank %d" % (rank, i, rank) for i in range(3)]
    assert lines[-1] == "returned 0"
    assert lines[-2].startswith("[davincirun] logs of all 2 rank(s): ")  # the pointer after the run
    # The launcher's one note comes first when the kernel (which has this
    # process's environment) has no OMP_NUM_THREADS: two ranks get 1 each.
    notes = [line for line in lines if line.startswith("[davincirun] OMP_NUM_THREADS=1 for each rank")]
    assert notes == ([] if "OMP_NUM_THREADS" in os.environ else lines[:1])
    assert len(lines) == len(notes) + 2 * 4 + 2
    assert cell_text(nb.cells[2]) == "a later cell\n"
    assert "[rank" not in cell_text(nb.cells[0])

    # The same lines, as the kernel sent them: stream messages of cell 1,
    # every one of them shown in that cell.
    streams = [m for m in messages if m.msg_type == "stream" and m.cell_index == 1]
    assert streams and all(m.delivered for m in streams)
    assert "".join(m.text for m in streams) == cell_text(nb.cells[1], streams=("stdout",), displays=False)
    stats = iopub_stats(messages, cell_index=1)
    assert stats["count"] == len(streams) and stats["wire_bytes"] > stats["text_bytes"] > 0
    assert processes_with_marker(job_env[MARKER_VARIABLE]) == []


def test_failing_rank_raises_in_its_cell_and_the_next_cell_runs(kernel_name, tmp_path, rank_table, job_env):
    call = launch_call("start_and_wait_distributed_train", RANK1_FAILS, rank_table(2), str(tmp_path / "log"),
                       job_env, output_notebook=True)
    nb = execute_notebook([IMPORTS, call, "print('still alive')"], kernel_name, cwd=tmp_path, allow_errors=True)
    assert cell_errors(nb.cells[0]) == []
    [(ename, evalue, traceback)] = cell_errors(nb.cells[1])
    assert ename == "DistributedRuntimeError"
    assert "rank 1" in evalue and "exit code 3" in evalue
    assert "rank_1.device_1.log" in evalue
    assert all("last words %d" % i in evalue for i in range(3))  # the end of its log
    assert "DistributedRuntimeError" in traceback and "last words 2" in traceback
    # The traceback: the cell's line, the function it called, then the
    # message; none of the library's inner frames and their source lines.
    assert "----> 1 start_and_wait_distributed_train(" in traceback
    assert library_frames(traceback) == ["start_and_wait_distributed_train"], traceback
    assert traceback.rstrip().endswith(evalue.rstrip().splitlines()[-1])
    # Its live output came first, in the same cell, and the status view says what happened.
    assert "[rank 1] last words 2" in cell_text(nb.cells[1], displays=False, ansi=False).splitlines()
    [view] = cell_displays(nb.cells[1])
    headline = view["text/plain"].splitlines()[0]
    assert "failed" in headline and "first failure: rank 1 (exit code 3)" in headline
    assert "first failure: rank 1 (exit code 3)" in view["text/html"]
    assert cell_errors(nb.cells[2]) == [] and cell_text(nb.cells[2]) == "still alive\n"
    assert processes_with_marker(job_env[MARKER_VARIABLE]) == []


def test_shutting_the_kernel_down_stops_a_job_nobody_waited_for(kernel_name, tmp_path, rank_table, job_env):
    sleeper = "import time\nprint('up', flush=True)\ntime.sleep(120)\n"
    call = launch_call("start_distributed_train", sleeper, rank_table(2), str(tmp_path / "log"), job_env,
                       output_notebook=True)
    nb = execute_notebook(
        [IMPORTS, "job = " + call,
         "time.sleep(0.2)\nprint(job.poll(), all(os.path.exists('/proc/%d' % pid) for pid in job.pids))"],
        kernel_name, cwd=tmp_path,
    )
    assert cell_text(nb.cells[2]) == "None True\n"  # the ranks ran while the kernel did
    # Nothing streamed anywhere: the starting cell shows the job in its status view.
    assert "[rank" not in "".join(cell_text(cell, displays=False) for cell in nb.cells)
    [view] = cell_displays(nb.cells[1])
    assert "2 running" in view["text/plain"].splitlines()[0]
    assert_no_process_left(job_env[MARKER_VARIABLE])


# Cell 1 starts a thread that prints 1 s later, while cell 2 runs (2.5 s).
THREAD_CELLS = [
    "import ipykernel\nprint(ipykernel.version_info[0])",
    "import threading, time\n"
    "def later():\n"
    "    time.sleep(1)\n"
    "    print('from the thread', flush=True)\n"
    "threading.Thread(target=later).start()\n"
    "print('cell 1 done')",
    "time.sleep(2.5)\nprint('cell 2 done')",
]


def test_where_a_background_threads_print_goes(kernel_name, tmp_path):
    """What the notebook work builds on: a print from a thread that a cell
    started, made while a later cell runs. ipykernel 6 (6.31 here; it patches
    threading.Thread to remember which request a thread was started under)
    sends it as output of the cell that started the thread, which nbclient,
    done with that cell, drops; ipykernel 7 (a context variable, which a new
    thread does not inherit) sends it as output of the cell running then."""
    messages = []
    nb = execute_notebook(THREAD_CELLS, kernel_name, cwd=tmp_path, iopub=messages)
    major = int(cell_text(nb.cells[0]))
    assert major == int(kernel_name[-1])
    [printed] = [m for m in messages if m.msg_type == "stream" and "from the thread" in m.text]
    if major == 6:
        assert (printed.cell_index, printed.delivered) == (1, False)
        assert cell_text(nb.cells[1]) == "cell 1 done\n" and cell_text(nb.cells[2]) == "cell 2 done\n"
    else:
        assert (printed.cell_index, printed.delivered) == (2, True)
        assert cell_text(nb.cells[1]) == "cell 1 done\n"
        assert cell_text(nb.cells[2]) == "from the thread\ncell 2 done\n"


def test_a_dropped_handle_runs_on_until_the_kernel_shuts_down(kernel_name, tmp_path, rank_table, job_env):
    """0.1.x's `start_distributed_train(cmd)` without keeping the result: the
    job runs on (one warning, in that cell) and running_jobs() finds it in a
    later cell; shutting the kernel down stops it."""
    sleeper = "import time\nprint('up', flush=True)\ntime.sleep(120)\n"
    call = launch_call("start_distributed_train", sleeper, rank_table(2), str(tmp_path / "log"), job_env,
                       output_notebook=True)
    nb = execute_notebook(
        [IMPORTS + "\nfrom davincirunsdk import running_jobs",
         call + ";",  # the `;` keeps the handle out of Out[]: it is dropped at the end of the cell
         "time.sleep(0.5)\njobs = running_jobs()\n"
         "print(len(jobs), jobs[0].poll(), all(os.path.exists('/proc/%d' % pid) for pid in jobs[0].pids))"],
        kernel_name, cwd=tmp_path,
    )
    warnings = [line for line in cell_text(nb.cells[1], displays=False).splitlines() if "RuntimeWarning" in line]
    assert len(warnings) == 1 and "keeps running though its handle was dropped" in warnings[0]
    assert cell_text(nb.cells[2]) == "1 None True\n"
    assert_no_process_left(job_env[MARKER_VARIABLE])


def test_a_foreign_python_gets_one_warning_in_a_kernel(kernel_name, tmp_path, rank_table, job_env):
    """`python` in the ranks' PATH is not the kernel's interpreter (here a
    link to the kernel's base interpreter, in another directory: another
    environment): one warning line; sys.executable: none."""
    bin_dir = tmp_path / "other-bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(os.path.realpath(kernel_python(kernel_name)))
    env = dict(job_env, PATH="%s:/usr/bin:/bin" % bin_dir)
    foreign = "start_and_wait_distributed_train(['python', '-c', 'print(1)'], rank_table=%r, log_dir=%r, env=%r)" % (
        rank_table(1), str(tmp_path / "log"), env)
    own = launch_call("start_and_wait_distributed_train", "print(1)", rank_table(1), str(tmp_path / "log"), env)
    nb = execute_notebook([IMPORTS, foreign, own], kernel_name, cwd=tmp_path)
    [warning] = [line for line in cell_text(nb.cells[1], displays=False).splitlines() if "Warning" in line]
    assert "UserWarning: the ranks run %s (python), not this kernel's Python %s" % (
        bin_dir / "python", kernel_python(kernel_name)) in warning
    assert "Warning" not in cell_text(nb.cells[2], displays=False)


# Rank 1 fails in the first attempt; in the second every rank says so, waits 1.5 s and exits 0.
FAILS_ONCE = (
    "import os, sys, time\n"
    "if os.environ['DAVINCIRUN_RESTART_COUNT'] == '0':\n"
    "    if os.environ['RANK_ID'] == '1':\n"
    "        time.sleep(0.3)\n"
    "        raise RuntimeError('link flap')\n"
    "    time.sleep(120)\n"
    "print('second attempt, pid', os.getpid(), flush=True)\n"
    "time.sleep(1.5)\n"
)


def test_a_restarting_job_says_so_and_its_view_follows_the_new_attempt(kernel_name, tmp_path, rank_table, job_env):
    call = launch_call("start_and_wait_distributed_train", FAILS_ONCE, rank_table(2), str(tmp_path / "log"),
                       job_env, output_notebook=True, max_restarts=1, restart_delay=0.2)
    messages = []
    nb = execute_notebook([IMPORTS, "code = " + call + "\nprint('returned', code)"], kernel_name, cwd=tmp_path,
                          iopub=messages)
    assert cell_errors(nb.cells[1]) == []
    lines = cell_text(nb.cells[1], displays=False, ansi=False).splitlines()
    assert "returned 0" in lines
    said = [line for line in lines if line.startswith("[davincirun] attempt 1 of 2: rank 1 (pid ")]
    assert said and said[0].endswith("failed with exit code 1 (RuntimeError: link flap); restarting the job in "
                                     "0.2 s (attempt 2 of 2)"), lines
    new_pids = sorted(int(line.rsplit(" ", 1)[1]) for line in lines if "second attempt, pid" in line)
    assert len(new_pids) == 2, lines
    # While the second attempt ran, the view showed it: its number, both ranks running, their new pids.
    live = [m.content["data"]["text/plain"] for m in messages
            if m.msg_type == "update_display_data" and m.cell_index == 1]
    during = [text for text in live if "2 running, attempt 2 of 2" in text.splitlines()[0]]
    assert during, live[-3:]
    assert all(str(pid) in during[-1] for pid in new_pids), during[-1]
    [view] = cell_displays(nb.cells[1])
    assert re.match(r"davincirun job \S+: 2 rank\(s\) of 2 on server 127\.0\.0\.1, succeeded in [\d.]+ s, "
                    r"attempt 2 of 2$", view["text/plain"].splitlines()[0]), view["text/plain"]
    assert processes_with_marker(job_env[MARKER_VARIABLE]) == []
