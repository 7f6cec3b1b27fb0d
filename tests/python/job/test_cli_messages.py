"""What `davincirun` says about bad input speaks of its own flags, never of
the Python keywords; a command not found gets a short message and a hint.
The Python API says the same in its own words."""

import json
import os
import shutil
import subprocess

import pytest
from conftest import MARKER_VARIABLE

import davincirunsdk
from davincirunsdk import LaunchConfigError, SpawnError

DAVINCIRUN = shutil.which("davincirun")
pytestmark = pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH (pip install . first)")

# The Python names of the options the CLI has flags for, and 0.1.x-style advice.
PYTHON_WORDS = ("rank_table", "work_dir", "log_dir", "server_id", "grace_period", "job_timeout", "wait_timeout",
                "ranks_to_show", "env:", "env=", "pass ")


def cli(args, job_env, cwd, env=None):
    marker = ["--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE])]
    return subprocess.run([DAVINCIRUN] + marker + list(args), cwd=str(cwd), env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60, text=True)


def said(proc, tmp_path):
    """What davincirun wrote to stderr, the test's own directory (whose name
    may hold anything) replaced by TMP."""
    return proc.stderr.replace(str(tmp_path), "TMP")


def two_server_table(path):
    table = {"version": "1.0", "server_count": "2", "status": "completed", "server_list": [
        {"server_id": "10.255.0.1", "device": [{"device_id": "0", "device_ip": "192.0.2.1", "rank_id": "0"}]},
        {"server_id": "10.255.0.2", "device": [{"device_id": "0", "device_ip": "192.0.2.2", "rank_id": "1"}]}]}
    path.write_text(json.dumps(table))
    return str(path)


@pytest.mark.parametrize("case", ["no_table", "rank_out_of_world", "missing_dir", "dir_is_a_file", "bad_duration",
                                  "ambiguous_server", "identity_variable"])
def test_cli_messages_name_the_flags(tmp_path, rank_table, job_env, case):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK_TABLE_FILE", "MA_CURRENT_HOST_IP", "XDL_IP")}
    (tmp_path / "a_file").write_text("")
    table = rank_table(2)
    args, expected, status = {
        "no_table": ([], "no rank table: set RANK_TABLE_FILE or give --rank-table (the rank table file", 2),
        "rank_out_of_world": (["-r", table, "--ranks-to-show", "0,5"],
                              "--ranks-to-show: rank 5 does not exist (the world size is 2)", 2),
        "missing_dir": (["-r", table, "-w", str(tmp_path / "nowhere")], "--work-dir 'TMP/nowhere' cannot be used", 2),
        "dir_is_a_file": (["-r", table, "--work-dir", str(tmp_path / "a_file")],
                          "--work-dir 'TMP/a_file' is not a directory", 2),
        "bad_duration": (["-r", table, "--wait-timeout", "1e20"],
                         "--wait-timeout must be a number of seconds between 0 (no waiting) and", 2),
        "ambiguous_server": (["-r", two_server_table(tmp_path / "two.json")],
                             "say which one it is with --server-id", 2),
        "identity_variable": (["-r", table, "--env", "RANK_ID=7"],
                              "warning: RANK_ID has no effect among the extra variables", 0),
    }[case]
    proc = cli(args + ["true"], job_env, tmp_path, env=env)
    text = said(proc, tmp_path)
    assert proc.returncode == status, text
    assert expected in text
    # The rank table's own field server_id may be quoted; the option is not.
    allowed = ("server_id",) if case == "ambiguous_server" else ()
    leaked = [word for word in PYTHON_WORDS if word in text and word not in allowed]
    assert not leaked, "Python names in the CLI's message %r: %s" % (text, leaked)


def test_python_names_its_keywords(tmp_path, monkeypatch):
    monkeypatch.delenv("RANK_TABLE_FILE", raising=False)
    with pytest.raises(LaunchConfigError) as info:
        davincirunsdk.start_distributed_train(["true"], log_dir=str(tmp_path / "log"))
    assert info.value.option == "rank_table"
    assert "no rank table: set RANK_TABLE_FILE or give rank_table (" in str(info.value)


def path_of(tmp_path, programs, filler=6):
    """A PATH: a directory holding `programs` (executables that succeed),
    then `filler` empty ones."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in programs:
        (bin_dir / name).symlink_to(shutil.which("true"))
    dirs = [str(bin_dir)]
    for i in range(filler):
        (tmp_path / ("empty%d" % i)).mkdir()
        dirs.append(str(tmp_path / ("empty%d" % i)))
    return ":".join(dirs)


@pytest.mark.parametrize("typed, programs, hint", [
    ("pyhton", ["python", "perl"], "; did you mean 'python'?"),
    ("python", ["python3", "python3.11"], "; did you mean 'python3'?"),
    ("xyzzy-no-such-tool", ["python"], None),
])
def test_cli_command_not_found_is_short_with_a_hint(tmp_path, rank_table, job_env, typed, programs, hint):
    path = path_of(tmp_path, programs)
    proc = cli(["-r", rank_table(2), "--env", "PATH=" + path, typed, "train.py"], job_env, tmp_path)
    text = said(proc, tmp_path)
    assert proc.returncode == 127, text
    first = text.splitlines()[0]
    assert first.startswith("davincirun: rank 0: cannot run '%s': command not found in PATH (" % typed)
    assert "TMP/bin, TMP/empty0, TMP/empty1 and 4 more directories)" in first
    assert path.replace(str(tmp_path), "TMP") not in text  # the whole PATH only with -v
    if hint:
        assert first.endswith(hint)
    else:
        assert "did you mean" not in text
    assert "davincirun: (davincirun -v prints the whole PATH)" in text
    verbose = cli(["-v", "-r", rank_table(2), "--env", "PATH=" + path, typed], job_env, tmp_path)
    assert verbose.returncode == 127
    assert "davincirun: PATH searched: %s\n" % path in verbose.stderr


def test_python_command_not_found_is_short_with_a_hint(tmp_path, rank_table, job_env):
    path = path_of(tmp_path, ["python3"])
    env = dict(job_env, PATH=path)
    with pytest.raises(SpawnError) as info:
        davincirunsdk.start_distributed_train(["python", "train.py"], rank_table=rank_table(1), env=env,
                                              log_dir=str(tmp_path / "log"), output_notebook=False)
    message = str(info.value).replace(str(tmp_path), "TMP")
    assert message == ("rank 0: cannot run 'python': command not found in PATH "
                       "(TMP/bin, TMP/empty0, TMP/empty1 and 4 more directories); did you mean 'python3'?")
    assert info.value.search_path == path
    assert info.value.exit_code == 127
    # A command given as a path is not looked up: no PATH to report.
    with pytest.raises(SpawnError) as info:
        davincirunsdk.start_distributed_train([str(tmp_path / "missing")], rank_table=rank_table(1), env=job_env,
                                              log_dir=str(tmp_path / "log"), output_notebook=False)
    assert info.value.search_path is None


def test_a_program_alone_runs_its_supervisor_as_a_fork_of_itself(tmp_path, rank_table):
    """davincirun copied alone (no davincirun-supervisor beside it) runs the
    job: its supervisor is a forked copy of itself, named davincirun-supe.
    DAVINCIRUN_SUPERVISOR names a program to start instead: one that is not
    there is refused, naming it; the real one runs the job."""
    alone = tmp_path / "bin" / "davincirun"
    alone.parent.mkdir()
    shutil.copy2(os.path.realpath(DAVINCIRUN), str(alone))
    env = {k: v for k, v in os.environ.items() if k != "DAVINCIRUN_SUPERVISOR"}
    # The rank's parent is the job's supervisor process.
    show_parent = ["sh", "-c", 'echo "exe=$(readlink /proc/$PPID/exe) comm=$(cat /proc/$PPID/comm)"']

    def run():
        return subprocess.run([str(alone), "-r", rank_table(1)] + show_parent, cwd=str(tmp_path), env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60,
                              text=True)

    proc = run()
    assert proc.returncode == 0, proc.stderr
    assert "exe=%s comm=davincirun-supe" % alone in proc.stdout, proc.stdout
    env["DAVINCIRUN_SUPERVISOR"] = str(tmp_path / "bin" / "davincirun-supervisor")
    proc = run()
    assert proc.returncode == 2, proc.stderr
    assert said(proc, tmp_path) == "davincirun: DAVINCIRUN_SUPERVISOR='TMP/bin/davincirun-supervisor' is not an " \
                                   "executable file\n", proc.stderr
    program = os.path.join(os.path.dirname(os.path.realpath(DAVINCIRUN)), "davincirun-supervisor")
    env["DAVINCIRUN_SUPERVISOR"] = program
    proc = run()
    assert proc.returncode == 0, proc.stderr
    assert "exe=%s comm=davincirun-supe" % os.path.realpath(program) in proc.stdout, proc.stdout
