"""The rank program of the fault run (chaos_rank.cpp): building it, the
byte stream each rank writes (an implementation independent of the C++
one, to cross-check it), and the ledger where the ranks count their bytes.
"""

import hashlib
import os
import struct
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CHAOS_SOURCE = os.path.join(HERE, "chaos_rank.cpp")


def chaos_program(cache_root=None):
    """Path of chaos_rank, compiled once per version of its source into
    build/fault/<sha256>/ (the build directory is not tracked)."""
    with open(CHAOS_SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    root = cache_root or os.path.join(REPO, "build", "fault")
    target = os.path.join(root, digest, "chaos_rank")
    if os.access(target, os.X_OK):
        return target
    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = "%s.%d.tmp" % (target, os.getpid())
    subprocess.run(["c++", "-O2", "-std=c++17", "-o", tmp, CHAOS_SOURCE], check=True)
    os.replace(tmp, target)  # atomic: a concurrent build of the same source is harmless
    return target


def _record_hash(rank, k):
    m = 0xFFFFFFFF
    h = (rank * 0x9E3779B1 + k * 0x85EBCA77 + 0x165667B1) & m
    h ^= h >> 15
    h = (h * 0x2C1B3C6D) & m
    h ^= h >> 12
    h = (h * 0x297A2D39) & m
    h ^= h >> 15
    return h


_ALPHABET = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"


def _payload(h, length):
    step = 1 + (h & 7)
    return bytes(_ALPHABET[(h + i * step) & 63] for i in range(length))


def expected_stream(rank, size):
    """The first `size` bytes rank `rank` writes: an implementation of
    chaos_rank.cpp's append_record() independent of it, to cross-check it."""
    out = bytearray()
    k = 0
    while len(out) < size:
        h = _record_hash(rank, k)
        out += b"r%d k%d " % (rank, k)
        kind, length = h % 16, (h >> 8) % 100
        if kind == 9:
            out += _payload(h, 10 + length % 30)
        elif kind == 10:
            out += b"".join(b"%d%%|%s\r" % (i * 25, b"#" * i) for i in range(4)) + b"done\n"
        elif kind == 11:
            out += b"\xff\xfe\xc3\x28\xa0\xa1\xe2\x82\n"
        elif kind == 12:
            out += b"\0\0nul\0\n"
        elif kind == 13:
            out += _payload(h, 5 + length) + b"\r\n"
        elif kind == 14 and (h >> 20) % 8 == 0:
            out += _payload(h, 70 * 1024 + (h >> 8) % (130 * 1024)) + b"\n"
        elif kind == 15:
            out += "é中 ".encode() + _payload(h, 5 + length) + b"\n"
        else:
            out += _payload(h, 20 + length) + b"\n"
        k += 1
    return bytes(out[:size])


def read_ledger(path, ranks):
    """(bytes written, pid, state) of every rank of the job, from its ledger."""
    with open(path, "rb") as f:
        slots = struct.unpack("<%dQ" % (3 * ranks), f.read(24 * ranks))
    return list(slots[:ranks]), list(slots[ranks:2 * ranks]), list(slots[2 * ranks:])


def verify_logs(chaos, run_dir, first, count):
    """{rank: (bytes that match its stream, log size)} of ranks first..first+count-1
    in `run_dir` (their devices 0..count-1); (-1, -1): no log file."""
    out = subprocess.run([chaos, "verify", run_dir, str(count), str(first)], check=True,
                         stdout=subprocess.PIPE).stdout.decode()
    verified = {}
    for line in out.splitlines():
        r, valid, size = (int(x) for x in line.split())
        verified[r] = (valid, size)
    return verified
