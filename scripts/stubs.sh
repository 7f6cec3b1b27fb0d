#!/usr/bin/env bash
# The type stub of the C++ module, python/davincirunsdk/_core.pyi, generated
# from the module itself (pybind11-stubgen), so that IDEs and type checkers
# see every class, field and signature the module really has.
#
#   bash scripts/stubs.sh           write the stub from the module the project venv imports
#   bash scripts/stubs.sh --check   fail (showing the difference) when the stub
#                                   and the module disagree: the module changed
#                                   and the stub was not regenerated
#
# The module is this tree's: with a development build (build/dev/python, see
# scripts/dev.sh) its module, brought up to date first; without one, the
# installed package (scripts/setup.sh installs this tree's wheel into build/venv). A build
# directory only configured (as clang-tidy leaves it) does not count.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
use_venv
PYTHON=$VENV_PYTHON
if [[ -d build/dev/python/davincirunsdk ]]; then
  cmake --build --preset dev --target dev_package >/dev/null
  export PYTHONPATH=$PWD/build/dev/python${PYTHONPATH:+:$PYTHONPATH}
fi
stub=python/davincirunsdk/_core.pyi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$PYTHON" -m pybind11_stubgen davincirunsdk._core -o "$work" >"$work/log" 2>&1 || {
  cat "$work/log" >&2
  exit 1
}
{
  echo "# Generated from davincirunsdk._core by scripts/stubs.sh (pybind11-stubgen); do not edit."
  cat "$work/davincirunsdk/_core.pyi"
} >"$work/_core.pyi"

case "${1:-}" in
  --check)
    if ! diff -u "$stub" "$work/_core.pyi" >"$work/diff"; then
      echo "stubs: $stub does not match the module $("$PYTHON" -c 'import davincirunsdk._core as c; print(c.__file__)'):" >&2
      cat "$work/diff" >&2
      echo "stubs: run bash scripts/stubs.sh (with the module of this tree) and commit the stub" >&2
      exit 1
    fi
    echo "stubs: $stub matches the module"
    ;;
  "")
    cp "$work/_core.pyi" "$stub"
    echo "stubs: wrote $stub"
    ;;
  *)
    echo "usage: $0 [--check]" >&2
    exit 2
    ;;
esac
