"""Python's output buffering in the ranks: PYTHONUNBUFFERED=1 only where
someone watches the lines as they come (a terminal on the launcher's stdout
or stderr, a notebook cell), else Python's own 8 KiB block buffer, which
costs a flood of print() far less; a value the user sets always wins."""

import os
import pty
import shutil
import subprocess
import sys

import pytest
from conftest import MARKER_VARIABLE

DAVINCIRUN = shutil.which("davincirun")
pytestmark = pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH (pip install . first)")

SHOW = "import os; print('PYTHONUNBUFFERED=%r' % os.environ.get('PYTHONUNBUFFERED'))"


@pytest.fixture(autouse=True)
def no_inherited_setting(monkeypatch):
    """A value in this process's environment would be the user's choice."""
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)


def rank_value(run_dir):
    with open(os.path.join(run_dir, "rank_0.device_0.log")) as f:
        return f.read().strip()


def run(args, job_env, tmp_path, stdout, stderr):
    marker = ["--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE])]
    proc = subprocess.run([DAVINCIRUN] + marker + ["-l", str(tmp_path / "logs")] + args, cwd=str(tmp_path),
                          stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, timeout=60)
    assert proc.returncode == 0
    return rank_value(str(tmp_path / "logs" / "latest"))


@pytest.mark.parametrize("where", ["stdout", "stderr"])
def test_a_terminal_on_either_stream_makes_python_ranks_unbuffered(tmp_path, rank_table, job_env, where):
    leader, follower = pty.openpty()
    try:
        streams = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, where: follower}
        value = run(["-r", rank_table(1), sys.executable, "-c", SHOW], job_env, tmp_path, streams["stdout"],
                    streams["stderr"])
    finally:
        os.close(follower)
        os.close(leader)
    assert value == "PYTHONUNBUFFERED='1'"


def test_files_and_pipes_keep_pythons_buffer_unless_the_user_asks(tmp_path, rank_table, job_env):
    table = rank_table(1)
    assert run(["-r", table, sys.executable, "-c", SHOW], job_env, tmp_path, subprocess.PIPE,
               subprocess.PIPE) == "PYTHONUNBUFFERED=None"
    assert run(["-r", table, "--env", "PYTHONUNBUFFERED=1", sys.executable, "-c", SHOW], job_env, tmp_path,
               subprocess.DEVNULL, subprocess.DEVNULL) == "PYTHONUNBUFFERED='1'"


def test_the_api_follows_the_same_rule(tmp_path, rank_table, job_env):
    from davincirunsdk import start_and_wait_distributed_train

    table = rank_table(1)
    log_dir = str(tmp_path / "api")
    # pytest captures sys.stdout and sys.stderr: nobody watches.
    assert start_and_wait_distributed_train([sys.executable, "-c", SHOW], rank_table=table, log_dir=log_dir,
                                            env=job_env) == 0
    assert rank_value(os.path.join(log_dir, "latest")) == "PYTHONUNBUFFERED=None"
    # A terminal on sys.stdout: a person watches.
    leader, follower = pty.openpty()
    script = ("import sys; from davincirunsdk import start_and_wait_distributed_train as s; "
              "sys.exit(s([sys.executable, '-c', %r], rank_table=%r, log_dir=%r, env=%r))"
              % (SHOW, table, log_dir, job_env))
    try:
        proc = subprocess.run([sys.executable, "-c", script], stdin=subprocess.DEVNULL, stdout=follower,
                              stderr=subprocess.DEVNULL, timeout=60)
    finally:
        os.close(follower)
        os.close(leader)
    assert proc.returncode == 0
    assert rank_value(os.path.join(log_dir, "latest")) == "PYTHONUNBUFFERED='1'"
