#!/usr/bin/env bash
# Installs what davincirunsdk needs to build, test and run its example, then
# builds and installs the package. Safe to run again: what is there is kept,
# and the C++ build is incremental (build/).
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
apt_packages=(g++ nlohmann-json3-dev libfmt-dev catch2 clang libclang-rt-14-dev)
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

# Python dependencies from PyPI. torch (for the example and its test) is
# pinned to a CPU build; an unpinned torch pulls a multi-GB CUDA build.
"$PYTHON" -m pip install -q "scikit-build-core>=0.10" "pybind11>=2.12" "cmake>=3.15" ninja pytest scikit-learn
"$PYTHON" -c "import torch" 2>/dev/null || "$PYTHON" -m pip install -q torch==2.13.0

# The package itself (the C++ core, the `davincirun` command, the supervisor
# program and the Python module), built once as a wheel (incrementally, in
# build/notebook-env/cmake-build) by notebook_env.sh, which also installs it
# into the two notebook-test venvs (ipykernel 6 and 7); then into $PYTHON.
echo "setup: building davincirunsdk and the notebook test kernels (minutes the first time)"
PYTHON="$PYTHON" bash scripts/notebook_env.sh
wheel=$(ls build/notebook-env/wheel/davincirunsdk-*.whl)
"$PYTHON" -m pip install -q --no-deps --force-reinstall "$wheel"
