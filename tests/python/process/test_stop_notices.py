"""After a stop request the user is told what happens: how many ranks get
SIGTERM, when SIGKILL follows and how to have it at once, then which ranks
are still running (rank ids and pids). On a real terminal (the CLI and
Ctrl-C) and through the Python API (terminate())."""

import os
import re
import shutil
import sys
import time

import pytest
from conftest import MARKER_VARIABLE
from pty_support import PtyProcess

import davincirunsdk

DAVINCIRUN = shutil.which("davincirun")

# Ranks that ignore SIGTERM: only SIGKILL ends them.
STUBBORN = ("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('ready', flush=True)\ntime.sleep(120)\n")


@pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH (pip install . first)")
def test_ctrl_c_on_a_terminal_says_who_still_runs_and_when_sigkill_comes(tmp_path, rank_table, job_env):
    argv = [DAVINCIRUN, "-v", "--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE]),
            "--grace-period", "30", "-r", rank_table(2), sys.executable, "-c", STUBBORN]
    with PtyProcess(argv, cwd=tmp_path, columns=200) as proc:
        while proc.output.count(b" ready\r\n") < 2:
            proc.read_until(b" ready\r\n")
        text = proc.output.decode()
        pids = {int(rank): int(pid) for rank, pid in re.findall(r"rank (\d) \(pid (\d+)\): physical device", text)}
        assert sorted(pids) == [0, 1], text

        before = len(proc.output)
        proc.interrupt()
        start = time.monotonic()
        proc.read_until(b"SIGKILL in 30 s, or at once on a second Ctrl-C\r\n", timeout=10, after=before)
        # Without colours and the status line's erase-line codes: the text a terminal shows.
        notice = re.sub(r"\x1b\[[0-9;]*[mK]", "", proc.output.decode())
        assert "[davincirun] stop requested: stopping 2 rank(s) (SIGTERM); SIGKILL in 30 s, " \
               "or at once on a second Ctrl-C" in notice
        # Told once, 3 s later: the ranks that outlive SIGTERM, by rank and pid.
        proc.read_until(re.compile(rb"still running[^\n]*\n"), timeout=10, after=before)
        took = time.monotonic() - start
        report = re.sub(r"\x1b\[[0-9;]*[mK]", "", proc.output.decode()).splitlines()
        [still] = [line for line in report if "still running" in line]
        expected = (r"\[davincirun\] still running 3 s after SIGTERM: rank 0 \(pid %d\), rank 1 \(pid %d\); "
                    r"SIGKILL in 2[67](\.\d)? s, or at once on a second Ctrl-C" % (pids[0], pids[1]))
        assert re.fullmatch(expected, still), still
        assert 2.5 < took < 10, took

        proc.interrupt()  # the second Ctrl-C: SIGKILL now, not in 27 s
        code = proc.wait(timeout=20)
        assert time.monotonic() - start < 15
    assert code == 130
    assert "stop requested again: killing every rank now" in proc.output.decode()
    assert proc.output.decode().count("still running") == 1


def test_terminate_says_who_still_runs_and_when_sigkill_comes(tmp_path, rank_table, job_env, capsys):
    job = davincirunsdk.start_distributed_train([sys.executable, "-c", STUBBORN], rank_table=rank_table(2),
                                                env=job_env, log_dir=str(tmp_path / "log"), grace_period=4.5,
                                                output_notebook=True)
    logs = [os.path.join(job.run_dir, "rank_%d.device_%d.log" % (rank, rank)) for rank in range(2)]
    deadline = time.monotonic() + 30
    while not all(os.path.exists(log) and "ready" in open(log).read() for log in logs):
        assert time.monotonic() < deadline, "the ranks did not start"
        time.sleep(0.05)
    job.terminate()
    start = time.monotonic()
    assert job.wait() == 130
    took = time.monotonic() - start
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    assert "[davincirun] stop requested: stopping 2 rank(s) (SIGTERM); SIGKILL in 4.5 s, " \
           "or at once on a second Ctrl-C\n" in out
    assert re.search(r"\[davincirun\] still running 3 s after SIGTERM: rank 0 \(pid %d\), rank 1 \(pid %d\); "
                     r"SIGKILL in 1\.[2-5] s, or at once on a second Ctrl-C\n" % tuple(job.pids), out), out
    assert "[davincirun] grace period of 4.5 s is over: killing the ranks still running: rank 0 (pid %d), " \
           "rank 1 (pid %d)\n" % tuple(job.pids) in out
    assert 4 < took < 15
    assert all(rank.killed_by_launcher for rank in job.result.ranks)
