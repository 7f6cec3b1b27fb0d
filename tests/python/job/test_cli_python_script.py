"""`davincirun train.py`, the form davincirunsdk 0.1.x documented: a first
word naming a Python script without execute permission runs under Python,
and davincirun says so. The interpreter is the one next to the program (a
venv's), else one in PATH, unless DAVINCIRUN_PYTHON names one; the exact
order is tested in tests/cpp/test_python_interpreter.cpp."""

import os
import shutil
import subprocess
import sys
import sysconfig

import pytest
from conftest import MARKER_VARIABLE

DAVINCIRUN = shutil.which("davincirun")
# Where the program and its supervisor are: an installation's scripts
# directory, or a build's.
BIN = os.path.dirname(os.path.realpath(DAVINCIRUN)) if DAVINCIRUN else None
pytestmark = pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH")

# Prints which interpreter runs it, its arguments and whether the launcher's
# own DAVINCIRUN_PYTHON leaked into the ranks.
SCRIPT = (
    "import os, sys\n"
    "print('python', sys.executable, 'prefix', sys.prefix, 'argv', sys.argv[1:], "
    "'leaked', os.environ.get('DAVINCIRUN_PYTHON'))\n"
)


def copy_programs(directory):
    """davincirun and its supervisor, copied (not linked: the program finds
    its interpreter from its own path) into `directory`."""
    os.makedirs(str(directory), exist_ok=True)
    for name in ("davincirun", "davincirun-supervisor"):
        shutil.copy2(os.path.realpath(os.path.join(BIN, name)), os.path.join(str(directory), name))
    return os.path.join(str(directory), "davincirun")


def run(argv, cwd, job_env, path):
    env = dict(os.environ, PATH=path)
    env.pop("DAVINCIRUN_PYTHON", None)
    env.pop("DAVINCIRUN_SUPERVISOR", None)
    return subprocess.run(argv, cwd=str(cwd), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=60)


def write_script(tmp_path, mode=0o644, text=SCRIPT):
    script = tmp_path / "train.py"
    script.write_text(text)
    script.chmod(mode)
    return script


def marker(job_env):
    return ["--env", "%s=%s" % (MARKER_VARIABLE, job_env[MARKER_VARIABLE])]


def test_run_directly_it_uses_python3_in_path(tmp_path, rank_table, job_env):
    write_script(tmp_path)
    program = copy_programs(tmp_path / "programs")
    path_bin = tmp_path / "path-bin"
    path_bin.mkdir()
    (path_bin / "python3").symlink_to(sys.executable)
    # Only path-bin: a program of a wheel looks for python3.X in PATH first.
    proc = run([program] + marker(job_env) + ["-r", rank_table(2), "train.py", "--epochs", "1"], tmp_path, job_env,
               str(path_bin))
    assert proc.returncode == 0, proc.stderr
    python = str(path_bin / "python3")
    # The prefix that interpreter reports when started by that name (through a
    # symlink outside a venv, CPython 3.7 reports its base installation).
    prefix = subprocess.run([python, "-c", "import sys; print(sys.prefix)"], stdout=subprocess.PIPE, text=True,
                            check=True, timeout=60).stdout.strip()
    notes = [line for line in proc.stderr.splitlines() if "without execute permission" in line]
    assert notes == ["davincirun: train.py is a Python script without execute permission: running it with %s"
                     % python]
    for rank in range(2):
        assert ("[rank %d] python %s prefix %s argv ['--epochs', '1'] leaked None" % (rank, python, prefix)
                in proc.stdout)

    # --dry-run shows the command that would run.
    proc = run([program, "-r", rank_table(2), "--dry-run", "train.py"], tmp_path, job_env, str(path_bin))
    assert proc.returncode == 0, proc.stderr
    assert "%s train.py" % python in proc.stdout


def test_in_a_venv_it_uses_the_venvs_interpreter(tmp_path, rank_table, job_env):
    """<venv>/bin/davincirun, as a wheel installs it, runs scripts with
    <venv>/bin/pythonX.Y (the version its wheel was built for) or
    <venv>/bin/python3 (a program built without one), whatever PATH says."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    program = copy_programs(venv / "bin")
    write_script(tmp_path)
    proc = run([program] + marker(job_env) + ["-r", rank_table(1), "train.py"], tmp_path, job_env, "/usr/bin:/bin")
    assert proc.returncode == 0, proc.stderr
    names = ["python%d.%d" % sys.version_info[:2], "python3"]
    python = next((str(venv / "bin" / n) for n in names if "running it with %s\n" % (venv / "bin" / n) in proc.stderr),
                  None)
    assert python, proc.stderr
    assert "[rank 0] python %s prefix %s argv [] leaked None" % (python, venv) in proc.stdout


def test_installed_here_it_uses_this_interpreter(tmp_path, rank_table, job_env):
    """The davincirun that pip installed for this interpreter (its scripts
    directory) finds this interpreter's pythonX.Y beside itself, with no PATH."""
    scripts = os.path.realpath(sysconfig.get_path("scripts"))
    if BIN != scripts:
        pytest.skip("the davincirun on PATH (%s) is not installed in this interpreter's %s" % (BIN, scripts))
    version = "python%d.%d" % sys.version_info[:2]
    python = os.path.join(scripts, version)
    if not os.access(python, os.X_OK):
        pytest.skip("%s has no %s" % (scripts, version))
    write_script(tmp_path)
    proc = run([DAVINCIRUN] + marker(job_env) + ["-r", rank_table(1), "train.py"], tmp_path, job_env, "/nonexistent")
    assert proc.returncode == 0, proc.stderr
    assert "train.py is a Python script without execute permission: running it with %s\n" % python in proc.stderr
    assert "[rank 0] python %s prefix %s argv [] leaked None" % (python, sys.prefix) in proc.stdout


def test_davincirun_python_chooses_and_does_not_reach_the_ranks(tmp_path, rank_table, job_env):
    write_script(tmp_path)
    env = dict(os.environ, PATH="/nonexistent", DAVINCIRUN_PYTHON=sys.executable)
    env.pop("DAVINCIRUN_SUPERVISOR", None)
    proc = subprocess.run([DAVINCIRUN] + marker(job_env) + ["-r", rank_table(1), "train.py"], cwd=str(tmp_path),
                          env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "train.py is a Python script without execute permission: running it with %s\n" % sys.executable \
        in proc.stderr
    assert "[rank 0] python %s prefix %s argv [] leaked None" % (sys.executable, sys.prefix) in proc.stdout


def test_other_commands_are_left_alone(tmp_path, rank_table, job_env):
    # An executable script runs itself (its #! line), with nothing said.
    write_script(tmp_path, 0o755, "#!%s\n%s" % (sys.executable, SCRIPT))
    program = copy_programs(tmp_path / "programs")
    proc = run([program] + marker(job_env) + ["-r", rank_table(1), "./train.py"], tmp_path, job_env, "/usr/bin:/bin")
    assert proc.returncode == 0, proc.stderr
    assert "without execute permission" not in proc.stderr
    assert "[rank 0] python %s" % sys.executable in proc.stdout
    # A .py name that is no file here is looked up in PATH as usual (not found: 127).
    proc = run([program] + marker(job_env) + ["-r", rank_table(1), "missing.py"], tmp_path, job_env, "/usr/bin:/bin")
    assert proc.returncode == 127
    assert "without execute permission" not in proc.stderr


def test_a_job_that_cannot_start_says_nothing_of_running_the_script(tmp_path):
    # No rank table: the plan fails, so no Python runs it either.
    write_script(tmp_path)
    env = dict(os.environ, DAVINCIRUN_PYTHON=sys.executable)
    for name in ("RANK_TABLE_FILE", "RANK_TABLE_FILE_V_1_0", "DAVINCIRUN_SUPERVISOR"):
        env.pop(name, None)
    proc = subprocess.run([DAVINCIRUN, "--wait-timeout", "0", "train.py"], cwd=str(tmp_path), env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "rank table" in proc.stderr
    assert "without execute permission" not in proc.stderr
