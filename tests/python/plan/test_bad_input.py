"""Bad arguments and environment: each gives a clear, typed error naming
what is wrong, and starts nothing (no process, no run directory), from the
Python API and from the `davincirun` command."""

import os
import shutil
import subprocess
import sys

import pytest
from conftest import MARKER_VARIABLE, processes_with_marker

from davincirunsdk import LaunchConfigError, OptionTypeError, RankTableError, start_and_wait_distributed_train

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
    # A missing work_dir is made (as 0.1.x did); one under a file cannot be.
    (dict(command=["true"], work_dir="{tmp}/big.json/sub"), LaunchConfigError,
     "work_dir '{tmp}/big.json/sub' cannot be used: Not a directory"),
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


@pytest.mark.parametrize(
    "kwargs, option",
    [
        (dict(command=[]), "command"),
        (dict(command="python 'unbalanced"), "command"),
        (dict(work_dir="{tmp}/big.json/sub"), "work_dir"),
        (dict(log_dir="{tmp}/big.json"), "log_dir"),  # a file: checked by the job's supervisor process
        (dict(server_id="elsewhere"), "server_id"),
        (dict(rank_table=None), "rank_table"),  # and no RANK_TABLE_FILE
        (dict(env={"A": "x\0y"}), "env"),
        (dict(grace_period=1e20), "grace_period"),
        (dict(drain_timeout=-1), "drain_timeout"),
        (dict(ranks_to_show=[9]), "ranks_to_show"),
    ],
)
def test_an_option_that_breaks_its_rule_is_named(bad, rank_table, job_env, monkeypatch, kwargs, option):
    monkeypatch.delenv("RANK_TABLE_FILE", raising=False)
    args = dict(command=["true"], rank_table=rank_table(2), log_dir=str(bad / "log"), output_notebook=False)
    args.update({k: (v.format(tmp=bad) if isinstance(v, str) else v) for k, v in kwargs.items()})
    args["env"] = dict(job_env, **args.get("env", {}))
    with pytest.raises(LaunchConfigError) as info:
        start_and_wait_distributed_train(args.pop("command"), **args)
    assert info.value.option == option
    assert not (bad / "log").exists()
    assert processes_with_marker(job_env[MARKER_VARIABLE]) == []


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(ranks_to_show="01"), "ranks_to_show: expected a rank id or a list of rank ids, e.g. [0], got '01'"),
        (dict(ranks_to_show=[1.5]), "ranks_to_show: expected a rank id or a list of rank ids"),
        (dict(ranks_to_show=True), "ranks_to_show: expected a rank id or a list of rank ids"),
        (dict(ranks_to_show={0: "a"}), "ranks_to_show: expected a rank id or a list of rank ids"),
        (dict(env="A=B"), "env: expected a dict of variable names to values"),
        (dict(env={"A": None}), "env: expected names as str and values as str, bytes, path or int, got 'A': None"),
        (dict(env={"A": 1.5}), "env: expected names as str and values as str, bytes, path or int, got 'A': 1.5"),
        (dict(env={"A": True}), "env: expected names as str and values as str, bytes, path or int, got 'A': True"),
        (dict(env={1: "x"}), "env: expected names as str and values as str, bytes, path or int, got 1: 'x'"),
        (dict(work_dir=5), "work_dir: expected str, bytes or os.PathLike object, not int"),
        (dict(grace_period="10"), "grace_period: expected a number of seconds, got '10'"),
        (dict(drain_timeout=True), "drain_timeout: expected a number of seconds, got True"),
        (dict(command=None), "command must be a list of strings, e.g. ['python', 'train.py'], got None"),
    ],
)
def test_a_wrong_type_is_a_type_error_naming_the_option(tmp_path, rank_table, job_env, kwargs, words):
    args = dict(command=["true"], rank_table=rank_table(2), log_dir=str(tmp_path / "log"), output_notebook=False)
    args.update(kwargs)
    if isinstance(args.get("env", {}), dict):  # the marker too, so that a started rank would be found
        env = dict(job_env)
        env.update(args.get("env", {}))
        args["env"] = env
    with pytest.raises(TypeError) as info:
        start_and_wait_distributed_train(args.pop("command"), **args)
    assert words in str(info.value)
    assert isinstance(info.value, OptionTypeError) and isinstance(info.value, LaunchConfigError)
    assert info.value.option == words.split(" ")[0].rstrip(":")
    assert not (tmp_path / "log").exists()
    assert processes_with_marker(job_env[MARKER_VARIABLE]) == []


def test_accepted_spellings_of_ranks_and_values(tmp_path, rank_table, job_env):
    # A range or tuple of ranks; an int or a path as a variable's value.
    code = "import os; print(os.environ['A_NUMBER'], os.environ['A_PATH'])"
    job_env = dict(job_env, A_NUMBER=600, A_PATH=tmp_path)
    for ranks in (range(1, 2), (1,), 1):
        assert start_and_wait_distributed_train([sys.executable, "-c", code], rank_table=rank_table(2), env=job_env,
                                                log_dir=str(tmp_path / "log"), ranks_to_show=ranks) == 0
    with open(str(tmp_path / "log" / "latest" / "rank_1.device_1.log")) as f:
        assert f.read() == "600 %s\n" % tmp_path


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
        (["--work-dir", "{tmp}/missing", "true"],
         "--work-dir '{tmp}/missing' cannot be used: No such file or directory"),
    ],
)
def test_the_command_exits_2_with_the_reason_and_starts_nothing(bad, rank_table, job_env, argv, message):
    argv, message = [a.format(tmp=bad) for a in argv], message.format(tmp=bad)
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
