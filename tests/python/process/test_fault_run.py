"""A bounded randomized fault run (tests/fault/fault_driver.py): random jobs
of one to three servers with random rank behaviours and endings, some sent
while the job is held in a state of its life cycle, each checked for
survivors, held device locks, lost bytes and the report of its first
failure on every server. bench/fault_run.py runs 1000."""

import itertools
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import fault_checks  # tests/fault, which conftest puts on sys.path
import fault_driver
import fault_plan
import fault_rep
import fault_stream
import pytest
from conftest import REPO

FAULT = os.path.join(REPO, "tests", "fault")

# Random fault-injection jobs (tests/fault): -m fault, or -m "not fault".
pytestmark = [
    pytest.mark.fault,
    pytest.mark.skipif(not shutil.which("davincirun") or not shutil.which("c++"),
                       reason="needs davincirun on PATH and a C++ compiler"),
]

FIXED_SEED = 20263060  # its 40 reps draw every ending, state and server count (test_fixed_seed_reps)
FIXED_REPS = 40
RANDOM_REPS = 4
MAX_RANKS = 24  # the full run goes to 64; the suite keeps to a few seconds per rep


@pytest.fixture(scope="module")
def chaos():
    return fault_driver.chaos_program()


def test_rank_stream_matches_an_independent_generator(chaos):
    # The byte checks rest on chaos_rank's stream; a second implementation
    # in Python must produce the very same bytes, special records included.
    for rank in (0, 5, 63):
        emitted = subprocess.run([chaos, "emit", str(rank), str(2 << 20)], check=True,
                                 stdout=subprocess.PIPE).stdout
        assert emitted == fault_driver.expected_stream(rank, 2 << 20)
        for special in (b"\r", b"\0", b"\xff\xfe", b"\r\n"):
            assert special in emitted
        assert max(len(line) for line in emitted.split(b"\n")) > 64 * 1024


def test_log_verification_finds_damage(chaos, tmp_path):
    size = 300000
    good = fault_driver.expected_stream(1, size)
    (tmp_path / "rank_0.device_0.log").write_bytes(good)  # rank 0's file holds rank 1's stream
    (tmp_path / "rank_1.device_1.log").write_bytes(good[:1000] + b"X" + good[1001:])
    (tmp_path / "rank_2.device_2.log").write_bytes(fault_driver.expected_stream(2, 12345))
    out = subprocess.run([chaos, "verify", str(tmp_path), "4"], check=True, stdout=subprocess.PIPE).stdout.decode()
    verified = {int(r): (int(v), int(s)) for r, v, s in (line.split() for line in out.splitlines())}
    assert verified[0][1] == size and verified[0][0] < 10  # another rank's stream differs at once
    assert verified[1] == (1000, size)
    assert verified[2] == (12345, 12345)
    assert verified[3] == (-1, -1)
    # The second server of a job: ranks 5 and 6 on its devices 0 and 1.
    (tmp_path / "rank_5.device_0.log").write_bytes(fault_driver.expected_stream(5, 4321))
    assert fault_stream.verify_logs(chaos, str(tmp_path), 5, 2) == {5: (4321, 4321), 6: (-1, -1)}


def _run(reps, seed):
    totals, wall = fault_driver.run_many(reps, seed, MAX_RANKS)
    failures = "\n".join(fault_driver.describe_failure(r) for r in totals.failed)
    assert not totals.failed, "seed %d:\n%s\n%s" % (seed, failures, totals.text(wall))
    assert totals.reps == reps
    assert totals.survivors == totals.held_locks == totals.bytes_lost == totals.bytes_corrupt == 0
    assert totals.report_mismatches == 0
    assert totals.bytes_logged >= totals.bytes_written > 0
    return totals


def test_fixed_seed_reps():
    totals = _run(FIXED_REPS, FIXED_SEED)
    # The fixed seed covers every ending, both callers, jobs of one, two and
    # three servers and an ending sent in every state a rep holds (as
    # planned, not assumed).
    assert set(totals.endings) == set(fault_driver.ENDINGS)
    assert any(c.startswith("python") for c in totals.callers) and "cli" in totals.callers
    assert set(totals.servers) == {1, 2, 3}
    states = {s.split(" then ")[0] for s in totals.states}
    assert states == {"running"} | set(fault_driver.HOLD_ENDINGS)


def test_a_held_device_lock_is_found(tmp_path):
    # The check after every rep: a device a job still holds is counted.
    plan = next(p for p in (fault_driver.RepPlan(seed, 8) for seed in itertools.count(1))
                if len(p.servers) == 1 and p.hold is None)
    rep = fault_driver.RepResult(plan)
    run = fault_rep.ServerRun(rep.plan, rep.plan.servers[0], str(tmp_path), {
        "table": str(tmp_path / "table.json"), "marker": "held-lock-check"})
    fault_plan.write_rank_table(run.table, rep.plan)
    holder = subprocess.Popen(["davincirun", "-r", run.table, "--server-id", "127.0.0.1", "-l", run.log_dir,
                               "sleep", "30"], env=run.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not rep.held_locks and time.monotonic() < deadline:
            rep.failures.clear()
            fault_checks.check_locks(rep, run)
            time.sleep(0.05)
        assert rep.held_locks == 1 and rep.failures[0][0] == "locks", rep.failures
    finally:
        holder.send_signal(signal.SIGINT)
        holder.wait(timeout=20)
    rep.held_locks, rep.failures = 0, []
    fault_checks.check_locks(rep, run)
    assert rep.held_locks == 0 and rep.failures == []


def test_random_seed_reps():
    seed = random.randrange(1 << 31)
    print("fault run seed %d (replay: python bench/fault_run.py --seed %d --reps %d --max-ranks %d)" % (
        seed, seed, RANDOM_REPS, MAX_RANKS))
    _run(RANDOM_REPS, seed)


# Run by test_driver_ignoring_stop_signals in a driver process of its own:
# SIGINT and SIGTERM ignored there, as a fault run started in the background
# of a non-interactive shell (`python bench/fault_run.py &`) has SIGINT.
_IGNORING_DRIVER = """
import signal, sys
sys.path.insert(0, %(fault)r)
import fault_driver
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
import fault_rep
fault_rep.CALLER_LIMIT = 20.0  # a caller that never sees its signal fails in 20 s, not 60
chaos = fault_driver.chaos_program()
results = [fault_driver.run_rep(seed, chaos, 8) for seed in %(seeds)r]
failed = [fault_driver.describe_failure(r) for r in results if r.failures]
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


def _first_seed(ending, caller):
    """The first seed whose plan of 8 ranks has this ending and caller, on one server, sent while running."""
    for seed in itertools.count(1):
        plan = fault_driver.RepPlan(seed, 8)
        if (plan.ending, plan.caller, len(plan.servers), plan.hold) == (ending, caller, 1, None):
            return seed


def test_driver_ignoring_stop_signals():
    # A caller inherits the signals its driver ignores and, rightly, keeps
    # ignoring them (Python sets no KeyboardInterrupt handler then; davincirun
    # leaves them alone as under nohup). The driver must start it with the
    # signals it sends at their defaults, or every rep ending in SIGINT or
    # SIGTERM hangs though the caller works (caller_signals.py).
    seeds = [_first_seed("interrupt", "python"), _first_seed("interrupt", "cli"), _first_seed("terminate", "cli")]
    run = subprocess.run([sys.executable, "-c", _IGNORING_DRIVER % {"fault": FAULT, "seeds": seeds}],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=180)
    assert run.returncode == 0, "seeds %s:\n%s" % (seeds, run.stdout.decode(errors="replace"))
