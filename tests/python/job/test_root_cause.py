"""The root cause of a failed rank reaches people: in DistributedRuntimeError,
in the CLI's report and in the status view, even when that rank's output
was not shown live and its log ends with many more lines. Real jobs, real
MindSpore failures (CPU), no mocks."""

import os
import re
import shutil
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import MARKER_VARIABLE, REPO

import davincirunsdk
from davincirunsdk import DistributedRuntimeError, _core
from davincirunsdk._job_view import JobStatus

DATA = os.path.join(REPO, "tests", "data", "failure_logs")

# Rank 1 feeds nn.Dense(16, 4) a batch of 10 features; rank 0 waits. At
# exit rank 1 prints 30 more lines, so its last 20 lines hold no error.
SHAPE_ERROR = textwrap.dedent("""\
    import atexit, os, time
    if os.environ["RANK_ID"] != "1":
        time.sleep(120)
        raise SystemExit(0)
    import numpy as np
    from mindspore import nn, Tensor
    atexit.register(lambda: print("\\n".join("shutting down %d" % i for i in range(30)), flush=True))
    net = nn.Dense(16, 4)
    print("rank 1: forward pass", flush=True)
    print(net(Tensor(np.ones((8, 10), np.float32))).asnumpy())
    """)
SHAPE_MESSAGE = "ValueError: For 'MatMul' the input dimensions must be equal, but got 'x1_col': 10 and 'x2_row': 16."

INIT = "from mindspore.communication import init\nprint('init', flush=True)\ninit()\n"
INIT_MESSAGE = "RuntimeError: Maybe you are trying to call 'mindspore.communication.init()' without using 'mpirun'"


def rank_pid(cli_stderr, rank):
    """The pid of `rank` in the CLI's stderr ("rank 1 (pid 123): ...")."""
    match = re.search(r"rank %d \(pid (\d+)\)" % rank, cli_stderr)
    assert match, cli_stderr
    return int(match.group(1))


def write_script(tmp_path, code):
    path = tmp_path / "train.py"
    path.write_text(code)
    return str(path)


@pytest.mark.mindspore
def test_a_mindspore_error_of_a_rank_not_shown_is_in_the_exception(tmp_path, rank_table, job_env, mindspore_python,
                                                                      capsys):
    start = time.monotonic()
    with pytest.raises(DistributedRuntimeError) as info:
        davincirunsdk.start_and_wait_distributed_train(
            [mindspore_python, write_script(tmp_path, SHAPE_ERROR)], rank_table=rank_table(2), env=job_env,
            log_dir=str(tmp_path / "log"), output_notebook=False, ranks_to_show=[0])
    assert time.monotonic() - start < 60
    error = info.value
    assert error.rank == 1 and error.exit_code == 1
    live = capsys.readouterr().out
    assert "forward pass" not in live and "For 'MatMul'" not in live  # rank 1 was not shown live
    message = str(error)
    assert "log: %s\nroot cause, from its log" % error.log_file in message
    assert SHAPE_MESSAGE in message
    assert "Traceback (most recent call last):\n" in message
    assert "C++ Call Stack" not in message
    assert "shutting down 29\n" in message  # and the log's last lines
    assert SHAPE_MESSAGE not in error.log_tail  # what the last lines alone miss
    assert error.root_cause is not None and SHAPE_MESSAGE in error.root_cause
    assert error.root_cause in message
    assert error.root_cause_exception == SHAPE_MESSAGE
    assert error.root_cause_error_code is None
    # The other rank was stopped.
    assert "rank 0 (pid %d): stopped by the launcher (SIGTERM)" % error.result.ranks[0].pid in message


@pytest.mark.mindspore
def test_the_printed_status_view_shows_the_root_cause_of_a_rank_not_shown(tmp_path, rank_table, job_env,
                                                                           mindspore_python, capsys):
    # output_notebook=True outside a kernel: the status view, printed as text when the job ends.
    code = davincirunsdk.start_and_wait_distributed_train(
        [mindspore_python, write_script(tmp_path, SHAPE_ERROR)], rank_table=rank_table(2), env=job_env,
        log_dir=str(tmp_path / "log"), output_notebook=True, ranks_to_show=[0], raise_exception=False)
    assert code == 1
    out = capsys.readouterr().out
    summary = out[out.index("davincirun job "):].splitlines()
    assert summary[0].endswith("first failure: rank 1 (exit code 1)")
    assert summary[3].split()[:4] == ["1", "1", summary[3].split()[2], "exit"]
    assert summary[3].endswith(SHAPE_MESSAGE)  # its exception, not its last line ("shutting down 29")
    assert summary[4] == "root cause (rank 1): " + SHAPE_MESSAGE
    assert summary[5].startswith("logs: ")


@pytest.mark.mindspore
def test_the_cli_report_holds_the_root_cause(tmp_path, rank_table, job_env, mindspore_python):
    davincirun = shutil.which("davincirun")
    if davincirun is None:
        pytest.skip("davincirun is not on PATH")
    proc = subprocess.run(
        [davincirun, "--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE]), "-r", rank_table(2),
         "--ranks-to-show", "0", mindspore_python, write_script(tmp_path, SHAPE_ERROR)],
        cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=90,
        universal_newlines=True)
    assert proc.returncode == 1, proc.stderr
    assert "For 'MatMul'" not in proc.stdout
    report = proc.stderr[proc.stderr.index("\nrank 1 (pid %d) failed" % rank_pid(proc.stderr, 1)) + 1:]
    assert "\nroot cause, from its log" in report
    assert SHAPE_MESSAGE + "\n" in report
    assert "shutting down 29\n" in report
    assert "C++ Call Stack" not in report
    assert report.splitlines()[1].startswith("log: ") and report.splitlines()[1].endswith(".log")


@pytest.mark.mindspore
def test_mindspore_init_failing_in_rank_table_mode_shows_its_message(tmp_path, rank_table, job_env,
                                                                       mindspore_python):
    start = time.monotonic()
    with pytest.raises(DistributedRuntimeError) as info:
        davincirunsdk.start_and_wait_distributed_train(
            [mindspore_python, write_script(tmp_path, INIT)], rank_table=rank_table(2), env=job_env,
            log_dir=str(tmp_path / "log"), output_notebook=False)
    assert time.monotonic() - start < 60  # it fails fast: no HCCL timeout to wait for
    error = info.value
    assert INIT_MESSAGE in str(error)
    assert error.root_cause_exception.startswith(INIT_MESSAGE)
    assert "collective_manager.cc" in str(error)  # the log's last line


def test_the_status_view_shows_the_root_cause_of_a_rank_not_shown(tmp_path, rank_table, job_env):
    code = textwrap.dedent("""\
        import atexit, os, sys, time
        if os.environ["RANK_ID"] != "1":
            time.sleep(60)
            sys.exit(0)
        def load(name):
            raise KeyError(name)
        print("EI0006: Getting socket timed out.")
        print("    Solution: check the other ranks")
        atexit.register(lambda: print("\\n".join("cleaning up %d" % i for i in range(30))))
        load("lr")
        """)
    job = davincirunsdk.start_distributed_train(
        [sys.executable, write_script(tmp_path, code)], rank_table=rank_table(3), env=job_env,
        log_dir=str(tmp_path / "log"), output_notebook=False, ranks_to_show=[0])
    assert job.wait(raise_exception=False) == 1
    status = JobStatus(job.plan, job.pids, job.run_dir, shown=[0])
    status.finish(job.result, lambda path: _core.read_log_tail(path, 1, 4096), _core.root_cause)
    text = status.text().splitlines()
    assert text[3].endswith("KeyError: 'lr'")  # rank 1's row: its exception, not "cleaning up 29"
    assert "stopped" in text[4]
    assert text[5] == "root cause (rank 1): KeyError: 'lr'"
    assert text[6] == "  EI0006: Getting socket timed out."
    assert text[7] == "logs: " + job.run_dir
    html = status.html()
    assert "root cause (rank 1): KeyError: &#x27;lr&#x27;</div>" in html
    assert "  EI0006: Getting socket timed out.</div>" in html


def test_a_failure_without_a_traceback_keeps_the_last_lines(tmp_path, rank_table, job_env):
    code = "import os, sys\nfor i in range(25): print('line', i)\nsys.exit(int(os.environ['RANK_ID']) + 2)\n"
    with pytest.raises(DistributedRuntimeError) as info:
        davincirunsdk.start_and_wait_distributed_train(
            [sys.executable, "-c", code], rank_table=rank_table(1), env=job_env, log_dir=str(tmp_path / "log"),
            output_notebook=False)
    error = info.value
    assert error.root_cause is None and error.root_cause_exception is None
    assert "last lines of its log:\nline 5\n" in str(error) and "line 24" in str(error)
    assert "line 4\n" not in str(error)  # 20 lines


@pytest.mark.parametrize("name, exception", [
    ("mindspore_matmul_shape.log",
     "RuntimeError: For 'MatMulExt' op, shape1[-1] must be equal to shape2[-2], but got 3 and 4."),
    ("mindspore_dense_shape.log", SHAPE_MESSAGE),
    ("mindspore_init_rank_table.log", INIT_MESSAGE),
])
def test_recorded_mindspore_failures(name, exception):
    cause = _core.root_cause(os.path.join(DATA, name))
    assert cause.found and cause.exception.startswith(exception) and cause.error_code == ""
    assert cause.text.startswith("Traceback (most recent call last):\n")
    assert "- C++ Call Stack:" in cause.text  # within the last 5 lines here: the log ends with it
    with open(os.path.join(DATA, name), "rb") as f:
        assert _core.find_root_cause(f.read()).text == cause.text
