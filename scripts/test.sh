#!/usr/bin/env bash
# Runs every test: the C++ suite (Catch2, through ctest; once plain and once
# under AddressSanitizer and UndefinedBehaviorSanitizer), a bounded fuzzing run
# of the rank table parser and the Python suite (pytest), after
# scripts/setup.sh has installed what they need.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

bash scripts/setup.sh

echo "== C++ tests"
cmake -S . -B build/tests -G Ninja -DDAVINCIRUN_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/tests -j 2
ctest --test-dir build/tests --output-on-failure

echo "== C++ tests under AddressSanitizer and UndefinedBehaviorSanitizer"
# The core, its two programs and the tests instrumented; leaks are errors,
# and so is any undefined behaviour (no recovery).
cmake -S . -B build/sanitize -G Ninja -DDAVINCIRUN_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Debug \
  -DDAVINCIRUN_SANITIZE=address,undefined >/dev/null
cmake --build build/sanitize -j 2
ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/sanitize --output-on-failure

echo "== Fuzzing the rank-table parser (bounded)"
# 60 s of libFuzzer (clang, ASan + UBSan; the build is incremental in
# build/fuzz): enough to replay the kept corpus and explore a little further.
bash scripts/fuzz.sh 60

echo "== Python tests"
"$PYTHON" -m pytest -q -p no:cacheprovider tests/python
