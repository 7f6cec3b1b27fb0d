"""The plan of a randomized fault-injection rep (fault_driver.py): the rank
program (chaos_rank.cpp), the stream each rank writes, each rank's
behaviour, the rep's ending, and the files the rep starts from.
"""

import hashlib
import json
import os
import random
import signal
import struct
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CHAOS_SOURCE = os.path.join(HERE, "chaos_rank.cpp")

ENDINGS = ("success", "rank_failure", "interrupt", "terminate", "timeout", "caller_kill")
CRASH_SIGNALS = (signal.SIGSEGV, signal.SIGABRT)


# ---- the rank program -------------------------------------------------------

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


# ---- plans ------------------------------------------------------------------

class RankPlan:
    """What one rank does; `line()` is its line in chaos_rank's plan file."""

    def __init__(self, kind, action, t_ms, code=0, sig=0, ignore_term=False, after_rank=-1):
        self.kind = kind  # exit0, exit0_early, exit_n, crash, hang, ignore_term, after_failure
        self.action = action  # exit, crash, hang
        self.t_ms = t_ms
        self.code = code
        self.sig = sig
        self.ignore_term = ignore_term
        self.after_rank = after_rank
        self.pace_ms = 0
        self.flood = False
        self.daemon = 0  # 1: a setsid() daemon on /dev/null; 2: one holding the output pipe
        self.close_after = -1

    def line(self):
        return "%s %d %d %d %d %d %d %d %d %d" % (
            self.action, self.t_ms, self.pace_ms, int(self.flood), self.daemon, self.close_after, self.code,
            self.sig, int(self.ignore_term), self.after_rank)

    def own_code(self):
        """The shell code the rank ends with by itself, None if it never ends by itself."""
        if self.action == "exit":
            return self.code
        if self.action == "crash":
            return 128 + self.sig
        return None


class RepPlan:
    def __init__(self, seed, max_ranks=64):
        rng = random.Random(seed)
        self.seed = seed
        self.ranks = rng.randint(8, max(8, max_ranks))
        self.ending = rng.choice(ENDINGS)
        self.caller = rng.choice(("python", "cli"))
        self.output_notebook = rng.random() < 0.5
        self.grace = round(rng.uniform(0.2, 0.5), 3)
        self.job_timeout = round(rng.uniform(0.05, 0.5), 3) if self.ending == "timeout" else None
        self.delay = round(rng.uniform(0.0, 0.3), 3)  # from "every rank runs" to the driver's or caller's action
        self.primary = None
        self.behaviours = [self._behaviour(rng, r) for r in range(self.ranks)]
        if self.ending not in ("success", "rank_failure") and not any(
                b.action == "hang" for b in self.behaviours):
            # Something must still run when the ending comes.
            r = rng.randrange(self.ranks)
            self.behaviours[r] = self._decorate(rng, RankPlan("hang", "hang", rng.randint(0, 300)))
        if self.ending == "rank_failure":
            self.primary = rng.randrange(self.ranks)
            if rng.random() < 0.5:
                p = RankPlan("exit_n", "exit", rng.randint(0, 300), code=rng.randint(1, 120))
            else:
                p = RankPlan("crash", "crash", rng.randint(0, 300), sig=int(rng.choice(CRASH_SIGNALS)))
            self.behaviours[self.primary] = self._decorate(rng, p)
            for b in self.behaviours:
                if b.kind == "after_failure":
                    b.after_rank = self.primary

    def _behaviour(self, rng, rank):
        t = rng.randint(0, 300)
        if self.ending == "success":
            b = RankPlan("exit0", "exit", t)
        elif self.ending == "rank_failure":
            kind = rng.choice(("exit0_early", "exit0", "hang", "ignore_term", "after_failure"))
            if kind == "exit0_early":
                b = RankPlan(kind, "exit", rng.randint(0, 30))
            elif kind == "exit0":
                b = RankPlan(kind, "exit", t)
            elif kind == "hang":
                b = RankPlan(kind, "hang", t)
            elif kind == "ignore_term":
                b = RankPlan(kind, "hang", t, ignore_term=True)
            elif rng.random() < 0.5:  # fails too, once the first failure has really happened
                b = RankPlan(kind, "exit", rng.randint(0, 50), code=rng.randint(1, 120))
            else:
                b = RankPlan(kind, "crash", rng.randint(0, 50), sig=int(rng.choice(CRASH_SIGNALS)))
        else:
            kind = rng.choice(("exit0", "hang", "ignore_term"))
            b = RankPlan(kind, "exit" if kind == "exit0" else "hang", t, ignore_term=kind == "ignore_term")
        return self._decorate(rng, b)

    @staticmethod
    def _decorate(rng, b):
        b.pace_ms = rng.choice((0, 1, 5, 10, 20))
        b.flood = rng.random() < 0.05
        x = rng.random()
        b.daemon = 1 if x < 0.08 else 2 if x < 0.16 else 0
        if rng.random() < 0.1:
            b.close_after = rng.randint(0, 4000)
        return b

    def plan_text(self):
        return "%d\n%s\n" % (self.ranks, "\n".join(b.line() for b in self.behaviours))


# ---- the ledger and the rank table ----------------------------------------

def read_ledger(path, ranks):
    with open(path, "rb") as f:
        slots = struct.unpack("<%dQ" % (3 * ranks), f.read(24 * ranks))
    return list(slots[:ranks]), list(slots[ranks:2 * ranks]), list(slots[2 * ranks:])


def write_rank_table(path, ranks):
    table = {
        "version": "1.0",
        "server_count": "1",
        "server_list": [{"server_id": "127.0.0.1",
                         "device": [{"device_id": str(i), "rank_id": str(i)} for i in range(ranks)]}],
        "status": "completed",
    }
    with open(path, "w") as f:
        json.dump(table, f)
