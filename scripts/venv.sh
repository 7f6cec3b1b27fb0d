# Sourced by the scripts that run Python for the project (from the
# repository's root): the project's own virtual environment, build/venv.
# scripts/setup.sh makes it from ${PYTHON:-python3} and installs every Python
# package the project needs into it (torch, the tools of
# scripts/requirements-dev.txt, the package itself); the system's Python
# packages are never touched.
VENV=$PWD/build/venv
VENV_PYTHON=$VENV/bin/python
# pip refuses to install or uninstall outside a virtual environment: a pip
# reached by mistake through the system's interpreter fails instead of
# changing it, and a PEP 668 override from the caller's environment is
# dropped.
export PIP_REQUIRE_VIRTUALENV=1
unset PIP_BREAK_SYSTEM_PACKAGES
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

# installed_packages PYTHON: NAME==VERSION of every distribution PYTHON
# imports from (its user site included), sorted: scripts/setup.sh compares
# the base interpreter's before and after.
installed_packages() {
  "$1" -c '
import importlib.metadata as m
print("\n".join(sorted({"%s==%s" % (d.metadata["Name"], d.version) for d in m.distributions()})))'
}

# Puts the venv first in PATH, as `activate` would: python, pytest and the
# tools installed there (cmake, ninja, ruff, clang-format, clang-tidy,
# davincirun) are the venv's.
use_venv() {
  if ! [[ -x $VENV_PYTHON ]] || ! "$VENV_PYTHON" -c pass 2>/dev/null; then
    echo "${0##*/}: no usable project venv at build/venv: run bash scripts/setup.sh first" >&2
    exit 1
  fi
  export VIRTUAL_ENV=$VENV PATH=$VENV/bin:$PATH
  unset PYTHONHOME
}
