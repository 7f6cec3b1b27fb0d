"""Every byte a rank writes reaches its log file, checked against the
sha256 digest the rank itself computed of what it wrote (reported through a
side file, never read back from the log): ranks that crash or are SIGKILLed
right after writing, a flood from every rank at once, a 100 MiB line, bytes
that are not text. Then a log directory that cannot be used (a file, under a
file, a read-only mount: a typed error before any rank starts) and one that
fills up mid-run (the ranks carry on; the report says which log was cut
where). Read-only and full filesystems are real tmpfs mounts in a private
mount namespace (`unshare --mount`)."""

import collections
import glob
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from davincirunsdk import (
    DistributedRuntimeError,
    LaunchConfigError,
    start_and_wait_distributed_train,
    start_distributed_train,
)

from conftest import MARKER_VARIABLE, processes_with_marker

DAVINCIRUN = shutil.which("davincirun")
needs_cli = pytest.mark.skipif(DAVINCIRUN is None, reason="the davincirun command is not on PATH")
MiB = 1 << 20

# The rank program. Everything it writes goes through write_all(), which
# hashes exactly the bytes os.write() accepted; record() publishes the running
# size and digest (atomically) in <side dir>/rank_<RANK_ID>.side.
CHILD = r'''
import hashlib, os, random, signal, sys, time

RANK = int(os.environ["RANK_ID"])
state = {"sha": hashlib.sha256(), "size": 0}


def write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        state["sha"].update(view[:n])
        state["size"] += n
        view = view[n:]


def record(side_dir, end=False):
    path = os.path.join(side_dir, "rank_%d.side" % RANK)
    with open(path + ".tmp", "w") as f:
        f.write("%d %s%s\n" % (state["size"], state["sha"].hexdigest(), " end" if end else ""))
    os.replace(path + ".tmp", path)


def text_lines(size, seed):
    """`size` bytes of lines of 12 to 2000 bytes, different for every rank."""
    rng = random.Random(seed * 1000 + RANK)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,:;-_=+()"
    base = "".join(rng.choice(alphabet) for _ in range(8192)).encode()
    out, total, i = [], 0, 0
    while total < size:
        head = b"r%d %07d " % (RANK, i)
        start = rng.randrange(4096)
        line = head + base[start:start + rng.randrange(1990)] + b"\n"
        out.append(line)
        total += len(line)
        i += 1
    return b"".join(out)[:size - 1] + b"\n"


def wait_for(path):
    deadline = time.monotonic() + 120
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            sys.exit(9)
        time.sleep(0.02)


mode, side_dir = sys.argv[1], sys.argv[2]
if mode == "crash":  # crash <signal> <side> <size>: write to stdout and stderr, then die by the signal
    size = int(sys.argv[3])
    if RANK != 0:
        write_all(1, b"rank %d waits\n" % RANK)
        record(side_dir, end=True)
        time.sleep(120)
    data = text_lines(size, 1)
    rng = random.Random(7)
    at = 0
    while at < len(data):
        cut = data.find(b"\n", at + rng.randrange(1, 64 << 10))
        cut = len(data) if cut < 0 else cut + 1
        write_all(1 + (at // 4096) % 2, data[at:cut])  # whole lines, alternating stdout and stderr
        at = cut
    record(side_dir, end=True)
    os.kill(os.getpid(), int(sys.argv[4]))
    time.sleep(60)
elif mode == "hold":  # hold <side> <size>: write, recording after each write, then block
    data = text_lines(int(sys.argv[3]), 2)
    for at in range(0, len(data), 100000):
        write_all(1, data[at:at + 100000])
        record(side_dir)
    record(side_dir, end=True)
    time.sleep(600)
elif mode == "flood":  # flood <side> <size>: as fast as possible
    data = text_lines(int(sys.argv[3]), 3)
    for at in range(0, len(data), 1 << 16):
        write_all(1, data[at:at + (1 << 16)])
    record(side_dir, end=True)
elif mode == "longline":  # longline <side> <size> <go file>: one line, no newline
    size = int(sys.argv[3])
    rng = random.Random(11)
    base = bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz0123456789") for _ in range((1 << 20) + 4096))
    chunk = 0
    while state["size"] < size:
        offset = (chunk * 977) % 4096
        write_all(1, base[offset:offset + min(1 << 20, size - state["size"])])
        chunk += 1
    record(side_dir, end=True)
    wait_for(sys.argv[4])
elif mode == "odd":  # odd <side>: bytes that are not plain text, each in its own write
    pieces = [b"plain start\n", b"bad utf8 \xff\xfe\xc3( end\n", b"split \xe4\xb8", b"\xad char\n",
              b"nul\x00in\x00line\n", b"\x1b[31mred\x1b[0m and \x1b[1mbold\x1b[0m\n",
              b"progress 10%\rprogress 50%\rprogress 100%\n", b"crlf line\r\n", b"tail without newline \xf0\x9f"]
    for piece in pieces:
        write_all(1, piece)
        time.sleep(0.15)  # separate reads: the split character arrives in two
    record(side_dir, end=True)
    sys.exit(3)
elif mode == "fill":  # fill <side> <size> <copy dir> <go file or ->: a copy of the data goes to <copy dir>
    data = text_lines(int(sys.argv[3]), 4)
    with open(os.path.join(sys.argv[4], "rank_%d.data" % RANK), "wb") as f:
        f.write(data)
    for at in range(0, len(data), 32768):
        write_all(1, data[at:at + 32768])
    record(side_dir, end=True)
    if sys.argv[5] != "-":
        wait_for(sys.argv[5])
elif mode == "touch":  # touch <dir>: proves that a rank ran
    open(os.path.join(side_dir, "rank_%d.ran" % RANK), "w").close()
'''

# Runs inside `unshare --mount`: mounts a tmpfs, optionally fills it, runs
# one job through the CLI or the Python API, and reports as JSON what only
# this mount namespace can see (the logs, summary.json).
DRIVER = r'''
import glob, hashlib, json, os, subprocess, sys, time, warnings

cfg = json.load(open(sys.argv[1]))
subprocess.run(["mount", "-t", "tmpfs", "-o", cfg["mount_options"], "tmpfs", cfg["mount"]], check=True)
filler = os.path.join(cfg["mount"], "filler")
if cfg.get("fill") is not None:
    # Take all the space, then give back cfg["fill"] bytes (whole pages).
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError:
        pass
    os.ftruncate(fd, max(0, os.fstat(fd).st_size - cfg["fill"]))
    os.close(fd)
out = {"warnings": [], "returncode": None, "error": None}


def coordinate():
    """Waits until every rank has written everything, frees the filler if
    asked, then lets the ranks exit."""
    if not cfg.get("go"):
        return
    deadline = time.monotonic() + 120
    for rank in range(cfg["ranks"]):
        side = os.path.join(cfg["side_dir"], "rank_%d.side" % rank)
        while time.monotonic() < deadline:
            try:
                if open(side).read().split()[2:] == ["end"]:
                    break
            except (OSError, IndexError):
                pass
            time.sleep(0.02)
    if cfg.get("free_before_end"):
        os.unlink(filler)
    open(cfg["go"], "w").close()


if cfg["front"] == "cli":
    with open(cfg["stdout"], "wb") as stdout:
        proc = subprocess.Popen(cfg["argv"], stdout=stdout, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        coordinate()
        out["stderr"] = proc.communicate(timeout=120)[1].decode("utf-8", "replace")
    out["returncode"] = proc.returncode
else:
    from davincirunsdk import start_distributed_train

    real_stdout = sys.stdout
    sys.stdout = open(cfg["stdout"], "w")  # the console of output_notebook=True: sys.stdout, redirected
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            job = start_distributed_train(**cfg["kwargs"])
            coordinate()
            out["returncode"] = job.wait()
            out["rank_log_errors"] = [r.log_error for r in job.result.ranks]
            out["summary_error"] = job.result.summary_error
            out["run_dir"] = job.run_dir
        out["warnings"] = ["%s: %s" % (w.category.__name__, w.message) for w in caught]
    except Exception as e:
        out["error"] = [type(e).__name__, str(e)]
    finally:
        sys.stdout.close()
        sys.stdout = real_stdout
files = {}
for path in glob.glob(os.path.join(cfg["mount"], "**"), recursive=True):
    if os.path.isfile(path) and os.path.realpath(path) == path and path != filler:  # not via log/latest
        with open(path, "rb") as f:
            data = f.read()
        files[path] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        if path.endswith("summary.json"):
            files[path]["json"] = json.loads(data)
out["files"] = files
out["dirs"] = sorted(p for p in glob.glob(os.path.join(cfg["mount"], "**"), recursive=True) if os.path.isdir(p))
with open(cfg["result"], "w") as f:
    json.dump(out, f)
'''


@pytest.fixture
def child(tmp_path):
    """argv prefix running the rank program, and its side directory."""
    path = tmp_path / "rank_program.py"
    path.write_text(CHILD)
    side = tmp_path / "side"
    side.mkdir()
    return [sys.executable, str(path)], str(side)


def sha256_of(path):
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
            size += len(block)
    return size, h.hexdigest()


def side_record(side_dir, rank):
    """(size, sha256) the rank reported after its last write, or None before it is done."""
    try:
        with open(os.path.join(side_dir, "rank_%d.side" % rank)) as f:
            fields = f.read().split()
    except OSError:
        return None
    if fields[2:] != ["end"]:
        return None
    return int(fields[0]), fields[1]


def wait_for_side(side_dir, rank, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = side_record(side_dir, rank)
        if record:
            return record
        time.sleep(0.02)
    raise AssertionError("rank %d never reported what it wrote" % rank)


def assert_log_is_what_the_rank_wrote(log_path, side_dir, rank):
    expected = side_record(side_dir, rank)
    assert expected is not None, "rank %d did not finish writing" % rank
    assert sha256_of(log_path) == expected, "log of rank %d differs from what it wrote" % rank


def assert_stopped_rank_log(log_path, side_dir, rank, result):
    """A rank the launcher stopped (SIGTERM) may not have got to record what
    it wrote; when it did, its log is exactly that, else every byte it sent."""
    if side_record(side_dir, rank) is not None:
        assert_log_is_what_the_rank_wrote(log_path, side_dir, rank)
    assert result.output_bytes == os.path.getsize(log_path)


def rank_logs(run_dir):
    """{rank: log path} of a run directory."""
    logs = {}
    for path in glob.glob(os.path.join(run_dir, "rank_*.device_*.log")):
        logs[int(os.path.basename(path).split("_")[1].split(".")[0])] = path
    return logs


def console_by_rank(raw):
    """The console's rank lines, per rank: {rank: [(continuation, text)]}.
    Fails unless the output ends at a line end (whole lines only)."""
    assert raw == b"" or raw.endswith(b"\n"), "the console ends inside a line"
    lines = collections.defaultdict(list)
    for line in raw.split(b"\n")[:-1]:
        if not line.startswith(b"[rank "):
            continue
        close = line.index(b"]")
        continuation = line[close + 1:close + 2] == b"+"
        lines[int(line[6:close])].append((continuation, line[close + (3 if continuation else 2):]))
    return lines


def rejoin(entries):
    """The text a rank wrote, from its console lines (continuations glued)."""
    out = bytearray()
    for i, (continuation, text) in enumerate(entries):
        if i and not continuation:
            out += b"\n"
        out += text
    return bytes(out) + b"\n"


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def peak_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM for pid %d" % pid)


def cli(args, job_env):
    return [DAVINCIRUN, "--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE])] + args


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
    for continuation, text in shown[0]:
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


# ---------------------------------------------------------------- unusable log directory


def assert_nothing_ran(side, job_env):
    assert not glob.glob(os.path.join(side, "*.ran")), "a rank started"
    assert not processes_with_marker(job_env[MARKER_VARIABLE])


def unusable_dirs(tmp_path):
    (tmp_path / "a_file").write_text("x")
    return {
        "is a file": (str(tmp_path / "a_file"), "log directory '%s' is not a directory" % (tmp_path / "a_file")),
        "under a file": (str(tmp_path / "a_file" / "log"),
                         "cannot create log directory '%s': Not a directory" % (tmp_path / "a_file" / "log")),
    }


@pytest.mark.parametrize("case", ["is a file", "under a file"])
def test_unusable_log_dir_is_a_config_error_before_any_rank_starts(tmp_path, rank_table, job_env, child, case):
    argv, side = child
    log_dir, message = unusable_dirs(tmp_path)[case]
    with pytest.raises(LaunchConfigError) as info:
        start_and_wait_distributed_train(argv + ["touch", side], log_dir=log_dir, rank_table=rank_table(2),
                                         env=job_env, output_notebook=False, wait_timeout=0)
    assert message in str(info.value)
    assert_nothing_ran(side, job_env)
    if DAVINCIRUN:
        proc = subprocess.run(cli(["-r", rank_table(2), "-l", log_dir] + argv + ["touch", side], job_env),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        assert proc.returncode == 2
        assert message in proc.stderr
        assert_nothing_ran(side, job_env)


def test_missing_log_dir_is_created_like_mkdir_p(tmp_path, rank_table, job_env, child):
    argv, side = child
    log_dir = tmp_path / "new" / "deeper" / "log"
    start_and_wait_distributed_train(argv + ["touch", side], log_dir=str(log_dir), rank_table=rank_table(2),
                                     env=job_env, output_notebook=False, wait_timeout=0)
    assert sorted(os.listdir(side)) == ["rank_0.ran", "rank_1.ran"]
    assert len(rank_logs(str(log_dir / "latest"))) == 2


def run_in_mount_namespace(tmp_path, cfg):
    """Runs DRIVER with `cfg` under `unshare --mount`; returns its report."""
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    cfg = dict(cfg, result=str(tmp_path / "result.json"), mount=str(tmp_path / "mnt"))
    (tmp_path / "mnt").mkdir(exist_ok=True)
    with open(tmp_path / "driver.json", "w") as f:
        json.dump(cfg, f)
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable, str(driver),
                           str(tmp_path / "driver.json")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=150)
    assert proc.returncode == 0, proc.stderr
    with open(cfg["result"]) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def mount_namespaces(tmp_path_factory):
    """Skips unless this process may mount a tmpfs in a private mount namespace."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    where = tmp_path_factory.mktemp("probe")
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "mount", "-t", "tmpfs", "-o", "size=64k",
                           "tmpfs", str(where)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        pytest.skip("cannot mount a tmpfs in a private mount namespace: %s" % proc.stdout.strip())


@pytest.mark.parametrize("front", ["api", "cli"])
@pytest.mark.parametrize("sub", ["", "missing"], ids=["mount point", "missing dir in it"])
def test_read_only_log_dir_is_a_config_error_before_any_rank_starts(
        tmp_path, rank_table, job_env, child, mount_namespaces, front, sub):
    if front == "cli" and DAVINCIRUN is None:
        pytest.skip("the davincirun command is not on PATH")
    argv, side = child
    log_dir = str(tmp_path / "mnt" / sub) if sub else str(tmp_path / "mnt")
    command = argv + ["touch", side]
    cfg = {"mount_options": "ro,size=1m", "front": front, "stdout": str(tmp_path / "console.out")}
    if front == "cli":
        cfg["argv"] = cli(["-r", rank_table(2), "-l", log_dir] + command, job_env)
    else:
        cfg["kwargs"] = dict(command=command, log_dir=log_dir, rank_table=rank_table(2), env=job_env,
                             output_notebook=False, wait_timeout=0)
    report = run_in_mount_namespace(tmp_path, cfg)
    what = ("cannot create log directory '%s'" % log_dir) if sub else ("cannot create run directory '%s/" % log_dir)
    if front == "cli":
        assert report["returncode"] == 2
        message = report["stderr"]
    else:
        assert report["error"][0] == "LaunchConfigError"
        message = report["error"][1]
    assert what in message and "Read-only file system" in message
    assert_nothing_ran(side, job_env)
    assert report["files"] == {}


# ---------------------------------------------------------------- a full filesystem


def fill_job(tmp_path, rank_table, job_env, child, front, free_before_end, fill, ranks=4, size=1 * MiB):
    argv, side = child
    copies = tmp_path / "copies"
    copies.mkdir()
    go = str(tmp_path / "go")
    log_dir = str(tmp_path / "mnt" / "log")
    command = argv + ["fill", side, str(size), str(copies), go]
    cfg = {"mount_options": "size=1m", "front": front, "stdout": str(tmp_path / "console.out"), "fill": fill,
           "go": go, "ranks": ranks, "side_dir": side, "free_before_end": free_before_end}
    if front == "cli":
        cfg["argv"] = cli(["-r", rank_table(ranks), "-l", log_dir] + command, job_env)
    else:
        cfg["kwargs"] = dict(command=command, log_dir=log_dir, rank_table=rank_table(ranks), env=job_env,
                             output_notebook=True, wait_timeout=0)
    report = run_in_mount_namespace(tmp_path, cfg)
    data = {rank: read_bytes(copies / ("rank_%d.data" % rank)) for rank in range(ranks)}
    return report, data, side


def check_cut_logs(report, data, side):
    """Each log holds a prefix of what its rank wrote; a cut one is reported
    at exactly its size. Returns {rank: (log path, byte)} of the cut logs."""
    logs = {int(os.path.basename(p).split("_")[1].split(".")[0]): (p, f)
            for p, f in report["files"].items() if p.endswith(".log")}
    assert sorted(logs) == sorted(data)
    cut = {}
    for rank, (path, info) in logs.items():
        assert info["sha256"] == hashlib.sha256(data[rank][:info["size"]]).hexdigest()
        assert (len(data[rank]), hashlib.sha256(data[rank]).hexdigest()) == side_record(side, rank)
        if info["size"] < len(data[rank]):
            cut[rank] = (path, info["size"])
    assert cut, "the filesystem never filled up"
    print("logs cut by the full filesystem: %s" % ", ".join("rank %d at byte %d" % (r, cut[r][1]) for r in sorted(cut)))
    return cut


@pytest.mark.parametrize("front", ["cli", "api"])
def test_full_log_filesystem_cuts_logs_not_ranks(tmp_path, rank_table, job_env, child, mount_namespaces, front):
    if front == "cli" and DAVINCIRUN is None:
        pytest.skip("the davincirun command is not on PATH")
    # 4 ranks write 1 MiB each into a 1 MiB tmpfs (a filler holds 256 KiB of
    # it, freed once they have written, so that summary.json fits).
    report, data, side = fill_job(tmp_path, rank_table, job_env, child, front, free_before_end=True,
                                  fill=768 * 1024)
    assert report["error"] is None
    assert report["returncode"] == 0
    cut = check_cut_logs(report, data, side)
    (summary,) = [f["json"] for p, f in report["files"].items() if p.endswith("summary.json")]
    assert summary["exit_code"] == 0
    assert report.get("summary_error") is None and "cannot write the job summary" not in report.get("stderr", "")
    for entry in summary["ranks"]:
        assert entry["exit_code"] == 0 and entry["output_bytes"] == len(data[entry["rank"]])
        if entry["rank"] in cut:
            path, size = cut[entry["rank"]]
            assert entry["log_error"] == "No space left on device at byte %d" % size
        else:
            assert entry["log_error"] is None
        if front == "api":
            assert report["rank_log_errors"][entry["rank"]] == entry["log_error"]
    messages = report["stderr"] if front == "cli" else "\n".join(report["warnings"])
    for rank, (path, size) in cut.items():
        prefix = "davincirun: warning: " if front == "cli" else "RuntimeWarning: "
        assert "%sthe log of rank %d is incomplete (%s): No space left on device at byte %d" % (
            prefix, rank, path, size) in messages
    # The console is not the filesystem: it got every line.
    shown = console_by_rank(read_bytes(tmp_path / "console.out"))
    for rank in data:
        assert rejoin(shown[rank]) == data[rank]


@pytest.mark.parametrize("front", ["cli", "api"])
def test_summary_that_cannot_be_written_is_reported_not_fatal(
        tmp_path, rank_table, job_env, child, mount_namespaces, front):
    if front == "cli" and DAVINCIRUN is None:
        pytest.skip("the davincirun command is not on PATH")
    # Room for the rank table only: the logs fill the rest, and nothing is
    # freed before the end, so summary.json cannot be written.
    report, data, side = fill_job(tmp_path, rank_table, job_env, child, front, free_before_end=False,
                                  fill=16 * 1024, ranks=2, size=256 * 1024)
    assert report["error"] is None
    assert report["returncode"] == 0
    check_cut_logs(report, data, side)
    assert not [p for p in report["files"] if p.endswith("summary.json")]
    if front == "cli":
        found = re.search(r"\[davincirun\] cannot write the job summary (\S+): No space left on device\n",
                          report["stderr"])
        assert found and os.path.dirname(os.path.dirname(found.group(1))) == str(tmp_path / "mnt" / "log")
    else:
        assert report["summary_error"] == "No space left on device"
        assert "RuntimeWarning: the job summary %s/summary.json could not be written: No space left on device" % (
            report["run_dir"]) in report["warnings"]


@pytest.mark.parametrize("front", ["cli", "api"])
def test_no_room_for_the_rank_table_is_a_config_error_before_any_rank_starts(
        tmp_path, rank_table, job_env, child, mount_namespaces, front):
    if front == "cli" and DAVINCIRUN is None:
        pytest.skip("the davincirun command is not on PATH")
    argv, side = child
    log_dir = str(tmp_path / "mnt" / "log")
    command = argv + ["touch", side]
    cfg = {"mount_options": "size=1m", "front": front, "stdout": str(tmp_path / "console.out"), "fill": 0}
    if front == "cli":
        cfg["argv"] = cli(["-r", rank_table(2), "-l", log_dir] + command, job_env)
    else:
        cfg["kwargs"] = dict(command=command, log_dir=log_dir, rank_table=rank_table(2), env=job_env,
                             output_notebook=False, wait_timeout=0)
    report = run_in_mount_namespace(tmp_path, cfg)
    if front == "cli":
        assert report["returncode"] == 2
        message = report["stderr"]
    else:
        assert report["error"][0] == "LaunchConfigError"
        message = report["error"][1]
    assert "rank_table.json" in message and "No space left on device" in message
    assert_nothing_ran(side, job_env)
    # The run directory it had begun is gone again.
    assert report["files"] == {}
    assert [d for d in report["dirs"] if d.startswith(log_dir + "/")] == []
