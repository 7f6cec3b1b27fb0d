# Compiler options every target of this project shares: one list of
# warnings, and the sanitizers of DAVINCIRUN_SANITIZE.

option(DAVINCIRUN_WERROR "Treat compiler warnings as errors (the test and development builds)" OFF)
set(DAVINCIRUN_SANITIZE "" CACHE STRING
    "Sanitizers for the core, its programs and the C++ tests, e.g. address,undefined (empty: none)")

# The warnings of every target. Third-party headers (imported targets:
# fmt, nlohmann/json, Catch2, pybind11, Python) are system headers and stay quiet.
function(davincirun_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wconversion -Wsign-conversion
                                           -Wold-style-cast)
  if(DAVINCIRUN_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# Builds `target` with DAVINCIRUN_SANITIZE. The tests' small helper children
# stay plain: a sanitizer's own signal handlers would change the very exits
# (SIGSEGV, SIGTERM) the tests check.
function(davincirun_sanitize target)
  if(DAVINCIRUN_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=${DAVINCIRUN_SANITIZE} -fno-omit-frame-pointer
                                             -fno-sanitize-recover=all)
    target_link_options(${target} PRIVATE -fsanitize=${DAVINCIRUN_SANITIZE})
  endif()
endfunction()

# Both: what the core, the programs, the module and the tests get.
function(davincirun_target_options target)
  davincirun_warnings(${target})
  davincirun_sanitize(${target})
endfunction()

# The two programs start on every job: with the C++ runtime linked in
# (libstdc++, libgcc) the dynamic loader spares each ~0.3 ms of loading and
# relocating libstdc++ (bench/README.md, "The command"). Wheels, built with
# zig, link libc++ in anyway; sanitized builds keep the shared runtime.
function(davincirun_program_options target)
  if(NOT DAVINCIRUN_SANITIZE AND NOT DAVINCIRUN_ZIG_TARGET AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc)
  endif()
endfunction()
