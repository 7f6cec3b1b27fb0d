#!/usr/bin/env bash
# Runs every check: format and lint (scripts/lint.sh), the C++ suite (Catch2,
# one ctest test per case; once plain and once under AddressSanitizer and
# UndefinedBehaviorSanitizer), bounded fuzzing runs of the rank table
# parser and the peer channel's messages, and the Python suite (pytest; its quick part also on CPython 3.7
# and 3.13 from pyenv), after scripts/setup.sh has installed
# what they need (it skips what is already there). The C++ builds are the
# presets of CMakePresets.json, in build/<preset>, and incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
export PYTHON

bash scripts/setup.sh

echo "== Format and lint"
bash scripts/lint.sh

echo "== C++ tests"
cmake --preset tests >/dev/null
cmake --build --preset tests
ctest --preset tests

echo "== C++ tests under AddressSanitizer and UndefinedBehaviorSanitizer"
# The core, its two programs and the tests instrumented; leaks are errors,
# and so is any undefined behaviour (no recovery): see the preset.
cmake --preset sanitize >/dev/null
cmake --build --preset sanitize
ctest --preset sanitize

echo "== Fuzzing the rank-table parser and the peer channel's messages (bounded)"
# 40 s of libFuzzer each (clang, ASan + UBSan; the build is incremental in
# build/fuzz): enough to replay the kept corpus and explore a little further.
bash scripts/fuzz.sh 40

echo "== Python tests"
# MindSpore's tests fail rather than skip when its venv is missing.
export DAVINCIRUN_REQUIRE_MINDSPORE=1
"$PYTHON" -m pytest -q -p no:cacheprovider tests/python

echo "== Python tests on the oldest and the newest CPython shipped (3.7, 3.13)"
# Only the module is built for each (against build/tests' core), then the
# quick tests run (scripts/test_pythons.sh).
bash scripts/test_pythons.sh
