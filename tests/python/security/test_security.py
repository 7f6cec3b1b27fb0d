"""Security promises, proved on real jobs through the Python API and the
`davincirun` command:

1. no shell ever runs: every rank receives its arguments byte for byte;
2. values from the rank table or the environment never become paths outside
   the log directory;
3. nothing planted in the log directory (symlinks) is followed or written;
4. every file and directory the job writes is private, whatever the umask;
5. the device lock directory is absolute (relative values are refused);
6. temporary directories are fresh, private, unpredictable, and removed
   without following anything a rank put there.

The device lock files themselves are covered by test_device_lock.py and
tests/cpp/test_device_lock.cpp; opening a planted log file or private file
by tests/cpp/test_file_safety.cpp."""

import os
import shlex
import sys

import pytest
from conftest import python_command, write_rank_table
from security_support import (
    argv_in_log,
    assert_created_only_in_log_dir,
    dump_argv_script,
    needs_cli,
    program_named_with_spaces,
    run_cli,
    run_job,
    table_with,
    tree,
    tricky_arguments,
)

from davincirunsdk import LaunchConfigError, RankTableError, SpawnError, start_distributed_train


def test_api_list_arguments_reach_every_rank_byte_for_byte(tmp_path, rank_table, job_env):
    markers = tmp_path / "markers"
    markers.mkdir()
    argv = [sys.executable, dump_argv_script(tmp_path)] + tricky_arguments(markers)
    job = run_job(argv, tmp_path, rank_table(2), job_env)
    for rank in job.result.ranks:
        assert argv_in_log(rank.log_path) == [os.fsencode(a) for a in argv]
    assert os.listdir(str(markers)) == []  # nothing ran `touch`
    assert sorted(os.listdir(str(tmp_path))) == ["dump_argv.py", "log", "markers", "rank_table.json"]


def test_api_arguments_that_are_not_utf8_pass_unchanged(tmp_path, rank_table, job_env):
    raw = [b"\xff\xfe not utf-8", b"latin-1 \xe9t\xe9"]
    argv = [sys.executable, dump_argv_script(tmp_path)] + [os.fsdecode(a) for a in raw]
    job = run_job(argv, tmp_path, rank_table(1), job_env)
    assert argv_in_log(job.result.ranks[0].log_path)[2:] == raw
    job = run_job([os.fsencode(a) for a in argv], tmp_path, rank_table(1), job_env)  # bytes work too
    assert argv_in_log(job.result.ranks[0].log_path)[2:] == raw


def test_api_env_values_that_are_not_utf8_pass_unchanged(tmp_path, rank_table, job_env):
    code = "import os; print('VALUES=' + os.environb[b'RAW_A'].hex() + ',' + os.environb[b'RAW_B'].hex())"
    job = run_job(python_command(code), tmp_path, rank_table(1), job_env,
                  env={"RAW_A": b"\xff\xfe $(x) ;", "RAW_B": os.fsdecode(b"caf\xe9\nnext")})
    with open(job.result.ranks[0].log_path) as f:
        assert f.read() == "VALUES=%s,%s\n" % (b"\xff\xfe $(x) ;".hex(), b"caf\xe9\nnext".hex())


@pytest.mark.parametrize("program", [b"/nonexistent/\xff program", b"no-such-program-\xff"])
def test_a_missing_program_named_in_bytes_that_are_not_utf8_is_a_spawn_error(tmp_path, rank_table, job_env,
                                                                            program):
    with pytest.raises(SpawnError) as info:
        start_distributed_train([program, "arg"], log_dir=str(tmp_path / "log"), rank_table=rank_table(1),
                                env=job_env, output_notebook=False)
    assert os.fsdecode(program) in info.value.command and info.value.exit_code == 127
    assert os.fsdecode(program) in str(info.value)


@needs_cli
@pytest.mark.parametrize("separator", [["--"], []], ids=["after --", "after the first non-option"])
def test_cli_arguments_reach_every_rank_byte_for_byte(tmp_path, rank_table, job_env, separator):
    markers = tmp_path / "markers"
    markers.mkdir()
    argv = [os.fsencode(a) for a in [sys.executable, dump_argv_script(tmp_path)] + tricky_arguments(markers)]
    argv.append(b"\xff\xfe not utf-8")
    proc = run_cli(["-r", rank_table(2)] + separator + argv, job_env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    latest = tmp_path / "log" / "latest"
    for rank in (0, 1):
        assert argv_in_log(str(latest / ("rank_%d.device_%d.log" % (rank, rank)))) == argv
    assert os.listdir(str(markers)) == []


def test_argv0_with_spaces_and_quotes_by_path_and_from_path(tmp_path, rank_table, job_env):
    bin_dir, name = program_named_with_spaces(tmp_path)
    script = dump_argv_script(tmp_path)
    by_path = [str(bin_dir / name), script, "a b"]
    job = run_job(by_path, tmp_path, rank_table(1), job_env)
    assert argv_in_log(job.result.ranks[0].log_path) == [os.fsencode(a) for a in by_path]
    # Looked up in the ranks' PATH, as execvp would; argv[0] stays as given.
    from_path = [name, script, "a b"]
    job = run_job(from_path, tmp_path, rank_table(1), job_env,
                  env={"PATH": str(bin_dir) + os.pathsep + os.environ.get("PATH", "")})
    assert argv_in_log(job.result.ranks[0].log_path) == [os.fsencode(a) for a in from_path]


def test_string_command_is_split_like_a_shell_but_never_run_by_one(tmp_path, rank_table, job_env):
    markers = tmp_path / "markers"
    markers.mkdir()
    script = dump_argv_script(tmp_path)
    quoted = lambda name: os.path.join(str(markers), name)  # noqa: E731
    command = "%s %s 'a b' \"c d\" e\\ f 'it'\"'\"'s' '' '$(touch %s)' $(touch %s) `touch %s` ';' '*' ~ $HOME" % (
        shlex.quote(sys.executable), shlex.quote(script), quoted("one"), quoted("two"), quoted("three"))
    expected = [sys.executable, script, "a b", "c d", "e f", "it's", "", "$(touch %s)" % quoted("one"),
                "$(touch", quoted("two") + ")", "`touch", quoted("three") + "`", ";", "*", "~", "$HOME"]
    job = run_job(command, tmp_path, rank_table(1), job_env)
    assert argv_in_log(job.result.ranks[0].log_path) == [os.fsencode(a) for a in expected]
    assert os.listdir(str(markers)) == []


@pytest.mark.parametrize("command", ["python 'unterminated", 'python "unterminated', "python trailing\\"])
def test_string_command_that_cannot_be_split_is_refused(tmp_path, rank_table, job_env, command):
    with pytest.raises(LaunchConfigError, match="cannot split the command"):
        start_distributed_train(command, log_dir=str(tmp_path / "log"), rank_table=rank_table(1), env=job_env)
    assert not (tmp_path / "log").exists()


@pytest.mark.parametrize("field", ["rank_id", "device_id"])
@pytest.mark.parametrize("value", ["../../x", "/etc/passwd", "a/b", "..", ".", "0/../../x", "0 ", "-1", "1e3"])
def test_rank_table_values_that_are_not_numbers_are_refused(tmp_path, job_env, field, value):
    device = {"device_id": "0", "rank_id": "0"}
    device[field] = value
    table = table_with(tmp_path, device)
    before = tree(tmp_path)
    with pytest.raises(RankTableError) as info:
        start_distributed_train(["true"], log_dir=str(tmp_path / "log"), rank_table=table, env=job_env)
    assert info.value.pointer == "/server_list/0/device/0/" + field
    assert tree(tmp_path) == before


def test_a_path_like_server_id_is_only_a_name(tmp_path, job_env):
    server_id = "../../evil/x"
    table = write_rank_table(tmp_path / "table.json", [0], server_id=server_id)
    log_dir = tmp_path / "deep" / "er" / "log"
    before = tree(tmp_path)
    job = run_job(["true"], tmp_path, table, job_env, log_dir=log_dir, server_id=server_id)
    assert os.path.dirname(job.run_dir) == str(log_dir)
    assert_created_only_in_log_dir(before, tree(tmp_path))


@pytest.mark.parametrize("job_id", ["../../escape", "/etc/cron.d/x", "..", ".", "a/b/c", "x\ny\x1b[31m", " "])
@pytest.mark.parametrize("source", ["JOB_ID", "env=", "BATCH_JOB_ID", "MA_VJ_NAME"])
def test_a_job_id_never_becomes_a_path(tmp_path, rank_table, job_env, monkeypatch, job_id, source):
    for name in ("JOB_ID", "BATCH_JOB_ID", "MA_VJ_NAME"):
        monkeypatch.delenv(name, raising=False)
    extra = {}
    if source == "env=":
        extra = {"JOB_ID": job_id}
    else:
        monkeypatch.setenv(source, job_id)
    table = rank_table(1)
    log_dir = tmp_path / "deep" / "er" / "log"
    before = tree(tmp_path)
    job = run_job(python_command("import os; print('JOB_ID=' + os.environ['JOB_ID'])"), tmp_path, table, job_env,
                  log_dir=log_dir, env=extra)
    assert os.path.dirname(job.run_dir) == str(log_dir)
    assert job.job_id and all(c.isalnum() or c in "-_" for c in job.job_id)
    assert os.path.basename(job.run_dir).endswith("-" + job.job_id)
    with open(job.result.ranks[0].log_path) as f:
        assert f.read() == "JOB_ID=%s\n" % job.job_id  # the ranks see the same safe id
    assert_created_only_in_log_dir(before, tree(tmp_path))


def test_a_job_id_too_long_for_a_file_name_is_a_clear_error(tmp_path, rank_table, job_env):
    with pytest.raises(LaunchConfigError, match="cannot create run directory .*: File name too long"):
        start_distributed_train(["true"], log_dir=str(tmp_path / "log"), rank_table=rank_table(1),
                                env=dict(job_env, JOB_ID="j" * 300))
    assert os.listdir(str(tmp_path / "log")) == []
