"""Restarts of real training (docs/restarts.md): PyTorch DDP on gloo
(examples/train_digits.py with a checkpoint per epoch) and MindSpore's
dynamic cluster (examples/mindspore/train_digits.py), each with a rank
SIGKILLed mid-run. The PyTorch job resumes from its checkpoint and ends
exactly where a run never interrupted ends; MindSpore's scheduler and
workers start again together and finish."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import MARKER_VARIABLE, REPO, needs_modules, processes_with_marker
from log_watch import wait_for_text

DAVINCIRUN = shutil.which("davincirun")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH (pip install . first)")]

EXAMPLES = os.path.join(REPO, "examples")


def environ_of(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
    except OSError:
        return {}


def member_pid(marker, rank, role=b"", timeout=120.0):
    """The pid of the live process of the job with RANK_ID `rank` (and MS_ROLE `role` when given)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in processes_with_marker(marker):
            env = environ_of(pid)
            if env.get(b"RANK_ID") == str(rank).encode() and (not role or env.get(b"MS_ROLE") == role):
                return pid
        time.sleep(0.05)
    raise AssertionError("no rank %s of the job" % rank)


def start(tmp_path, job_env, log, *args):
    argv = [DAVINCIRUN, "--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE]), "-l", str(log)] + list(args)
    return subprocess.Popen(argv, cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def run_dir_of(log, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not os.path.isdir(os.path.join(str(log), "latest")):
        assert time.monotonic() < deadline, "no run directory in %s" % log
        time.sleep(0.05)
    return os.path.realpath(os.path.join(str(log), "latest"))


def summary(run_dir):
    with open(os.path.join(run_dir, "summary.json")) as f:
        return json.load(f)


@needs_modules("torch", "sklearn")
def test_a_killed_rank_restarts_the_job_which_resumes_and_ends_as_an_uninterrupted_run(tmp_path, job_env):
    train = [sys.executable, os.path.join(EXAMPLES, "train_digits.py"), "--epochs", "8"]
    table = ["-r", os.path.join(EXAMPLES, "rank_table_4p.json")]
    # The run never interrupted.
    plain = start(tmp_path, job_env, tmp_path / "plain", *table, *train, "--checkpoint", str(tmp_path / "ckpt0"))
    _, err = plain.communicate(timeout=300)
    assert plain.returncode == 0, err
    with open(os.path.join(run_dir_of(tmp_path / "plain"), "rank_0.device_0.log")) as f:
        expected = f.read()
    # The same, rank 2 SIGKILLed once rank 0 saved epoch 3. Rank 0 saves an epoch after printing
    # it, so rank 2's line of epoch 3 can come before the save; its line of epoch 4 cannot (epoch 4's
    # gradients are averaged with rank 0, which starts epoch 4 after the save).
    job = start(tmp_path, job_env, tmp_path / "log", "--max-restarts", "3", *table, *train, "--checkpoint",
                str(tmp_path / "ckpt"))
    run = run_dir_of(tmp_path / "log")
    wait_for_text(os.path.join(run, "rank_2.device_2.log"), "rank 2 epoch  4/8", timeout=180.0)
    os.kill(member_pid(job_env[MARKER_VARIABLE], 2), signal.SIGKILL)
    _, err = job.communicate(timeout=300)
    assert job.returncode == 0, err
    assert "attempt 1 of 4: rank 2 (pid " in err and "failed with signal 9 (SIGKILL)" in err, err
    assert "restarting the job in 1 s (attempt 2 of 4)" in err
    record = summary(run)
    attempts = record["attempts"]
    assert [(a["attempt"], a["stop_reason"], a["restarted"]) for a in attempts] == [
        (1, "rank_failed", True), (2, "none", False)], attempts
    assert attempts[0]["first_failure"]["rank"] == 2 and attempts[0]["first_failure"]["signal"] == signal.SIGKILL
    with open(os.path.join(run, "rank_0.device_0.attempt2.log")) as f:
        resumed = f.read()
    match = re.search(r"rank 0: resumed after epoch (\d+) from .* \(restart 1\)", resumed)
    assert match and int(match.group(1)) >= 3, resumed
    # The epochs after the checkpoint only, and the same model at the end: the same accuracy, and
    # parameters equal to float rounding (gloo's sums are not bit-for-bit alike from run to run).
    assert "epoch  1/8" not in resumed
    for line in ("final test accuracy", "replicas in sync: True"):
        [want] = [x for x in expected.splitlines() if x.startswith(line)]
        assert want in resumed, (want, resumed[-2000:])
    checksums = [float(re.search(r"parameter checksum: (\S+)", text).group(1)) for text in (expected, resumed)]
    assert checksums[1] == pytest.approx(checksums[0], rel=1e-5), checksums
    print("digits: the restarted run's checksum %.17g, the uninterrupted run's %.17g" % tuple(checksums[::-1]))
    # The first attempt's logs are kept beside the second's.
    assert os.path.exists(os.path.join(run, "rank_2.device_2.log"))
    assert processes_with_marker(job_env[MARKER_VARIABLE]) == []


@pytest.mark.mindspore
def test_a_killed_worker_restarts_the_scheduler_and_every_worker(tmp_path, rank_table, job_env, mindspore_python):
    example = os.path.join(EXAMPLES, "mindspore", "train_digits.py")
    job = start(tmp_path, job_env, tmp_path / "log", "--launch-mode", "dynamic-cluster", "--max-restarts", "1",
                "--job-timeout", "600", "-r", rank_table(2), mindspore_python, example, "--epochs", "6")
    run = run_dir_of(tmp_path / "log")
    wait_for_text(os.path.join(run, "rank_1.device_1.log"), "rank 1 epoch  2/", timeout=180.0)
    first_scheduler = member_pid(job_env[MARKER_VARIABLE], 0, b"MS_SCHED")
    os.kill(member_pid(job_env[MARKER_VARIABLE], 1, b"MS_WORKER"), signal.SIGKILL)
    _, err = job.communicate(timeout=600)
    assert job.returncode == 0, err
    assert "attempt 1 of 2: rank 1 (pid " in err and "(attempt 2 of 2)" in err
    attempts = summary(run)["attempts"]
    assert [a["restarted"] for a in attempts] == [True, False]
    # Scheduler and workers all ran again, with a scheduler port of their own.
    for name in ("scheduler.attempt2.log", "rank_0.device_0.attempt2.log", "rank_1.device_1.attempt2.log"):
        assert os.path.getsize(os.path.join(run, name)) > 0, name
    with open(os.path.join(run, "rank_1.device_1.attempt2.log")) as f:
        text = f.read()
    assert re.search(r"rank 1 final test accuracy: ([0-9.]+)", text), text[-2000:]
    assert first_scheduler not in processes_with_marker(job_env[MARKER_VARIABLE])
    for entry in summary(run)["ranks"]:
        assert entry["exit_code"] == 0, entry
    ports = set()
    for name in ("rank_1.device_1.log", "rank_1.device_1.attempt2.log"):
        with open(os.path.join(run, name)) as f:
            ports.add(re.search(r"scheduler [^:\s]+:(\d+)", f.read()).group(1))
    assert len(ports) == 2, ports
    assert processes_with_marker(job_env[MARKER_VARIABLE]) == []
