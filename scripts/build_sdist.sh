#!/usr/bin/env bash
# Builds the sdist, dist/davincirunsdk-<version>.tar.gz, that installs with
# only a C++17 compiler: fmt, nlohmann/json and simdjson are bundled into it
# (scripts/bundle_deps.sh copies them from this machine's Debian packages, and
# simdjson's amalgamation from Debian's source package, into third_party/,
# which git ignores), CMake and ninja come from PyPI as
# build requirements when the machine has none. Then checks it: the bundled
# headers and licenses are inside, no build output is, and `twine check`
# passes. Prints the sdist's path last.
#
#   bash scripts/build_sdist.sh [--out DIR]     (default: dist/)
set -euo pipefail
cd "$(dirname "$0")/.."
out=dist
while (($#)); do
  case $1 in
    --out) out=$2; shift 2 ;;
    *) echo "usage: $0 [--out DIR]" >&2; exit 2 ;;
  esac
done
source scripts/wheel_tools.sh
wheel_tools_setup >&2

bash scripts/bundle_deps.sh >&2
mkdir -p "$out"
version=$(sed -n 's/^version = "\([^"]*\)".*/\1/p' pyproject.toml | head -1)
sdist=$out/davincirunsdk-$version.tar.gz
rm -f "$sdist"
# No isolation: the backend is the pinned one of the tools venv, offline.
python -m build --sdist --no-isolation --outdir "$out" . >&2
[[ -f $sdist ]] || { echo "build_sdist: no $sdist" >&2; exit 1; }

listing=$(tar -tzf "$sdist")
for required in LICENSE README.md pyproject.toml CMakeLists.txt cmake/toolchains/zig.cmake \
  third_party/fmt/include/fmt/format.h third_party/fmt/copyright third_party/fmt/VERSION \
  third_party/nlohmann_json/include/nlohmann/json.hpp third_party/nlohmann_json/copyright \
  third_party/simdjson/include/simdjson.h third_party/simdjson/src/simdjson.cpp third_party/simdjson/copyright; do
  grep -qx "davincirunsdk-$version/$required" <<<"$listing" ||
    { echo "build_sdist: $sdist lacks $required" >&2; exit 1; }
done
if grep -E "^davincirunsdk-$version/(build|dist)/" <<<"$listing" >&2; then
  echo "build_sdist: $sdist holds build output (above)" >&2
  exit 1
fi
twine check --strict "$sdist" >&2
echo "build_sdist: $sdist ($(du -k "$sdist" | cut -f1) KiB, $(wc -l <<<"$listing") files)" >&2
echo "$sdist"
