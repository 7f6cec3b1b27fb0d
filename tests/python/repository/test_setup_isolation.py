"""scripts/setup.sh installs only into the project venv, build/venv
(scripts/venv.sh): under venv.sh's settings pip refuses to install into an
interpreter that is not a venv's, even when the caller's environment allows
it (PIP_BREAK_SYSTEM_PACKAGES), and setup's closing check, which lists the
base interpreter's distributions before and after, sees one installed
behind its back."""

import os
import subprocess
import sys

import pytest
from conftest import REPO

# The interpreter a venv is made from (this one when it is no venv's).
BASE_PYTHON = os.path.join(sys.base_prefix, "bin", "python%d.%d" % sys.version_info[:2])
IN_VENV = sys.prefix != sys.base_prefix


def under_venv_sh(command, *args):
    """Runs `command` (bash) after sourcing scripts/venv.sh, in an
    environment that would let pip install anywhere."""
    env = dict(os.environ, PIP_BREAK_SYSTEM_PACKAGES="1")
    env.pop("PIP_REQUIRE_VIRTUALENV", None)
    return subprocess.run(["bash", "-c", "source scripts/venv.sh\n" + command, "bash"] + list(args), cwd=REPO,
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)


def has_pip(python):
    return subprocess.run([python, "-c", "import pip"], stderr=subprocess.DEVNULL).returncode == 0


# An install that changes nothing where it is allowed (pip is there already),
# so that the test is harmless whatever happens.
NO_OP_INSTALL = '"$1" -m pip install --no-index --no-deps pip'


@pytest.mark.skipif(not has_pip(BASE_PYTHON), reason="the base interpreter has no pip")
def test_pip_refuses_the_base_interpreter():
    proc = under_venv_sh(NO_OP_INSTALL, BASE_PYTHON)
    assert proc.returncode != 0, proc.stdout
    assert "Could not find an activated virtualenv (required)" in proc.stdout


@pytest.mark.skipif(not IN_VENV or not has_pip(sys.executable), reason="not run from a venv with pip")
def test_pip_installs_into_a_venv():
    proc = under_venv_sh(NO_OP_INSTALL, sys.executable)
    assert proc.returncode == 0, proc.stdout
    assert "Requirement already satisfied: pip" in proc.stdout


@pytest.mark.skipif(sys.version_info < (3, 8), reason="importlib.metadata (the check runs on setup's base, 3.8+)")
def test_a_package_installed_outside_the_venv_is_seen(tmp_path):
    base = tmp_path / "base"
    subprocess.run([BASE_PYTHON, "-m", "venv", "--without-pip", str(base)], check=True)
    python = str(base / "bin" / "python")
    listed = under_venv_sh('installed_packages "$1"', python)
    assert listed.returncode == 0, listed.stdout
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout.strip()
    info = os.path.join(site, "stray_package-1.0.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: stray-package\nVersion: 1.0\n")
    again = under_venv_sh('installed_packages "$1"', python)
    assert again.returncode == 0, again.stdout
    assert "stray-package==1.0" not in listed.stdout.split()
    added = set(again.stdout.split()) - set(listed.stdout.split())
    assert added == {"stray-package==1.0"}
