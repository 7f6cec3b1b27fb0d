#!/usr/bin/env bash
# Runs every check: format and lint (scripts/lint.sh), the C++ suite (Catch2,
# one ctest test per case; once plain and once under AddressSanitizer and
# UndefinedBehaviorSanitizer), bounded fuzzing runs of the rank table parser
# and the peer channel's messages, and the Python suite (pytest, in the
# project venv build/venv; its quick part also on CPython 3.7 and 3.13 from
# pyenv), after scripts/setup.sh has installed what they need (it skips what
# is already there). The C++ builds are the presets of CMakePresets.json, in
# build/<preset>, and incremental.
#
# Every stage runs, whatever the ones before did; a table of the stages
# (result, seconds) ends the run, whose status is 1 if any failed. The stage
# on CPython 3.7 and 3.13 is skipped, saying so, where pyenv has not
# installed them (`pyenv install 3.7 3.13`), unless DAVINCIRUN_REQUIRE_PYTHONS=1
# (set by .ci/run) makes that a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
source scripts/stages.sh

# The wheel setup builds (the package the Python stage tests) reuses the
# core of the C++ tests' build, compiled once for both (scripts/notebook_env.sh).
run_stage "Setup (scripts/setup.sh)" env DAVINCIRUN_CORE_PRESET=tests bash scripts/setup.sh
# The venv's python, pytest and tools (cmake, ninja, ruff, clang-format...)
# for every stage; a stage finding no venv fails saying so.
[[ -x $VENV_PYTHON ]] && export VIRTUAL_ENV=$VENV PATH=$VENV/bin:$PATH

run_stage "Format and lint" bash scripts/lint.sh

cpp_tests() {
  cmake --preset tests >/dev/null
  cmake --build --preset tests
  ctest --preset tests
  bash scripts/check_sha256_engines.sh
}
run_stage "C++ tests" cpp_tests

# The core, its two programs and the tests instrumented; leaks are errors,
# and so is any undefined behaviour (no recovery): see the preset.
cpp_sanitized() {
  cmake --preset sanitize >/dev/null
  cmake --build --preset sanitize
  ctest --preset sanitize
}
run_stage "C++ tests under ASan and UBSan" cpp_sanitized

# 40 s of libFuzzer for each of the two targets (clang, ASan + UBSan; the
# build is incremental in build/fuzz): enough to replay the kept corpus and
# explore a little further.
run_stage "Fuzzing, 2 targets x 40 s" bash scripts/fuzz.sh 40

# MindSpore's and TensorFlow's tests fail rather than skip when their venvs
# are missing. Two pytest workers (pytest-xdist; DAVINCIRUN_TEST_WORKERS):
# most tests wait on their ranks, so the suite used ~0.6 of one CPU alone.
python_tests() {
  export DAVINCIRUN_REQUIRE_MINDSPORE=1 DAVINCIRUN_REQUIRE_TENSORFLOW=1
  "$VENV_PYTHON" -m pytest -q -p no:cacheprovider -n "${DAVINCIRUN_TEST_WORKERS:-2}" --durations=20 tests/python
}
run_stage "Python tests" python_tests

# Only the module is built for each (against build/tests' core), then the
# quick tests run (scripts/test_pythons.sh).
name="Python quick tests on CPython 3.7, 3.13"
missing=$(bash scripts/test_pythons.sh --missing)
if [[ -n $missing && ${DAVINCIRUN_REQUIRE_PYTHONS:-} != 1 ]]; then
  skip_stage "$name" "no CPython $missing from pyenv (pyenv install 3.7 3.13)"
else
  run_stage "$name" bash scripts/test_pythons.sh
fi

stage_table
