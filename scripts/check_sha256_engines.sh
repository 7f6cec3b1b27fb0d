#!/usr/bin/env bash
# SHA-256's aarch64 engine (cpp/src/common/sha256_arm.cpp), built with
# Debian's cross compiler and run under qemu-user, which emulates the Armv8
# SHA-2 instructions (-cpu max): it must agree with the portable engine and
# give FIPS 180-4's digests (tests/cross/sha256_engines.cpp). Clang, which
# takes the intrinsics only from a build that targets them, compiles the
# file both ways. The x86-64 engine is checked by the C++ suite itself.
# Needs g++-aarch64-linux-gnu and qemu-user (scripts/setup.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/cross
mkdir -p "$out"
sources=(cpp/src/common/sha256.cpp cpp/src/common/sha256_arm.cpp cpp/src/common/sha256_x86.cpp
         tests/cross/sha256_engines.cpp)
aarch64-linux-gnu-g++ -std=c++17 -O2 -Wall -Wextra -Werror -I cpp/src -I cpp/include "${sources[@]}" -static \
  -o "$out/sha256_engines_aarch64"
echo "== aarch64 under qemu -cpu max"
qemu-aarch64 -cpu max "$out/sha256_engines_aarch64"
for march in "" "-march=armv8-a+sha2"; do
  clang++ --target=aarch64-linux-gnu $march -std=c++17 -O2 -Wall -Werror -I cpp/src -I cpp/include \
    -c cpp/src/common/sha256_arm.cpp -o "$out/sha256_arm_clang.o"
  echo "clang ${march:-(no -march)}: sha256_arm.cpp compiles"
done
