#!/usr/bin/env bash
# Installs what davincirunsdk needs to build, test and run its example, then
# builds and installs the package. Safe and quick to run again: each step
# checks what is there and skips what is done, and the C++ build is
# incremental (build/).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1
# Debian's own Python refuses pip installs outside a venv (PEP 668); as root on
# a dedicated machine that is what we want.
export PIP_BREAK_SYSTEM_PACKAGES=1
export PIP_ROOT_USER_ACTION=ignore

# C++ dependencies from Debian.
# clang and libclang-rt-14-dev build the fuzzer (scripts/fuzz.sh): libFuzzer's
# runtime is in libclang-rt-<major>-dev, and 14 is the major of Debian 12's
# default clang (our CI machine); another release needs its own major here.
# tmux is the terminal the status-line test draws on (tests/python/output/test_terminal_width.py).
apt_packages=(g++ nlohmann-json3-dev libfmt-dev catch2 clang libclang-rt-14-dev tmux)
# The job engines the multi-host tests run davincirun under, for real, across
# test hosts in network namespaces (tests/python/engines/test_multi_host_engines.py):
# Slurm (slurmctld, slurmd, srun) with munge for its authentication, and
# Open MPI's mpirun (their packaged services are not used: the tests start
# their own daemons from a temporary configuration). iproute2 and util-linux
# (ip, nsenter, unshare) make the hosts.
apt_packages+=(slurm-wlm munge openmpi-bin iproute2 util-linux)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]} (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python dependencies from PyPI: scripts/requirements-dev.txt, and torch (for
# the example and its test) pinned to a CPU build: an unpinned torch pulls a
# multi-GB CUDA build. Installed again only when the file, the interpreter or
# the torch pin changed (a stamp in build/.setup; remove it to force).
torch_requirement=torch==2.13.0
mkdir -p build/.setup
wanted=$({ cat scripts/requirements-dev.txt; echo "$torch_requirement"; "$PYTHON" -c 'import sys; print(sys.executable, sys.version)'; } | sha256sum | cut -c1-64)
if [[ ! -f build/.setup/python-tools || $(<build/.setup/python-tools) != "$wanted" ]]; then
  echo "setup: installing scripts/requirements-dev.txt (pip)"
  "$PYTHON" -m pip install -q -r scripts/requirements-dev.txt
  "$PYTHON" -c "import torch" 2>/dev/null || "$PYTHON" -m pip install -q "$torch_requirement"
  echo "$wanted" >build/.setup/python-tools
else
  echo "setup: Python tools up to date (scripts/requirements-dev.txt)"
fi

# The package itself (the C++ core, the `davincirun` command, the supervisor
# program and the Python module), built once as a wheel (incrementally, in
# build/notebook-env/cmake-build) by notebook_env.sh, which also installs it
# into the two notebook-test venvs (ipykernel 6 and 7); then into $PYTHON,
# unless that very wheel is installed there already.
PYTHON="$PYTHON" bash scripts/notebook_env.sh
wheel=$(ls build/notebook-env/wheel/davincirunsdk-*.whl)
installed="$(sha256sum "$wheel" | cut -c1-64) $("$PYTHON" -c 'import sys; print(sys.executable)')"
if [[ ! -f build/.setup/installed-wheel || $(<build/.setup/installed-wheel) != "$installed" ]] ||
  ! "$PYTHON" -c "import davincirunsdk._core" 2>/dev/null; then
  "$PYTHON" -m pip install -q --no-deps --force-reinstall "$wheel"
  echo "$installed" >build/.setup/installed-wheel
  echo "setup: installed ${wheel#"$PWD"/} into $PYTHON"
else
  echo "setup: ${wheel} is installed in $PYTHON"
fi

# MindSpore's CPU wheel in a venv of its own (it needs numpy<2), for the
# tests that train with it: scripts/mindspore_env.sh.
bash scripts/mindspore_env.sh >/dev/null
