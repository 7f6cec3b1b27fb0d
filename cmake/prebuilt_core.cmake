# DAVINCIRUN_PREBUILT_CORE=<build dir>: reuse the core library and the two
# programs of another build directory of this same source tree and compiler,
# and build only the Python module here. The core does not depend on Python,
# so one core serves every CPython version: scripts/build_wheels.sh builds it
# once per architecture, scripts/test.sh once for the interpreters it tests.
# The other build must be up to date: nothing here rebuilds it.
set(prebuilt "${DAVINCIRUN_PREBUILT_CORE}")
if(NOT EXISTS "${prebuilt}/CMakeCache.txt")
  message(FATAL_ERROR "DAVINCIRUN_PREBUILT_CORE=${prebuilt} is not a CMake build directory (no CMakeCache.txt)")
endif()
load_cache("${prebuilt}" READ_WITH_PREFIX prebuilt_ davincirun_SOURCE_DIR CMAKE_CXX_COMPILER CMAKE_BUILD_TYPE)
# The module compiles against this tree's headers and links with this
# compiler's C++ runtime: both must be the core's.
get_filename_component(here "${PROJECT_SOURCE_DIR}" REALPATH)
get_filename_component(there "${prebuilt_davincirun_SOURCE_DIR}" REALPATH)
if(NOT here STREQUAL there)
  message(FATAL_ERROR "DAVINCIRUN_PREBUILT_CORE=${prebuilt} was built from ${there}, not from this tree (${here})")
endif()
get_filename_component(compiler_here "${CMAKE_CXX_COMPILER}" NAME)
get_filename_component(compiler_there "${prebuilt_CMAKE_CXX_COMPILER}" NAME)
if(NOT compiler_here STREQUAL compiler_there)
  message(FATAL_ERROR "DAVINCIRUN_PREBUILT_CORE=${prebuilt} was built with ${prebuilt_CMAKE_CXX_COMPILER}, "
                      "this build uses ${CMAKE_CXX_COMPILER}: the C++ runtimes would differ")
endif()

foreach(file cpp/libdavincirun_core.a cpp/davincirun cpp/davincirun-supervisor)
  if(NOT EXISTS "${prebuilt}/${file}")
    message(FATAL_ERROR "DAVINCIRUN_PREBUILT_CORE=${prebuilt} has no ${file}: build it first "
                        "(cmake --build ${prebuilt} --target davincirun_core davincirun davincirun-supervisor)")
  endif()
endforeach()
add_library(davincirun_core STATIC IMPORTED GLOBAL)
set_target_properties(davincirun_core PROPERTIES
  IMPORTED_LOCATION "${prebuilt}/cpp/libdavincirun_core.a"
  INTERFACE_INCLUDE_DIRECTORIES "${PROJECT_SOURCE_DIR}/cpp/include"
  INTERFACE_LINK_LIBRARIES Threads::Threads)
add_library(davincirun::core ALIAS davincirun_core)
foreach(program davincirun davincirun-supervisor)
  add_executable(${program} IMPORTED GLOBAL)
  set_target_properties(${program} PROPERTIES IMPORTED_LOCATION "${prebuilt}/cpp/${program}")
endforeach()
if(SKBUILD)
  install(PROGRAMS "${prebuilt}/cpp/davincirun" "${prebuilt}/cpp/davincirun-supervisor" DESTINATION davincirunsdk/bin)
endif()
message(STATUS "davincirun: the core and programs of ${prebuilt} (${prebuilt_CMAKE_BUILD_TYPE}), only the module built here")
