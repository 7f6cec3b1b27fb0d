"""The rank program of the output-integrity and log-directory tests, and
the checks they share. Each rank computes the sha256 of exactly the bytes it
wrote and reports it through a side file, so a check never reads the log to
decide what the log should hold."""

import collections
import glob
import hashlib
import os
import shutil
import sys
import time

from conftest import MARKER_VARIABLE, processes_with_marker

DAVINCIRUN = shutil.which("davincirun")
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


def rank_program(tmp_path):
    """argv prefix running the rank program, and its side directory: the
    `child` fixture (conftest.py)."""
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



def assert_nothing_ran(side, job_env):
    assert not glob.glob(os.path.join(side, "*.ran")), "a rank started"
    assert not processes_with_marker(job_env[MARKER_VARIABLE])
