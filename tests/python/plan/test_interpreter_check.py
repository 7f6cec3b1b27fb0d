"""Which Python the ranks would run, compared with the caller's (the check
behind the notebook warning "the ranks run ..., not this kernel's Python"),
on real interpreters: this one, a venv made from it, and links to it."""

import os
import subprocess
import sys
import warnings

import pytest

from davincirunsdk._interpreter import foreign_interpreter, warn_if_foreign


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A real venv of this interpreter: its bin/python is another environment."""
    path = tmp_path_factory.mktemp("interp") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return path


def test_the_callers_own_interpreter_is_not_foreign(tmp_path):
    here = os.path.dirname(sys.executable)
    name = os.path.basename(sys.executable)
    assert foreign_interpreter(name, here, str(tmp_path), sys.executable) is None
    assert foreign_interpreter(sys.executable, None, str(tmp_path), sys.executable) is None


def test_a_venv_python_is_foreign_though_it_links_to_the_same_binary(tmp_path, venv):
    found = foreign_interpreter("python", str(venv / "bin"), str(tmp_path), sys.executable)
    assert found == str(venv / "bin" / "python")
    # ... and the other way round: a kernel in the venv, "python" in PATH being the base one.
    base = os.path.dirname(sys.executable)
    assert foreign_interpreter(os.path.basename(sys.executable), base, str(tmp_path),
                               str(venv / "bin" / "python")) == sys.executable


def test_paths_with_a_slash_resolve_from_the_work_dir(tmp_path, venv):
    assert foreign_interpreter("venv/bin/python3", None, str(venv.parent), sys.executable) == str(
        venv / "bin" / "python3")
    assert foreign_interpreter("./no/such/python", None, str(tmp_path), sys.executable) is None


def test_what_is_not_a_python_or_not_found_is_not_judged(tmp_path, venv):
    assert foreign_interpreter("bash", "/usr/bin:/bin", str(tmp_path), sys.executable) is None
    assert foreign_interpreter("python-config", str(venv / "bin"), str(tmp_path), sys.executable) is None
    assert foreign_interpreter("python3", str(tmp_path), str(tmp_path), sys.executable) is None  # not in PATH
    assert foreign_interpreter("python", str(venv / "bin"), str(tmp_path), "") is None  # no sys.executable


def test_the_warning_is_one_line_at_the_callers_line(tmp_path, venv):
    with pytest.warns(UserWarning) as caught:
        warn_if_foreign([b"python"], {"PATH": str(venv / "bin")}, str(tmp_path), stacklevel=2)
    [warning] = caught
    assert str(warning.message) == (
        "the ranks run %s (python), not this kernel's Python %s, whose packages may differ: give sys.executable "
        "as the command's first word to use the kernel's" % (venv / "bin" / "python", sys.executable))
    assert warning.filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_foreign([os.fsencode(sys.executable)], {}, str(tmp_path), stacklevel=2)  # the same: silent
