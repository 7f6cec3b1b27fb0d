#!/usr/bin/env bash
# Format and lint checks, in the test command so that they cannot rot; the
# tools are the versions pinned in scripts/requirements-dev.txt.
#
#   bash scripts/lint.sh            every check
#   bash scripts/lint.sh --fast     all but clang-tidy (about a minute and a half on 2 cores)
#   bash scripts/lint.sh --fix      apply clang-format and ruff's fixes, then check
#
# Checks: clang-format (C++ layout), ruff (Python lint), mypy (the package's
# types, with its generated stub), clang-tidy (.clang-tidy, over the C++ of
# cpp/), at most 500 lines per source file, and _core.pyi against the module
# $PYTHON imports (scripts/stubs.sh --check).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
mode=${1:-}
failed=()
check() {
  local name=$1
  shift
  echo "== lint: $name"
  if ! "$@"; then failed+=("$name"); fi
}

cpp_files=$(git ls-files '*.cpp' '*.hpp')
if [[ $mode == --fix ]]; then
  clang-format -i $cpp_files
  ruff check --fix .
fi

check "clang-format" clang-format --dry-run --Werror $cpp_files
check "ruff" ruff check --quiet .
check "mypy" "$PYTHON" -m mypy --no-error-summary

check "500 lines" bash scripts/check_lines.sh

check "_core.pyi" bash scripts/stubs.sh --check

if [[ $mode != --fast ]]; then
  # The compile commands of the development build: core, programs and module
  # (configuring is enough, nothing is built).
  tidy() {
    cmake --preset dev >/dev/null
    git ls-files 'cpp/*.cpp' | xargs -P 2 -n 8 clang-tidy -p build/dev --quiet 2>&1 |
      grep -v -E '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$|^\[[0-9]+/[0-9]+\] Processing file' |
      tee build/clang-tidy.log
    ! grep -q -E 'warning:|error:' build/clang-tidy.log
  }
  check "clang-tidy" tidy
fi

if ((${#failed[@]})); then
  echo "lint: failed: ${failed[*]}" >&2
  exit 1
fi
echo "lint: all checks passed"
