"""The programs the ranks of bench/compare.py run, and the checks of what
they wrote (log files, console lines).

Every launcher names a rank its own way: davincirun and 0.1.x set RANK_ID,
mpirun OMPI_COMM_WORLD_RANK, torchrun RANK, msrun RANK_ID (and MS_ROLE=MS_SCHED
for the scheduler it starts beside the workers, which runs the same command);
the bash loops set RANK_ID. The programs are files (msrun runs only
`python3 FILE ...`), written once into the benchmark's directory.
"""

import hashlib
import math
import os
import re

LINE = 128  # bytes per line written in the relay, newline included

_RANK_ID = r'''
import os, sys, time
def rank_id():
    """This process's rank, or None for msrun's scheduler."""
    if os.environ.get("MS_ROLE") == "MS_SCHED":
        return None
    for name in ("RANK_ID", "OMPI_COMM_WORLD_RANK", "RANK"):
        if os.environ.get(name):
            return int(os.environ[name])
    sys.exit("no rank variable in the environment")
'''

# argv: lines stats_dir. Writes `lines` lines of 128 bytes through the
# ordinary sys.stdout (print), then records its own CPU time in stats_dir and
# leaves without the interpreter's teardown, so that what the launcher side
# costs can be told from what the ranks cost.
RELAY = _RANK_ID + r'''
rank = rank_id()
if rank is not None:
    head, pad = "rank %d line " % rank, "x" * (127 - len("rank %d line 000000000 " % rank))
    for i in range(int(sys.argv[1])):
        print(head + "%09d " % i + pad)
    sys.stdout.flush()
t = os.times()
with open(os.path.join(sys.argv[2], "cpu.%d" % os.getpid()), "w") as f:
    f.write(repr(t.user + t.system))
os._exit(0)
'''

# argv: obey|ignore socket_path failing_rank. Each rank forks a child; the
# rank and the child each connect to the benchmark's socket and say who they
# are; the benchmark sees each one's end as the end of its connection. The
# failing rank exits 1 when the benchmark tells it to (once all are up).
FAIL = _RANK_ID + r'''
import signal, socket
rank = rank_id()
if rank is None:
    sys.exit(0)  # msrun's scheduler leaves at once: a lower bound for msrun
if sys.argv[1] == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
def connect(kind):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[2])
    s.sendall(b"%s %d %d\n" % (kind, rank, os.getpid()))
    return s
if os.fork() == 0:
    s = connect(b"child")
    time.sleep(3600)
    os._exit(0)
s = connect(b"rank")
if rank == int(sys.argv[3]):
    s.recv(1)
    os._exit(1)
time.sleep(3600)
'''


def write_programs(directory):
    """Writes the rank programs; returns {name: path}. The killed program
    is bench/launcher_killed.py's (its argv: the ready directory)."""
    from launcher_killed import RANK as KILLED

    paths = {}
    for name, text in (("relay", RELAY), ("fail", FAIL), ("killed", KILLED), ("pass", "pass\n")):
        paths[name] = os.path.join(directory, "rank_%s.py" % name)
        with open(paths[name], "w") as f:
            f.write(text)
    return paths


def rank_lines(rank, count):
    """The bytes RELAY writes as `rank`, in blocks."""
    head = "rank %d line " % rank
    pad = "x" * (127 - len("rank %d line 000000000 " % rank))
    for start in range(0, count, 8192):
        yield "".join(head + "%09d " % i + pad + "\n" for i in range(start, min(count, start + 8192))).encode()


_digests = {}


def expected_digest(rank, count):
    key = (rank, count)
    if key not in _digests:
        h = hashlib.sha256()
        for block in rank_lines(rank, count):
            h.update(block)
        _digests[key] = h.hexdigest()
    return _digests[key]


def check_logs(paths, count, strip=None):
    """'ok' when each rank's log holds exactly what it wrote; 'ok (tagged)'
    when it does once the launcher's `strip` pattern is removed from each
    line (mpirun --tag-output writes its tags into the files too); else what
    is wrong with the first bad log."""
    tagged = False
    for rank, path in enumerate(paths):
        if not path or not os.path.exists(path):
            return "no log of rank %d" % rank
        with open(path, "rb") as f:
            data = f.read()
        want = expected_digest(rank, count)
        if hashlib.sha256(data).hexdigest() == want:
            continue
        if strip is not None and hashlib.sha256(strip.sub(b"", data)).hexdigest() == want:
            tagged = True
            continue
        return "differs: rank %d has %d of %d bytes" % (rank, len(data), count * LINE)
    return "ok (tagged)" if tagged else "ok"


# A whole rank line on a console, under any launcher's prefix; when the
# prefix names a rank it must be the rank the line comes from, and the line
# must have its full length (pieces of two lines can look like one).
_PREFIXES = ((b"[rank ", b"] "), (b"[1,", b"]<stdout>:"), (b"[default", b"]:"), None)


def _whole_pattern():
    alternatives, group = [], 0
    for prefix in _PREFIXES:
        for digits in range(1, 5):
            pad = LINE - 1 - len("rank  line 000000000 ") - digits
            if prefix is None:
                rank = rb"\d{%d}" % digits
            else:
                group += 1
                rank = rb"\%d" % group
            head = b"" if prefix is None else re.escape(prefix[0]) + rb"(\d{%d})" % digits + re.escape(prefix[1])
            alternatives.append(head + b"rank " + rank + rb" line \d{9} x{%d}\n" % pad)
    return re.compile(b"^(?:" + b"|".join(alternatives) + b")", re.M)


_WHOLE = _whole_pattern()
_ANY_PREFIX = re.compile(rb"\[rank \d+\] |\[\d+,\d+\]<std\w+>:|\[default\d+\]:")
_PIECES = re.compile(rb"[rankli e0-9x]+")  # only the characters of rank lines


def _broken(line):
    """A line that is not whole yet made of pieces of rank lines (a launcher's
    own messages, a status table quoting a rank's last line, have other
    characters)."""
    line = _ANY_PREFIX.sub(b"", line)
    return len(line) >= 4 and _PIECES.fullmatch(line) is not None and (b"x" in line or b"line" in line)


def check_console(path, ranks, count):
    """(verdict, whole lines, broken lines): every line that carries rank
    output must be one complete rank line (the launcher's own messages are
    ignored). 'whole' when all are and every rank line is there; 'whole,
    N% shown' when lines are missing (a launcher may skip lines rather than
    slow the ranks); 'N broken' when lines were split or mixed."""
    with open(path, "rb") as f:
        data = f.read()
    rest, whole = _WHOLE.subn(b"", data)
    broken = sum(1 for line in rest.splitlines() if _broken(line))
    expected = ranks * count
    if broken:
        return "%d broken" % broken, whole, broken
    if whole < expected:
        return "whole, %.1f%% shown" % (math.floor(1000.0 * whole / expected) / 10), whole, 0
    return "whole", whole, 0
