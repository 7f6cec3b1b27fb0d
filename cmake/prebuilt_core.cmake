# DAVINCIRUN_PREBUILT_CORE=<build dir>: reuse the core library and the two
# programs of another build directory of this same source tree and compiler,
# and build only the Python module here. A wheel build (SKBUILD) links its own
# `davincirun` from that build's libdavincirun_cli.a and one small source
# (cli/wheel_python.cpp: the program holds the name of the interpreter the
# wheel is for); any other build uses the other build's program, which finds
# the supervisor next to itself there. The core does not depend on Python,
# so one core serves every CPython version: scripts/build_wheels.sh builds it
# once per architecture, scripts/test.sh once for the interpreters it tests.
# The other build must be up to date: nothing here rebuilds it.
get_filename_component(prebuilt "${DAVINCIRUN_PREBUILT_CORE}" ABSOLUTE)
if(NOT EXISTS "${prebuilt}/CMakeCache.txt")
  message(FATAL_ERROR "DAVINCIRUN_PREBUILT_CORE=${prebuilt} is not a CMake build directory (no CMakeCache.txt)")
endif()
# The module compiles against this tree's headers and links with this
# compiler's C++ runtime: both must be the core's, as the core build recorded
# them (davincirun_core_build.cmake, written by CMakeLists.txt).
set(record "${prebuilt}/davincirun_core_build.cmake")
if(NOT EXISTS "${record}")
  message(FATAL_ERROR "DAVINCIRUN_PREBUILT_CORE=${prebuilt} has no ${record}: not a core build of this project")
endif()
include(cmake/core_build_facts.cmake)
include("${record}")
davincirun_core_build_facts(here)
foreach(fact IN LISTS davincirun_core_build_facts)
  if(NOT "${here_${fact}}" STREQUAL "${prebuilt_${fact}}")
    message(FATAL_ERROR "DAVINCIRUN_PREBUILT_CORE=${prebuilt} does not match this build: its ${fact} is "
                        "'${prebuilt_${fact}}', here '${here_${fact}}'")
  endif()
endforeach()

foreach(file cpp/libdavincirun_core.a cpp/libdavincirun_job_host.a cpp/libdavincirun_cli.a cpp/davincirun
             cpp/davincirun-supervisor)
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
add_executable(davincirun-supervisor IMPORTED GLOBAL)
set_target_properties(davincirun-supervisor PROPERTIES IMPORTED_LOCATION "${prebuilt}/cpp/davincirun-supervisor")
if(SKBUILD)
  add_library(davincirun_job_host STATIC IMPORTED GLOBAL)
  set_target_properties(davincirun_job_host PROPERTIES
    IMPORTED_LOCATION "${prebuilt}/cpp/libdavincirun_job_host.a"
    INTERFACE_LINK_LIBRARIES davincirun_core)
  add_library(davincirun_cli STATIC IMPORTED GLOBAL)
  set_target_properties(davincirun_cli PROPERTIES
    IMPORTED_LOCATION "${prebuilt}/cpp/libdavincirun_cli.a"
    INTERFACE_LINK_LIBRARIES "davincirun_job_host;davincirun_core")
  add_executable(davincirun cpp/cli/wheel_python.cpp)
  davincirun_target_options(davincirun)
  davincirun_program_options(davincirun)
  target_link_libraries(davincirun PRIVATE davincirun_cli)
  # As cpp/CMakeLists.txt installs them.
  install(TARGETS davincirun DESTINATION ${SKBUILD_SCRIPTS_DIR})
  install(PROGRAMS "${prebuilt}/cpp/davincirun-supervisor" DESTINATION ${SKBUILD_SCRIPTS_DIR})
  install(PROGRAMS "${prebuilt}/cpp/davincirun-supervisor" DESTINATION davincirunsdk/bin)
  message(STATUS "davincirun: the core, CLI library and supervisor of ${prebuilt}; the module and davincirun built here")
else()
  add_executable(davincirun IMPORTED GLOBAL)
  set_target_properties(davincirun PROPERTIES IMPORTED_LOCATION "${prebuilt}/cpp/davincirun")
  message(STATUS "davincirun: the core and programs of ${prebuilt}, only the module built here")
endif()
