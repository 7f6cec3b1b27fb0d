"""Bad arguments and environment: each gives a clear, typed error naming
what is wrong, and starts nothing (no process, no run directory), from the
Python API and from the `davincirun` command."""

import os
import shutil
import subprocess

import pytest
from conftest import MARKER_VARIABLE, processes_with_marker

from davincirunsdk import LaunchConfigError, RankTableError, start_and_wait_distributed_train

DAVINCIRUN = shutil.which("davincirun")
needs_cli = pytest.mark.skipif(DAVINCIRUN is None, reason="the davincirun command is not installed")


@pytest.fixture
def bad(tmp_path):
    """Files that are not rank tables: a symlink loop, a 1 GiB sparse file, a
    directory without a table."""
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    with open(str(tmp_path / "big.json"), "wb") as f:
        f.truncate(1 << 30)
    (tmp_path / "no_table").mkdir()
    return tmp_path


CASES = [
    # (keyword arguments, error type, words the message must hold)
    (dict(command=[]), LaunchConfigError, "no command given"),
    (dict(command=["true"], work_dir="{tmp}/missing"), LaunchConfigError,
     "work_dir '{tmp}/missing' cannot be used: No such file or directory"),
    (dict(command=["true"], rank_table="{tmp}/no_table"), RankTableError,
     "{tmp}/no_table: no rank table in this directory: neither jobstart_hccl.json nor hccl.json"),
    (dict(command=["true"], rank_table="{tmp}/loop1"), RankTableError,
     "{tmp}/loop1: cannot open the rank table: Too many levels of symbolic links"),
    (dict(command=["true"], rank_table="{tmp}/big.json"), RankTableError,
     "{tmp}/big.json: file is larger than 64 MiB; not a rank table"),
    (dict(command=["true"], env={"A": "x\0y"}), LaunchConfigError, "env: the value of A contains a NUL character"),
    (dict(command=["true"], env={"A=B": "x"}), LaunchConfigError, "env: invalid variable name 'A=B'"),
]


@pytest.mark.parametrize("kwargs, error, message", CASES, ids=[c[2].split(":")[0][:30] for c in CASES])
def test_bad_input_is_a_clear_error_and_starts_nothing(bad, rank_table, job_env, kwargs, error, message):
    kwargs = {k: (v.format(tmp=bad) if isinstance(v, str) else v) for k, v in kwargs.items()}
    kwargs.setdefault("rank_table", rank_table(2))
    env = dict(job_env, **kwargs.pop("env", {}))
    with pytest.raises(error) as info:
        start_and_wait_distributed_train(log_dir=str(bad / "log"), env=env, output_notebook=False, wait_timeout=0,
                                         **kwargs)
    assert message.format(tmp=bad) in str(info.value)
    assert not (bad / "log").exists()
    assert processes_with_marker(job_env[MARKER_VARIABLE]) == []


def test_an_unknown_keyword_is_a_type_error(rank_table, tmp_path):
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        start_and_wait_distributed_train(["true"], rank_table=rank_table(1), log_dir=str(tmp_path / "log"), bogus=1)
    assert not (tmp_path / "log").exists()


@needs_cli
@pytest.mark.parametrize(
    "argv, message",
    [
        (["--bogus", "true"], "unknown option '--bogus'"),
        ([], "no command"),
        (["-r", "{tmp}/loop1", "--wait-timeout", "0", "true"], "Too many levels of symbolic links"),
        (["-r", "{tmp}/big.json", "--wait-timeout", "0", "true"], "file is larger than 64 MiB"),
        (["-r", "{tmp}/no_table", "--wait-timeout", "0", "true"], "neither jobstart_hccl.json nor hccl.json"),
        (["--work-dir", "{tmp}/missing", "true"], "cannot be used: No such file or directory"),
    ],
)
def test_the_command_exits_2_with_the_reason_and_starts_nothing(bad, rank_table, job_env, argv, message):
    argv = [a.format(tmp=bad) for a in argv]
    if "-r" not in argv and argv and argv[0] != "--bogus":
        argv = ["-r", rank_table(2)] + argv
    env = dict(os.environ, **job_env)
    proc = subprocess.run([DAVINCIRUN, "--log-dir", str(bad / "log")] + argv, cwd=str(bad), env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert not (bad / "log").exists()
    assert processes_with_marker(job_env[MARKER_VARIABLE]) == []
