"""Randomized fault injection: many random jobs, each checked for survivors,
held device locks, lost bytes and the report of its first failure.

One rep (fault_plan.py): a seed gives a rank count (8 to max_ranks) on one
server or split across two or three (127.0.0.1-3 on this machine's
loopback, one caller each, as separate machines), a behaviour per rank
(chaos_rank.cpp) and an ending on one "origin" server: every rank exits 0,
a rank fails, SIGINT to the caller, terminate() (the CLI: SIGTERM), the job
timeout, or SIGKILL of the caller; some reps send it while that server is
held in a state of the life cycle (DAVINCIRUN_TEST_HOLD: starting, killing,
draining, waiting_for_servers). The caller is a separate process, the
`davincirun` command or fault_caller.py (the Python API), chosen at random
for one server; several servers run the command. Afterwards
(fault_checks.py, against fault_expect.py):

- no process carrying the rep's marker variable is alive on any server a
  few seconds after the callers ended (a survivor is SIGKILLed and
  counted), and no device of any server is still locked;
- every rank's log is an exact prefix of the stream the rank writes, at
  least as long as the rank's ledger (bytes whose write(2) returned) and
  exactly as long when the rank ended on its own;
- each server's summary.json, caller exit status, report and journal agree
  with the plan: the origin as the life-cycle table answers the ending in
  the state it came in, every other server stopped by the peer channel
  naming it (peer_failed with the failed rank's code, or peer_stopped and
  exit 1); each rank's status is one its behaviour allows;
- no caller crashed.

Used by bench/fault_run.py (the full run) and tests/python/process/test_fault_run.py
(a bounded run in the suite).
"""

import collections
import threading
import time

from fault_checks import parse_report  # noqa: F401 (part of this module's interface)
from fault_plan import ENDINGS, HOLD_ENDINGS, RepPlan  # noqa: F401
from fault_rep import RepResult, run_rep  # noqa: F401
from fault_stream import chaos_program, expected_stream  # noqa: F401


class Totals:
    def __init__(self):
        self.reps = 0
        self.ranks = 0
        self.behaviours = collections.Counter()
        self.endings = collections.Counter()
        self.callers = collections.Counter()
        self.servers = collections.Counter()
        self.states = collections.Counter()
        self.survivors = self.held_locks = 0
        self.bytes_written = self.bytes_logged = self.bytes_lost = self.bytes_corrupt = 0
        self.report_mismatches = 0
        self.failed = []  # RepResult
        self.rep_seconds = []
        self.lock = threading.Lock()

    def add(self, r):
        with self.lock:
            p = r.plan
            self.reps += 1
            self.ranks += p.ranks
            self.endings[p.ending] += 1
            self.callers[p.caller + (" (output_notebook=%s)" % p.output_notebook if p.caller == "python" else "")] += 1
            self.servers[len(p.servers)] += 1
            self.states[(p.hold or "running") + (" then %s" % p.second if p.second else "")] += 1
            for b in p.behaviours:
                self.behaviours[b.kind] += 1
                if b.flood:
                    self.behaviours["+flood"] += 1
                if b.daemon:
                    self.behaviours["+daemon (%s)" % ("holding output" if b.daemon == 2 else "on /dev/null")] += 1
                if b.close_after >= 0:
                    self.behaviours["+stdout closed early"] += 1
            self.survivors += r.survivors
            self.held_locks += r.held_locks
            self.bytes_written += r.bytes_written
            self.bytes_logged += r.bytes_logged
            self.bytes_lost += r.bytes_lost
            self.bytes_corrupt += r.bytes_corrupt
            self.report_mismatches += r.report_mismatches
            self.rep_seconds.append(r.seconds)
            if r.failures:
                self.failed.append(r)

    def text(self, wall):
        lines = [
            "reps: %d, ranks started: %d, wall time: %.1f s (%.2f s per rep, slowest %.2f s)" % (
                self.reps, self.ranks, wall, wall / max(1, self.reps), max(self.rep_seconds or [0])),
            "servers: " + ", ".join("%d: %d reps" % kv for kv in sorted(self.servers.items())),
            "endings: " + ", ".join("%s %d" % kv for kv in sorted(self.endings.items())),
            "sent in state: " + ", ".join("%s %d" % kv for kv in sorted(self.states.items())),
            "callers: " + ", ".join("%s %d" % kv for kv in sorted(self.callers.items())),
            "behaviours: " + ", ".join("%s %d" % kv for kv in sorted(self.behaviours.items())),
            "survivors: %d" % self.survivors,
            "held locks: %d" % self.held_locks,
            "bytes written (ledger): %d, bytes in logs: %d, bytes lost: %d, bytes not in the stream: %d" % (
                self.bytes_written, self.bytes_logged, self.bytes_lost, self.bytes_corrupt),
            "report mismatches: %d" % self.report_mismatches,
            "failed reps: %d%s" % (len(self.failed), (" (seeds: %s)" % ", ".join(
                str(r.plan.seed) for r in self.failed[:20])) if self.failed else ""),
        ]
        return "\n".join(lines)


def describe_failure(r):
    p = r.plan
    head = "FAIL seed %d (%s): replay with --seed %d --reps 1" % (p.seed, p.describe(), p.seed)
    body = ["  %s: %s" % f for f in r.failures[:10]]
    if r.kept_dir:
        body.append("  files kept in %s" % r.kept_dir)
    return "\n".join([head] + body)


def run_many(reps, seed, max_ranks=64, jobs=1, progress=None, python=None):
    """Runs `reps` reps with seeds seed, seed+1, ...; returns (Totals, wall seconds)."""
    chaos = chaos_program()
    totals = Totals()
    started = time.monotonic()
    seeds = iter(range(seed, seed + reps))
    seeds_lock = threading.Lock()
    stop = threading.Event()

    def worker():
        while not stop.is_set():
            with seeds_lock:
                s = next(seeds, None)
            if s is None:
                return
            r = run_rep(s, chaos, max_ranks, python=python)
            totals.add(r)
            if progress:
                progress(r, totals)

    threads = [threading.Thread(target=worker) for _ in range(max(1, jobs))]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except KeyboardInterrupt:
        stop.set()  # the reps under way finish, and clean up after themselves
        for t in threads:
            t.join()
        raise
    return totals, time.monotonic() - started
