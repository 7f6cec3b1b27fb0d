# Shared part of the zig toolchain files beside it (zig-<target>.cmake, which
# set DAVINCIRUN_ZIG_TARGET and DAVINCIRUN_ZIG_ARCH first): C++ compiled by
# `zig c++` against the glibc version named in the target (zig ships the
# headers and link stubs of every glibc release), with LLVM's libc++ linked
# statically, so that what is built needs nothing newer than that glibc and
# no libstdc++ or libgcc_s. scripts/build_wheels.sh uses these for the
# manylinux wheels.
#
# zig: the DAVINCIRUN_ZIG variable (CMake or environment), else `zig` on
# PATH, else the one in the ziglang package of `python3` (PyPI: ziglang).

if(NOT DAVINCIRUN_ZIG AND DEFINED ENV{DAVINCIRUN_ZIG})
  set(DAVINCIRUN_ZIG "$ENV{DAVINCIRUN_ZIG}")
endif()
if(NOT DAVINCIRUN_ZIG)
  find_program(DAVINCIRUN_ZIG zig)
endif()
if(NOT DAVINCIRUN_ZIG)
  execute_process(COMMAND python3 -c "import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), 'zig'))"
                  OUTPUT_VARIABLE DAVINCIRUN_ZIG OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
if(NOT DAVINCIRUN_ZIG OR NOT EXISTS "${DAVINCIRUN_ZIG}")
  message(FATAL_ERROR "The zig toolchain (${CMAKE_CURRENT_LIST_FILE}) needs zig: set DAVINCIRUN_ZIG to the zig "
                      "program, put zig on PATH, or `pip install ziglang` for python3")
endif()
# try_compile projects read this file again: they find zig the same way.
set(ENV{DAVINCIRUN_ZIG} "${DAVINCIRUN_ZIG}")

# Another architecture is a cross build: CMake must not run what it builds
# (but may, through qemu-user, when installed), and FindPython must not run
# this machine's interpreter for the target's settings.
if(NOT DAVINCIRUN_ZIG_ARCH STREQUAL CMAKE_HOST_SYSTEM_PROCESSOR)
  set(CMAKE_SYSTEM_NAME Linux)
  set(CMAKE_SYSTEM_PROCESSOR ${DAVINCIRUN_ZIG_ARCH})
  find_program(DAVINCIRUN_QEMU NAMES qemu-${DAVINCIRUN_ZIG_ARCH}-static qemu-${DAVINCIRUN_ZIG_ARCH})
  if(DAVINCIRUN_QEMU)
    set(CMAKE_CROSSCOMPILING_EMULATOR ${DAVINCIRUN_QEMU})
  endif()
endif()

# `zig c++`, `zig ar` and `zig ranlib` behind small wrapper programs, as
# CMake wants one program per tool. Their text names the zig program, its
# version and the target, so that ccache with CCACHE_COMPILERCHECK=content
# tells targets and zig releases apart and shares objects between build
# directories.
# Python.h of CPython 3.7-3.9 includes <crypt.h>, a header of libcrypt that
# zig does not ship: an empty stand-in, searched after every real include
# directory (-idirafter); nothing here calls crypt().
set(_zig_dir "${CMAKE_BINARY_DIR}/zig-${DAVINCIRUN_ZIG_TARGET}")
execute_process(COMMAND "${DAVINCIRUN_ZIG}" version OUTPUT_VARIABLE _zig_version OUTPUT_STRIP_TRAILING_WHITESPACE)
file(MAKE_DIRECTORY "${_zig_dir}/include")
if(NOT EXISTS "${_zig_dir}/include/crypt.h")
  file(WRITE "${_zig_dir}/include/crypt.h"
       "/* Stand-in for libcrypt's header, which Python.h (3.7-3.9) includes; crypt() is not used. */\n")
endif()
set(_zig_c++ "exec \"${DAVINCIRUN_ZIG}\" c++ -target ${DAVINCIRUN_ZIG_TARGET} -idirafter \"$(dirname \"$0\")/include\" \"$@\"")
set(_zig_ar "exec \"${DAVINCIRUN_ZIG}\" ar \"$@\"")
set(_zig_ranlib "exec \"${DAVINCIRUN_ZIG}\" ranlib \"$@\"")
# CMake's install --strip and pybind11 run `strip FILE` after linking. zig
# cannot strip a shared object (`zig objcopy --strip-all`: unimplemented), so
# release builds link stripped (-s, below) and this strip does nothing.
set(_zig_strip "exit 0")
foreach(_tool c++ ar ranlib strip)
  set(_text "#!/bin/sh\n# zig ${_zig_version}, target ${DAVINCIRUN_ZIG_TARGET}\n${_zig_${_tool}}\n")
  set(_old "")
  if(EXISTS "${_zig_dir}/${_tool}")
    file(READ "${_zig_dir}/${_tool}" _old)
  endif()
  if(NOT _old STREQUAL _text)  # rewritten only when it changes: ccache and make see the same program
    file(WRITE "${_zig_dir}/${_tool}.tmp" "${_text}")
    file(CHMOD "${_zig_dir}/${_tool}.tmp" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                                                     WORLD_READ WORLD_EXECUTE)
    file(RENAME "${_zig_dir}/${_tool}.tmp" "${_zig_dir}/${_tool}")
  endif()
endforeach()
set(CMAKE_CXX_COMPILER "${_zig_dir}/c++")
set(CMAKE_AR "${_zig_dir}/ar" CACHE FILEPATH "zig ar")
set(CMAKE_RANLIB "${_zig_dir}/ranlib" CACHE FILEPATH "zig ranlib")
set(CMAKE_STRIP "${_zig_dir}/strip" CACHE FILEPATH "no-op: release builds link stripped")
# zig's libc++ carries debug information: a release build links stripped.
foreach(_kind EXE SHARED MODULE)
  set(CMAKE_${_kind}_LINKER_FLAGS_RELEASE_INIT "-s")
  set(CMAKE_${_kind}_LINKER_FLAGS_MINSIZEREL_INIT "-s")
endforeach()
# Where zig keeps libc++ and the rest it links in, for their licenses
# (cmake/wheel_licenses.cmake).
execute_process(COMMAND "${DAVINCIRUN_ZIG}" env OUTPUT_VARIABLE _zig_env ERROR_QUIET)
string(REGEX MATCH "lib_dir\"?[ :=]+\"([^\"]+)\"" _ "${_zig_env}")
set(DAVINCIRUN_ZIG_LIB_DIR "${CMAKE_MATCH_1}")

# The host's packages sit beside the host's C library headers in /usr/include,
# which must not be mixed with zig's: fmt and nlohmann/json come from
# third_party/ (the sdist's bundled copies, scripts/bundle_deps.sh).
set(CMAKE_DISABLE_FIND_PACKAGE_fmt ON)
set(CMAKE_DISABLE_FIND_PACKAGE_nlohmann_json ON)
