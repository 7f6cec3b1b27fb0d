#!/usr/bin/env bash
# The quick Python tests on the oldest and the newest CPython the package
# ships for (3.7 and 3.13, from pyenv), beside the main run in the project venv. Each
# version builds only the davincirunsdk._core module, against the core and
# programs of an existing build (DAVINCIRUN_PREBUILT_CORE, by default
# build/tests, which scripts/test.sh builds first; brought up to date here),
# into build/py<version>/ (incremental), and runs pytest from a venv holding
# the pytest, pytest-xdist and pybind11 releases pip picks for that version
# (PyPI). Tests needing what such a venv lacks (torch, the notebook kernels)
# are left out or skip themselves.
#
#   bash scripts/test_pythons.sh [pytest args]   (default: -n 2 -m quick tests/python, the quick tests)
#   TEST_PYTHONS="3.8 3.12" bash scripts/test_pythons.sh    other versions (PYENV_ROOT, default ~/.pyenv)
#   DAVINCIRUN_PREBUILT_CORE=build/dev bash scripts/test_pythons.sh
#   bash scripts/test_pythons.sh --missing   print the versions pyenv lacks (nothing: all there)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
versions=${TEST_PYTHONS-3.7 3.13}
PYENV_ROOT=${PYENV_ROOT:-$HOME/.pyenv}
# The newest installed X.Y.Z of pyenv's version X.Y, if any.
installed() {
  ls -d "$PYENV_ROOT"/versions/"$1".* 2>/dev/null | grep -E "/$1\.[0-9]+$" | sort -V | tail -1 || true
}
if [[ ${1:-} == --missing ]]; then
  missing=()
  for version in $versions; do
    exe=$(installed "$version")
    [[ -n $exe && -x $exe/bin/python3 ]] || missing+=("$version")
  done
  echo "${missing[*]}"
  exit 0
fi
# cmake, ninja and pybind11's build side from the project venv (scripts/setup.sh).
source scripts/venv.sh
use_venv
core=$(cd "${DAVINCIRUN_PREBUILT_CORE:-build/tests}" && pwd)
# Brought up to date first (nothing to do after scripts/test.sh's build): a
# module built against the headers of today and linked with a core built
# before them can crash at the first call that crosses a changed type.
cmake --build "$core" >/dev/null || {
  echo "test_pythons: the prebuilt core in ${core#"$REPO"/} does not build: see cmake --build ${core#"$REPO"/}" >&2
  exit 1
}
# Two workers, as scripts/test.sh runs the main suite (DAVINCIRUN_TEST_WORKERS).
(($#)) || set -- -n "${DAVINCIRUN_TEST_WORKERS:-2}" -m quick tests/python
# The same compiler and build type as the core (cmake/prebuilt_core.cmake checks).
compiler=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$core/CMakeCache.txt")
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$core/CMakeCache.txt")
launcher=$(sed -n 's/^CMAKE_CXX_COMPILER_LAUNCHER:[A-Z]*=//p' "$core/CMakeCache.txt")
# Its flags too (the tests preset's line tables only: the module builds in less time).
flags_var=CMAKE_CXX_FLAGS_$(tr a-z A-Z <<<"$build_type")
flags=$(sed -n "s/^$flags_var:[A-Z]*=//p" "$core/CMakeCache.txt")

# What each version's venv holds (pip picks each one's release for that version).
venv_packages="pytest pytest-xdist pybind11"
failed=()
for version in $versions; do
  t0=$SECONDS
  exe=$(installed "$version")
  if [[ -z $exe || ! -x $exe/bin/python3 ]]; then
    echo "test_pythons: no CPython $version under $PYENV_ROOT/versions (pyenv install $version)" >&2
    failed+=("$version (not installed)")
    continue
  fi
  dir=$REPO/build/py$version
  venv=$dir/venv
  wanted="$exe $venv_packages"
  if [[ ! -x $venv/bin/python || ! -f $venv/.made || $(<"$venv/.made") != "$wanted" ]]; then
    echo "test_pythons: $version: venv ${venv#"$REPO"/} ($venv_packages)"
    rm -rf "$venv"
    "$exe/bin/python3" -m venv "$venv"
    "$venv/bin/python" -m pip install -q $venv_packages 2> >(grep -v 'is ignored: it is neither' >&2)
    echo "$wanted" >"$venv/.made"
  fi
  if [[ ! -f $dir/build/CMakeCache.txt ]]; then
    cmake -S . -B "$dir/build" -G Ninja -DCMAKE_CXX_COMPILER="$compiler" -DCMAKE_BUILD_TYPE="$build_type" "-D$flags_var=$flags" \
      ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher"} -DDAVINCIRUN_WERROR=ON -DDAVINCIRUN_BUILD_PYTHON=ON -DDAVINCIRUN_DEV_PACKAGE=ON \
      -DDAVINCIRUN_PREBUILT_CORE="$core" -DPython_EXECUTABLE="$venv/bin/python" \
      -Dpybind11_DIR="$("$venv/bin/python" -m pybind11 --cmakedir)" >/dev/null
  fi
  cmake --build "$dir/build" -j2 | grep -v '^ninja: no work to do' || true
  [[ ${PIPESTATUS[0]} == 0 ]] || { failed+=("$version (build)"); continue; }
  built=$SECONDS
  echo "test_pythons: CPython $("$venv/bin/python" -c 'import platform; print(platform.python_version())'), pybind11 $("$venv/bin/python" -c 'import pybind11; print(pybind11.__version__)'): pytest $*"
  if ! PYTHONPATH=$dir/build/python PATH=$dir/build/python/davincirunsdk/bin:$PATH \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@"; then
    failed+=("$version (tests)")
  fi
  echo "test_pythons: $version: module build $((built - t0)) s, tests $((SECONDS - built)) s"
done
if ((${#failed[@]})); then
  echo "test_pythons: failed: ${failed[*]}" >&2
  exit 1
fi
