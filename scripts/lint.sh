#!/usr/bin/env bash
# Format and lint checks, in the test command so that they cannot rot; the
# tools are the versions pinned in scripts/requirements-dev.txt, from the
# project venv build/venv (scripts/setup.sh).
#
#   bash scripts/lint.sh            every check (about two minutes on 2 cores, most of it clang-tidy)
#   bash scripts/lint.sh --fast     all but clang-tidy (seconds)
#   bash scripts/lint.sh --fix      apply clang-format and ruff's fixes, then check
#
# Checks: clang-format (C++ layout), ruff (Python lint), mypy (the package's
# types, with its generated stub), clang-tidy (.clang-tidy, over the C++ of
# cpp/), at most 500 lines per source file, the core's layering (a stage of
# cpp/src includes only the stages before it: scripts/check_includes.py) and
# _core.pyi against the module of this tree (scripts/stubs.sh --check). Files
# not yet added to git count.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
use_venv
mode=${1:-}
failed=()
check() {
  local name=$1
  shift
  echo "== lint: $name"
  if ! "$@"; then failed+=("$name"); fi
}

# Tracked and new (untracked, not ignored) files that exist.
sources() { git ls-files --cached --others --exclude-standard "$@" | while read -r f; do [[ -f $f ]] && echo "$f"; done; }
cpp_files=$(sources '*.cpp' '*.hpp')
if [[ $mode == --fix ]]; then
  clang-format -i $cpp_files
  ruff check --fix .
fi

check "clang-format" clang-format --dry-run --Werror $cpp_files
check "ruff" ruff check --quiet .
check "mypy" "$VENV_PYTHON" -m mypy --no-error-summary

check "500 lines" bash scripts/check_lines.sh
check "includes" "$VENV_PYTHON" scripts/check_includes.py

check "_core.pyi" bash scripts/stubs.sh --check

if [[ $mode != --fast ]]; then
  # The compile commands of the development build: core, programs and module
  # (configuring and the generated headers are enough, nothing is compiled).
  tidy() {
    cmake --preset dev >/dev/null
    cmake --build build/dev --target davincirun_generated >/dev/null
    sources 'cpp/*.cpp' | xargs -P 2 -n 8 clang-tidy -p build/dev --quiet 2>&1 |
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
