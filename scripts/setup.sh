#!/usr/bin/env bash
# Installs what davincirunsdk needs to build, test and run its example, then
# builds and installs the package. Every Python package goes into the
# project's own virtual environment, build/venv, made from ${PYTHON:-python3}
# (scripts/venv.sh); the system's Python packages are never touched, and a
# check at the end fails the setup if they changed. Safe and quick to run
# again: each step checks what is there and skips what is done, and the C++
# build is incremental (build/).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh

PYTHON=${PYTHON:-python3}
# The interpreter the venv is made from: the real one behind a pyenv shim or
# a symbolic link, and never the venv itself (a PATH that has build/venv/bin
# first, or PYTHON=build/venv/bin/python).
base=$(VENV=$VENV "$PYTHON" -c '
import os, sys
inside = os.path.realpath(sys.prefix) == os.path.realpath(os.environ["VENV"])
print(os.path.realpath(getattr(sys, "_base_executable", sys.executable) if inside else sys.executable))')
base_before=$(installed_packages "$base")

# C++ dependencies from Debian.
# clang and libclang-rt-14-dev build the fuzzer (scripts/fuzz.sh): libFuzzer's
# runtime is in libclang-rt-<major>-dev, and 14 is the major of Debian 12's
# default clang (our CI machine); another release needs its own major here.
# tmux is the terminal the status-line test draws on (tests/python/output/test_terminal_width.py).
# curl fetches simdjson's source from Debian (scripts/bundle_deps.sh, below).
apt_packages=(g++ nlohmann-json3-dev libfmt-dev catch2 clang libclang-rt-14-dev tmux curl ca-certificates)
# The job engines the multi-host tests run davincirun under, for real, across
# test hosts in network namespaces (tests/python/engines/test_multi_host_engines.py):
# Slurm (slurmctld, slurmd, srun) with munge for its authentication, and
# Open MPI's mpirun (their packaged services are not used: the tests start
# their own daemons from a temporary configuration). iproute2 and util-linux
# (ip, nsenter, unshare) make the hosts.
apt_packages+=(slurm-wlm munge openmpi-bin iproute2 util-linux)
# SHA-256's aarch64 engine is built with the cross compiler and run under
# qemu-user in the C++ stage (scripts/check_sha256_engines.sh).
apt_packages+=(g++-aarch64-linux-gnu qemu-user)
# Debian's python3 makes no venv (build/venv) without its venv module.
apt_packages+=(python3-venv)
# Headless Chromium opens the job report's page in its tests
# (tests/python/output/test_report_page.py, over --remote-debugging-pipe).
apt_packages+=(chromium)
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

# simdjson, which every build compiles into the core, from Debian's source
# package (kept in third_party/simdjson once there).
bash scripts/bundle_deps.sh simdjson

# The venv, made again when ${PYTHON} is another interpreter or version.
made="$base $("$base" -c 'import sys; print(sys.version.split()[0])')"
if ! [[ -x $VENV_PYTHON && -f $VENV/.made-from && $(<"$VENV/.made-from") == "$made" ]] ||
  ! "$VENV_PYTHON" -c pass 2>/dev/null; then
  echo "setup: creating the project venv build/venv ($base -m venv)"
  rm -rf "$VENV"
  "$base" -m venv "$VENV"
  echo "$made" >"$VENV/.made-from"
fi
use_venv

# Python dependencies from PyPI: scripts/requirements-dev.txt, and torch (for
# the example and its test) pinned to a CPU build: an unpinned torch pulls a
# multi-GB CUDA build. Installed again only when the file or the torch pin
# changed (a stamp in the venv; remove it to force).
torch_requirement=torch==2.13.0
wanted=$({ cat scripts/requirements-dev.txt; echo "$torch_requirement"; } | sha256sum | cut -c1-64)
if [[ ! -f $VENV/.setup-python-tools || $(<"$VENV/.setup-python-tools") != "$wanted" ]]; then
  echo "setup: installing scripts/requirements-dev.txt and $torch_requirement into build/venv (pip)"
  "$VENV_PYTHON" -m pip install -q -r scripts/requirements-dev.txt "$torch_requirement" \
    2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2)
  echo "$wanted" >"$VENV/.setup-python-tools"
else
  echo "setup: Python tools in build/venv up to date (scripts/requirements-dev.txt, $torch_requirement)"
fi

# The package itself (the C++ core, the `davincirun` command, the supervisor
# program and the Python module), built once as a wheel (incrementally, in
# build/notebook-env/cmake-build) by notebook_env.sh, which also installs it
# into the two notebook-test venvs (ipykernel 6 and 7); then into build/venv,
# unless that very wheel is installed there already.
bash scripts/notebook_env.sh
wheel=$(ls build/notebook-env/wheel/davincirunsdk-*.whl)
installed=$(sha256sum "$wheel" | cut -c1-64)
if [[ ! -f $VENV/.setup-wheel || $(<"$VENV/.setup-wheel") != "$installed" ]] ||
  ! "$VENV_PYTHON" -c "import davincirunsdk._core" 2>/dev/null; then
  "$VENV_PYTHON" -m pip install -q --no-deps --force-reinstall "$wheel"
  echo "$installed" >"$VENV/.setup-wheel"
  echo "setup: installed ${wheel} into build/venv"
else
  echo "setup: ${wheel} is installed in build/venv"
fi

# MindSpore's CPU wheels in venvs of their own (they need numpy<2), for the
# tests that train with them: 2.10.0 on CPython 3.11 and 2.0.0, the oldest
# on PyPI, on pyenv's 3.7 (scripts/mindspore_env.sh --all).
bash scripts/mindspore_env.sh --all >/dev/null
# TensorFlow's CPU builds, 2.21 on CPython 3.11 and 1.15.5 on pyenv's 3.7, in
# venvs of their own, for the tests that train with them: scripts/tensorflow_env.sh.
bash scripts/tensorflow_env.sh >/dev/null

# Nothing may have changed outside build/venv.
base_after=$(installed_packages "$base")
if [[ $base_after != "$base_before" ]]; then
  echo "setup: the packages of $base changed while setting up (only build/venv may change):" >&2
  diff <(echo "$base_before") <(echo "$base_after") >&2 || true
  exit 1
fi
