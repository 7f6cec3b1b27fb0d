"""Every byte a rank writes reaches its log file, checked against the sha256
digest the rank itself computed of what it wrote (rank_writer.py): ranks that
crash or are SIGKILLed right after writing, a flood from every rank at once,
a 100 MiB line (with the supervisor's peak memory), bytes that are not text."""

import os
import signal
import subprocess
import sys
import time

import pytest
from rank_writer import (
    DAVINCIRUN,
    MiB,
    assert_log_is_what_the_rank_wrote,
    assert_stopped_rank_log,
    cli,
    console_by_rank,
    peak_rss_kib,
    rank_logs,
    read_bytes,
    rejoin,
    wait_for_side,
)

from davincirunsdk import (
    DistributedRuntimeError,
    start_and_wait_distributed_train,
    start_distributed_train,
)

needs_cli = pytest.mark.skipif(DAVINCIRUN is None, reason="the davincirun command is not on PATH")


# ---------------------------------------------------------------- crashes


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGABRT], ids=["SIGSEGV", "SIGABRT"])
def test_rank_crashing_right_after_writing_loses_nothing(tmp_path, rank_table, job_env, child, capfd, sig):
    argv, side = child
    with pytest.raises(DistributedRuntimeError) as info:
        start_and_wait_distributed_train(
            argv + ["crash", side, str(3 * MiB), str(int(sig))], log_dir=str(tmp_path / "log"),
            rank_table=rank_table(2), env=job_env, output_notebook=True, wait_timeout=0,
        )
    error = info.value
    assert error.rank == 0 and error.signal == sig
    logs = rank_logs(os.path.dirname(error.log_file))
    assert_log_is_what_the_rank_wrote(logs[0], side, 0)
    assert_stopped_rank_log(logs[1], side, 1, error.result.ranks[1])
    assert error.result.ranks[0].output_bytes == 3 * MiB
    # The console (sys.stdout, captured) got every line, whole, in order.
    shown = console_by_rank(capfd.readouterr().out.encode())
    assert rejoin(shown[0]) == read_bytes(logs[0])


def test_rank_sigkilled_after_writing_loses_nothing(tmp_path, rank_table, job_env, child):
    argv, side = child
    job = start_distributed_train(argv + ["hold", side, str(2 * MiB)], log_dir=str(tmp_path / "log"),
                                  rank_table=rank_table(2), env=job_env, output_notebook=False, wait_timeout=0)
    # Its own record says everything was written (into the pipe): kill it now.
    wait_for_side(side, 0)
    os.kill(job.pids[0], signal.SIGKILL)
    with pytest.raises(DistributedRuntimeError) as info:
        job.wait()
    assert info.value.rank == 0 and info.value.signal == signal.SIGKILL
    logs = rank_logs(job.run_dir)
    assert_log_is_what_the_rank_wrote(logs[0], side, 0)
    assert_stopped_rank_log(logs[1], side, 1, job.result.ranks[1])


# ---------------------------------------------------------------- floods


@needs_cli
def test_flood_from_every_rank_with_console_to_a_file(tmp_path, rank_table, job_env, child):
    argv, side = child
    ranks, size = 8, 16 * MiB
    with open(tmp_path / "console.out", "wb") as stdout:
        proc = subprocess.run(cli(["-r", rank_table(ranks), "-l", str(tmp_path / "log")] + argv
                                  + ["flood", side, str(size)], job_env),
                              stdout=stdout, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    logs = rank_logs(str(tmp_path / "log" / "latest"))
    shown = console_by_rank(read_bytes(tmp_path / "console.out"))
    for rank in range(ranks):
        assert_log_is_what_the_rank_wrote(logs[rank], side, rank)
        assert os.path.getsize(logs[rank]) == size
        # A regular file as console is written directly: every line, exact.
        assert rejoin(shown[rank]) == read_bytes(logs[rank])


def assert_lines_in_order(shown, log_bytes):
    """Each shown line is a whole line of the log, in the log's order (a
    console that fell behind may skip lines, never cut or mix them)."""
    expected = iter(log_bytes.split(b"\n"))
    for continuation, text in shown:
        assert not continuation
        assert any(text == line for line in expected), "a console line is not a line of the log, in order"


@needs_cli
def test_flood_from_every_rank_with_console_to_a_pipe(tmp_path, rank_table, job_env, child):
    argv, side = child
    ranks, size = 8, 4 * MiB
    proc = subprocess.run(cli(["-r", rank_table(ranks), "-l", str(tmp_path / "log")] + argv
                              + ["flood", side, str(size)], job_env),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    logs = rank_logs(str(tmp_path / "log" / "latest"))
    shown = console_by_rank(proc.stdout)
    for rank in range(ranks):
        assert_log_is_what_the_rank_wrote(logs[rank], side, rank)
        assert_lines_in_order(shown[rank], read_bytes(logs[rank]))
    if sum(len(shown[r]) for r in range(ranks)) < sum(read_bytes(logs[r]).count(b"\n") for r in range(ranks)):
        assert b"line(s) not shown here" in proc.stderr


def test_flood_through_the_python_console(tmp_path, rank_table, job_env, child, capfd):
    argv, side = child
    ranks, size = 4, 4 * MiB
    start_and_wait_distributed_train(argv + ["flood", side, str(size)], log_dir=str(tmp_path / "log"),
                                     rank_table=rank_table(ranks), env=job_env, output_notebook=True, wait_timeout=0)
    out = capfd.readouterr().out.encode()
    logs = rank_logs(str(tmp_path / "log" / "latest"))
    shown = console_by_rank(out)
    for rank in range(ranks):
        assert_log_is_what_the_rank_wrote(logs[rank], side, rank)
        assert_lines_in_order(shown[rank], read_bytes(logs[rank]))
        assert shown[rank], "nothing of rank %d was shown" % rank  # its newest lines at least


# ---------------------------------------------------------------- one 100 MiB line

LONG_LINE = 100 * MiB
# What log_streamer.hpp and console_sink.hpp document as the supervisor's
# working memory: one partial line (64 KiB) per rank, a 256 KiB read and the
# block of prefixed lines made from it, a 4 MiB console queue; plus room for
# the program itself (its libraries, stacks, the allocator's slack). Far
# below the line: proof that it is never held whole.
SUPERVISOR_RSS_BOUND_KIB = (64 + 2 * 256 + 4096) + 24 * 1024


def long_line_job_checks(log_path, side, console_bytes, supervisor_peak_kib, label):
    assert_log_is_what_the_rank_wrote(log_path, side, 0)
    assert os.path.getsize(log_path) == LONG_LINE
    print("supervisor peak RSS (VmHWM) with a %d MiB line, %s: %d KiB (bound %d KiB)"
          % (LONG_LINE // MiB, label, supervisor_peak_kib, SUPERVISOR_RSS_BOUND_KIB))
    assert supervisor_peak_kib < SUPERVISOR_RSS_BOUND_KIB
    if console_bytes is not None:
        shown = console_by_rank(console_bytes)
        # In chunks of at most 64 KiB, the continuations marked "[rank 0]+ ".
        assert all(len(text) <= 64 * 1024 for _, text in shown[0])
        assert shown[0][0][0] is False and all(c for c, _ in shown[0][1:])
        assert rejoin(shown[0]) == read_bytes(log_path) + b"\n"


@needs_cli
def test_one_100_mib_line_through_the_cli(tmp_path, rank_table, job_env, child):
    argv, side = child
    go = str(tmp_path / "go")
    log_dir = tmp_path / "log"
    with open(tmp_path / "console.out", "wb") as stdout:
        proc = subprocess.Popen(cli(["-r", rank_table(1), "-l", str(log_dir)] + argv
                                    + ["longline", side, str(LONG_LINE), go], job_env),
                                stdout=stdout, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        try:
            wait_for_side(side, 0, timeout=100)
            log_path = rank_logs(str(log_dir / "latest"))[0]
            deadline = time.monotonic() + 30
            while os.path.getsize(log_path) < LONG_LINE and time.monotonic() < deadline:
                time.sleep(0.02)
            with open("/proc/%d/task/%d/children" % (proc.pid, proc.pid)) as f:
                (supervisor,) = [int(p) for p in f.read().split()]
            peak = peak_rss_kib(supervisor)
            launcher_peak = peak_rss_kib(proc.pid)
        finally:
            open(go, "w").close()
            stderr = proc.communicate(timeout=60)[1]
    assert proc.returncode == 0, stderr.decode(errors="replace")
    print("davincirun peak RSS (VmHWM): %d KiB" % launcher_peak)
    long_line_job_checks(log_path, side, read_bytes(tmp_path / "console.out"), peak, "CLI, console to a file")


def test_one_100_mib_line_through_the_python_api(tmp_path, rank_table, job_env, child):
    argv, side = child
    go = str(tmp_path / "go")
    console = tmp_path / "console.out"
    real_stdout = sys.stdout
    sys.stdout = open(console, "w")  # output_notebook=True outside a kernel: lines go to sys.stdout
    try:
        job = start_distributed_train(argv + ["longline", side, str(LONG_LINE), go], log_dir=str(tmp_path / "log"),
                                      rank_table=rank_table(1), env=job_env, output_notebook=True, wait_timeout=0)
        try:
            wait_for_side(side, 0, timeout=100)
            log_path = rank_logs(job.run_dir)[0]
            deadline = time.monotonic() + 30
            while os.path.getsize(log_path) < LONG_LINE and time.monotonic() < deadline:
                time.sleep(0.02)
            peak = peak_rss_kib(job.supervisor_pid)
        finally:
            open(go, "w").close()
        assert job.wait() == 0
    finally:
        sys.stdout.close()
        sys.stdout = real_stdout
    # The Python console holds at most 8 MiB of lines and skips the oldest
    # beyond that (never part of a line): what it shows are whole chunks.
    shown = console_by_rank(read_bytes(console))
    data = read_bytes(log_path)
    assert shown[0], "nothing of the line was shown"
    for _continuation, text in shown[0]:
        assert len(text) == 64 * 1024 or text == data[-len(text):]
    long_line_job_checks(log_path, side, None, peak, "Python API, console to sys.stdout")


# ---------------------------------------------------------------- bytes that are not text

ODD_LOG = (b"plain start\nbad utf8 \xff\xfe\xc3( end\nsplit \xe4\xb8\xad char\nnul\x00in\x00line\n"
           b"\x1b[31mred\x1b[0m and \x1b[1mbold\x1b[0m\nprogress 10%\rprogress 50%\rprogress 100%\n"
           b"crlf line\r\ntail without newline \xf0\x9f")
# What a terminal shows of it: each line whole (the split character joined),
# a redrawn line in its last state, the unfinished last line ended.
ODD_CONSOLE = [b"plain start", b"bad utf8 \xff\xfe\xc3( end", b"split \xe4\xb8\xad char", b"nul\x00in\x00line",
               b"\x1b[31mred\x1b[0m and \x1b[1mbold\x1b[0m", b"progress 100%", b"crlf line",
               b"tail without newline \xf0\x9f"]


def test_bytes_that_are_not_text_through_the_python_console(tmp_path, rank_table, job_env, child, capfd):
    argv, side = child
    with pytest.raises(DistributedRuntimeError) as info:
        start_and_wait_distributed_train(argv + ["odd", side], log_dir=str(tmp_path / "log"),
                                         rank_table=rank_table(1), env=job_env, output_notebook=True, wait_timeout=0)
    error = info.value
    assert read_bytes(error.log_file) == ODD_LOG
    assert_log_is_what_the_rank_wrote(error.log_file, side, 0)
    # The Python console decodes leniently (U+FFFD), line by line.
    shown = [line[len("[rank 0] "):] for line in capfd.readouterr().out.split("\n") if line.startswith("[rank 0] ")]
    assert shown == [line.decode("utf-8", "replace") for line in ODD_CONSOLE]
    assert isinstance(error.log_tail, str)
    assert error.log_tail.splitlines() == [line.decode("utf-8", "replace") for line in ODD_CONSOLE]
    assert "split \u4e2d char" in str(error)


@needs_cli
@pytest.mark.parametrize("target", ["file", "pipe"])
def test_bytes_that_are_not_text_through_the_cli(tmp_path, rank_table, job_env, child, target):
    argv, side = child
    args = cli(["-r", rank_table(1), "-l", str(tmp_path / "log")] + argv + ["odd", side], job_env)
    if target == "file":
        with open(tmp_path / "console.out", "wb") as stdout:
            proc = subprocess.run(args, stdout=stdout, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=60)
        out = read_bytes(tmp_path / "console.out")
    else:
        proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                              timeout=60)
        out = proc.stdout
    assert proc.returncode == 3
    (log,) = rank_logs(str(tmp_path / "log" / "latest")).values()
    assert read_bytes(log) == ODD_LOG
    assert_log_is_what_the_rank_wrote(log, side, 0)
    # Raw bytes on the console, one whole line each, nothing else on stdout.
    assert out == b"".join(b"[rank 0] " + line + b"\n" for line in ODD_CONSOLE)
    assert b"last lines of its log" in proc.stderr and b"progress 100%" in proc.stderr
