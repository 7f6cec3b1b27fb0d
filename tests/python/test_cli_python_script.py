"""`davincirun train.py`, the form davincirunsdk 0.1.x documented: a first
word naming a Python script without execute permission runs under Python,
and davincirun says so. Through the console script (which passes its own
interpreter) and the compiled program run directly (which finds the
interpreter of the installation holding it, else python3 in PATH)."""

import os
import shutil
import subprocess
import sys
import sysconfig

import pytest
from conftest import MARKER_VARIABLE

import davincirunsdk

BIN = os.path.join(os.path.dirname(os.path.abspath(davincirunsdk.__file__)), "bin")
pytestmark = pytest.mark.skipif(not os.path.exists(os.path.join(BIN, "davincirun")),
                                reason="the davincirun program is not built")

# Prints which interpreter runs it, its arguments and whether the launcher's
# own DAVINCIRUN_PYTHON leaked into the ranks.
SCRIPT = (
    "import os, sys\n"
    "print('python', sys.executable, 'prefix', sys.prefix, 'argv', sys.argv[1:], "
    "'leaked', os.environ.get('DAVINCIRUN_PYTHON'))\n"
)


def copy_programs(directory):
    """The compiled davincirun and its supervisor, copied (not linked: the
    program finds its interpreter from its own path) into `directory`."""
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
    proc = run([program] + marker(job_env) + ["-r", rank_table(2), "train.py", "--epochs", "1"], tmp_path, job_env,
               "%s:/usr/bin:/bin" % path_bin)
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
    proc = run([program, "-r", rank_table(2), "--dry-run", "train.py"], tmp_path, job_env, "%s:/bin" % path_bin)
    assert proc.returncode == 0, proc.stderr
    assert "%s train.py" % python in proc.stdout


def test_run_directly_from_an_installation_it_uses_that_interpreter(tmp_path, rank_table, job_env):
    """A venv holding the package: <venv>/lib/pythonX.Y/site-packages/davincirunsdk/bin/davincirun
    runs scripts with <venv>/bin/pythonX.Y (else python3), whatever PATH says."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    version = "python%d.%d" % sys.version_info[:2]
    purelib = os.path.relpath(sysconfig.get_path("purelib", vars={"base": str(venv)}), str(venv))
    program = copy_programs(venv / purelib / "davincirunsdk" / "bin")
    write_script(tmp_path)
    proc = run([program] + marker(job_env) + ["-r", rank_table(1), "train.py"], tmp_path, job_env, "/usr/bin:/bin")
    assert proc.returncode == 0, proc.stderr
    # <venv>/bin/pythonX.Y, or python3 where the venv has no such name (CPython 3.7).
    python = next(str(venv / "bin" / name) for name in (version, "python3") if (venv / "bin" / name).exists())
    assert "running it with %s\n" % python in proc.stderr
    assert "[rank 0] python %s prefix %s argv [] leaked None" % (python, venv) in proc.stdout


def test_the_console_script_passes_its_own_interpreter(tmp_path, rank_table, job_env):
    write_script(tmp_path)
    shim = [sys.executable, "-m", "davincirunsdk._cli"]
    proc = run(shim + marker(job_env) + ["-r", rank_table(1), "train.py"], tmp_path, job_env, "/nonexistent")
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
