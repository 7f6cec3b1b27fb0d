#!/usr/bin/env bash
# The inner loop: builds the `dev` preset incrementally (for pytest the core,
# both programs and the Python module, build/dev/python then holding a
# runnable davincirunsdk of this tree; for ctest the C++ tests too), then runs
# the tests given against it, with no wheel to build or install. A C++ change
# rebuilds only what depends on it; a Python change needs no build at all.
#
#   bash scripts/dev.sh tests/python/job/test_launch.py -k fails   # pytest, on this build
#   bash scripts/dev.sh --ctest -R "oldest whole lines"        # C++ cases by name (ctest; none matching fails)
#   bash scripts/dev.sh --shell                                # a shell with this build first
#
# The notebook tests use their own kernels with an installed wheel: for them,
# run bash scripts/notebook_env.sh (incremental) instead.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
# cmake, ninja, pybind11 and pytest from the project venv (scripts/setup.sh).
source scripts/venv.sh
use_venv
[[ -f build/dev/CMakeCache.txt ]] || cmake --preset dev >/dev/null
if [[ ${1:-} == --ctest ]]; then
  cmake --build --preset dev  # everything, the C++ tests included
else
  cmake --build --preset dev --target dev_package  # the module and the programs only
fi
export PYTHONPATH=$repo/build/dev/python${PYTHONPATH:+:$PYTHONPATH}
export PATH=$repo/build/dev/python/davincirunsdk/bin:$PATH
case "${1:-}" in
  --ctest) shift; exec ctest --preset dev "$@" ;;
  --shell) exec "${SHELL:-bash}" ;;
esac
# The venv's interpreter by its path: its bin directory holds the
# `davincirun` of the installed wheel, which must not hide this build's
# (PATH above has this build's first).
exec "$VENV_PYTHON" -m pytest -p no:cacheprovider "$@"
