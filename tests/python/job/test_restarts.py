"""Restarts of the whole job in place (docs/restarts.md), as a user meets
them: from the shell and from Python, what every attempt's ranks are
told, what each attempt leaves (its logs, its record, the words on the
console), and when the job does not restart: the same error again, no
restarts left, a stop. Several servers: tests/python/peers/test_peer_restarts.py."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import MARKER_VARIABLE

from davincirunsdk import (
    DistributedRuntimeError,
    LaunchConfigError,
    OptionTypeError,
    start_and_wait_distributed_train,
    start_distributed_train,
)

DAVINCIRUN = shutil.which("davincirun")
pytestmark = pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH (pip install . first)")

# Prints what an attempt is told; rank 1 fails in the attempts listed in FAIL_IN (restart counts), each time
# with a line of its own before the same exception (progress, so the job restarts).
RANKS = r"""
import json, os, sys, time
keys = ["RANK_ID", "JOB_ID", "DAVINCIRUN_RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
        "MASTER_PORT", "RANK_TABLE_FILE"]
print("ENV " + json.dumps({k: os.environ.get(k) for k in keys}), flush=True)
count = int(os.environ["DAVINCIRUN_RESTART_COUNT"])
fail_in = [int(x) for x in os.environ.get("FAIL_IN", "").split(",") if x]
if os.environ["RANK_ID"] == "1" and count in fail_in:
    time.sleep(0.3)  # rank 0 has said what it was told
    print("step %d" % (count * 10), flush=True)
    raise RuntimeError("link flap")
time.sleep(0.2)
"""


def cli(tmp_path, job_env, *args, fail_in="", script=RANKS, timeout=90):
    path = tmp_path / "ranks.py"
    path.write_text(script)
    argv = [DAVINCIRUN, "--nproc", "2", "-l", str(tmp_path / "log"), "--env",
            "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE]), "--env", "FAIL_IN=" + fail_in,
            "--restart-delay", "0.1", *args, sys.executable, str(path)]
    return subprocess.run(argv, cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)


def summary(tmp_path):
    with open(tmp_path / "log" / "latest" / "summary.json") as f:
        return json.load(f)


def told(tmp_path, rank, attempt):
    """What rank `rank` was told in attempt `attempt` (its log's ENV line)."""
    name = "rank_%d.device_%d%s.log" % (rank, rank, "" if attempt == 1 else ".attempt%d" % attempt)
    with open(tmp_path / "log" / "latest" / name) as f:
        for line in f:
            if line.startswith("ENV "):
                return json.loads(line[4:])
    raise AssertionError("no ENV line in " + name)


def test_a_failed_attempt_restarts_the_whole_job_with_new_ports_and_counts(tmp_path, job_env):
    proc = cli(tmp_path, job_env, "--max-restarts", "3", fail_in="0,1")
    assert proc.returncode == 0, proc.stderr
    assert "[davincirun] attempt 1 of 4: rank 1 (pid " in proc.stderr
    assert "failed with exit code 1 (RuntimeError: link flap); restarting the job in 0.1 s (attempt 2 of 4)" in (
        proc.stderr)
    assert "attempt 2 of 4: rank 1" in proc.stderr and "(attempt 3 of 4)" in proc.stderr
    envs = {(rank, attempt): told(tmp_path, rank, attempt) for rank in (0, 1) for attempt in (1, 2, 3)}
    for (rank, attempt), env in envs.items():
        assert env["RANK_ID"] == str(rank)
        assert env["DAVINCIRUN_RESTART_COUNT"] == env["TORCHELASTIC_RESTART_COUNT"] == str(attempt - 1)
        assert env["TORCHELASTIC_MAX_RESTARTS"] == "3"
        assert env["JOB_ID"] == envs[(0, 1)]["JOB_ID"] and env["RANK_TABLE_FILE"] == envs[(0, 1)]["RANK_TABLE_FILE"]
        assert env["MASTER_PORT"] == envs[(0, attempt)]["MASTER_PORT"]  # one rendezvous per attempt
    assert len({envs[(0, attempt)]["MASTER_PORT"] for attempt in (1, 2, 3)}) == 3
    record = summary(tmp_path)
    assert record["success"] is True and record["exit_code"] == 0
    attempts = record["attempts"]
    assert [(a["attempt"], a["stop_reason"], a["restarted"]) for a in attempts] == [
        (1, "rank_failed", True), (2, "rank_failed", True), (3, "none", False)]
    assert attempts[0]["first_failure"]["rank"] == 1 and attempts[0]["first_failure"]["exit_code"] == 1
    assert attempts[0]["first_failure"]["log"].endswith("/rank_1.device_1.log")
    assert attempts[1]["first_failure"]["log"].endswith("/rank_1.device_1.attempt2.log")
    assert attempts[0]["root_cause"] == "RuntimeError: link flap"
    assert attempts[0]["decision"] == "restarted (1 of 3 restarts)"
    assert attempts[0]["ended"] <= attempts[1]["started"] and attempts[2]["decision"] == ""
    assert record["ranks"][1]["log"].endswith("/rank_1.device_1.attempt3.log")
    journal = (tmp_path / "log" / "latest" / "events.txt").read_text()
    assert journal.count("waiting_for_servers -> restarting on restart_ordered") == 2


def test_restarts_exhausted_report_the_last_failure_and_every_attempt(tmp_path, job_env):
    proc = cli(tmp_path, job_env, "--max-restarts", "2", fail_in="0,1,2")
    assert proc.returncode == 1, proc.stderr
    report = proc.stderr[proc.stderr.index("rank 1 (pid"):]
    assert "log: " in report and "rank_1.device_1.attempt3.log" in report
    assert "attempts:\n  attempt 1: rank 1 (pid " in report
    assert "(RuntimeError: link flap); restarted (2 of 2 restarts)\n" in report
    assert "  attempt 3: rank 1 (pid " in report
    assert "; not restarted: no restarts left (max_restarts 2)\n" in report
    assert [a["restarted"] for a in summary(tmp_path)["attempts"]] == [True, True, False]


def test_the_same_error_again_stops_after_two_attempts_and_says_why(tmp_path, job_env):
    script = "import os\nraise ValueError('bad config: lr=' + os.environ.get('LR', 'none'))\n"
    proc = cli(tmp_path, job_env, "--max-restarts", "5", script=script)
    assert proc.returncode == 1, proc.stderr
    attempts = summary(tmp_path)["attempts"]
    assert len(attempts) == 2, proc.stderr
    # Both ranks fail alike: which one is first is chance, in either attempt.
    assert re.match(r"not restarted: it failed as attempt 1 did \(rank [01] with exit code 1, ValueError: bad "
                    r"config: lr=none\), writing no line that rank [01] had not written in attempt 1",
                    attempts[1]["decision"]), attempts[1]["decision"]
    assert "restart_on_same_error" in proc.stderr
    # Asked to, it restarts all the same: every attempt.
    again = cli(tmp_path, job_env, "--max-restarts", "2", "--restart-on-same-error", script=script)
    assert again.returncode == 1
    assert [a["attempt"] for a in summary(tmp_path)["attempts"]] == [1, 2, 3]


def test_a_stop_request_during_a_failure_rules_the_restart_out(tmp_path, job_env):
    # Rank 0 takes its time on SIGTERM; a Ctrl-C comes meanwhile: no restart.
    script = ("import os, signal, sys, time\n"
              "if os.environ['RANK_ID'] == '1':\n    time.sleep(0.5)\n    sys.exit(4)\n"
              "signal.signal(signal.SIGTERM, lambda *a: (time.sleep(1.5), sys.exit(0)))\n"
              "print('up', flush=True)\ntime.sleep(60)\n")
    path = tmp_path / "ranks.py"
    path.write_text(script)
    proc = subprocess.Popen([DAVINCIRUN, "--nproc", "2", "-l", str(tmp_path / "log"), "--max-restarts", "3",
                             "--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE]),
                             sys.executable, str(path)], cwd=str(tmp_path), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    journal = tmp_path / "log" / "latest" / "events.txt"
    while time.monotonic() < deadline and not (journal.exists() and "stopping on rank_failed" in journal.read_text()):
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 4, err
    attempts = summary(tmp_path)["attempts"]
    assert len(attempts) == 1 and attempts[0]["decision"] == "not restarted: stop requested", attempts


def test_from_python_the_error_carries_every_attempt(tmp_path, job_env):
    path = tmp_path / "ranks.py"
    path.write_text(RANKS)
    with pytest.raises(DistributedRuntimeError) as caught:
        start_and_wait_distributed_train([sys.executable, str(path)], nproc=2, log_dir=str(tmp_path / "log"),
                                         env=dict(job_env, FAIL_IN="0,1"), output_notebook=False,
                                         max_restarts=1, restart_delay=0.1)
    error = caught.value
    assert error.rank == 1 and error.log_file.endswith("rank_1.device_1.attempt2.log")
    assert [(a.attempt, a.restarted, a.root_cause) for a in error.attempts] == [
        (1, True, "RuntimeError: link flap"), (2, False, "RuntimeError: link flap")]
    assert error.attempts[0].first_failure.rank == 1
    assert error.attempts[1].decision == "not restarted: no restarts left (max_restarts 1)"
    assert "attempts:\n  attempt 1: " in str(error)


def test_the_handle_follows_the_attempt_running(tmp_path, job_env):
    path = tmp_path / "ranks.py"
    path.write_text(RANKS)
    job = start_distributed_train([sys.executable, str(path)], nproc=2, log_dir=str(tmp_path / "log"),
                                  env=dict(job_env, FAIL_IN="0"), output_notebook=True, max_restarts=1,
                                  restart_delay=0.1)
    first = list(job.pids)
    assert job.wait() == 0
    last = [r.pid for r in job.result.ranks]
    assert job.pids == last and [p.pid for p in job.fmk_processes] == last
    assert [r.pid for r in job.result.attempts[0].ranks] == first and not set(first) & set(last)
    assert repr(job.result) == "<JobResult exit_code=0, stop_reason=none, 2 rank(s), 2 attempt(s)>"
    assert repr(job.result.attempts[0]) == "<JobAttempt 1: rank_failed, restarted (1 of 1 restarts)>"


def test_restart_options_without_max_restarts_are_warned_of(tmp_path, job_env):
    proc = cli(tmp_path, job_env, "--restart-delay", "5")
    assert proc.returncode == 0, proc.stderr
    assert "restart_delay has no effect without max_restarts (--max-restarts): the job does not restart" in proc.stderr
    with pytest.warns(UserWarning, match="restart_on_same_error has no effect without max_restarts"):
        start_and_wait_distributed_train([sys.executable, "-c", "pass"], nproc=1, env=job_env,
                                         log_dir=str(tmp_path / "log"), output_notebook=False,
                                         restart_on_same_error=True)


def test_dry_run_and_a_successful_end_say_the_job_restarts(tmp_path, job_env):
    dry = subprocess.run([DAVINCIRUN, "--dry-run", "--nproc", "2", "--max-restarts", "3", "--restart-delay", "5",
                          sys.executable, "-c", "pass"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert dry.returncode == 0, dry.stdout
    assert ("restarts: up to 3 after a rank fails or the job stalls, 5 s apart; not when the same error repeats "
            "with no new output") in dry.stdout
    proc = cli(tmp_path, job_env, "--max-restarts", "2", fail_in="0")
    assert proc.returncode == 0, proc.stderr
    assert "all 2 rank(s) exited 0 in attempt 2, after 1 restart(s); logs in " in proc.stderr


def test_torchruns_max_restarts_flag_is_taken(tmp_path, job_env):
    proc = cli(tmp_path, job_env, "--max_restarts", "1", fail_in="0")
    assert proc.returncode == 0, proc.stderr
    assert "--max_restarts (torchrun's flag) is taken as --max-restarts" in proc.stderr
    assert len(summary(tmp_path)["attempts"]) == 2


def test_the_options_are_checked(tmp_path, job_env):
    proc = cli(tmp_path, job_env, "--max-restarts", "-1")
    assert proc.returncode == 2 and "--max-restarts" in proc.stderr
    with pytest.raises(LaunchConfigError, match="max_restarts must be between 0 and 10000"):
        start_and_wait_distributed_train([sys.executable, "-c", "pass"], nproc=1, env=job_env, max_restarts=10001)
    for wrong in ("3", 1.5, True):
        with pytest.raises(OptionTypeError, match=r"max_restarts: expected a number of restarts, got "):
            start_and_wait_distributed_train([sys.executable, "-c", "pass"], nproc=1, env=job_env, max_restarts=wrong)
    with pytest.raises(LaunchConfigError, match="restart_delay must be"):
        start_and_wait_distributed_train([sys.executable, "-c", "pass"], nproc=1, env=job_env, restart_delay=-1)
    assert os.path.isdir(tmp_path)
