# x86_64 Linux, glibc >= 2.17 (manylinux2014), with zig: see zig.cmake.
set(DAVINCIRUN_ZIG_TARGET x86_64-linux-gnu.2.17)
set(DAVINCIRUN_ZIG_ARCH x86_64)
include(${CMAKE_CURRENT_LIST_DIR}/zig.cmake)
