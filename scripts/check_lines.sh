#!/usr/bin/env bash
# Files a person reads in one sitting: fails, naming them, when any of the
# given files (default: every C++, Python, shell and CMake file git tracks or
# would track, but
# the generated _core.pyi) is over 500 lines.
set -euo pipefail
cd "$(dirname "$0")/.."
if (($# == 0)); then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cpp' '*.hpp' '*.py' '*.sh' '*.cmake' '*CMakeLists.txt' ':!python/davincirunsdk/_core.pyi')
  set -- "${files[@]}"
fi
long=$(wc -l "$@" | awk '$2 != "total" && $1 > 500 { print "  " $2 ": " $1 " lines" }')
if [[ -n $long ]]; then
  echo "files over 500 lines:"
  echo "$long"
  exit 1
fi
