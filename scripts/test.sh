#!/usr/bin/env bash
# Runs every test: the C++ suite (Catch2, through ctest) and the Python suite
# (pytest), after scripts/setup.sh has installed what they need.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

bash scripts/setup.sh

echo "== C++ tests"
cmake -S . -B build/tests -G Ninja -DDAVINCIRUN_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/tests -j 2
ctest --test-dir build/tests --output-on-failure

echo "== Python tests"
"$PYTHON" -m pytest -q -p no:cacheprovider tests/python
