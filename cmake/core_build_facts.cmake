# What a module built against a prebuilt core (cmake/prebuilt_core.cmake)
# must share with it: the sources, and the compiler with its C++ runtime and
# target. A core build writes them to <build>/davincirun_core_build.cmake.
set(davincirun_core_build_facts source_dir compiler version target processor sanitize)

# Sets <prefix>_<fact> for this build.
macro(davincirun_core_build_facts prefix)
  get_filename_component(${prefix}_source_dir "${PROJECT_SOURCE_DIR}" REALPATH)
  set(${prefix}_compiler "${CMAKE_CXX_COMPILER_ID}")
  set(${prefix}_version "${CMAKE_CXX_COMPILER_VERSION}")
  set(${prefix}_target "${DAVINCIRUN_ZIG_TARGET}${CMAKE_CXX_COMPILER_TARGET}")
  set(${prefix}_processor "${CMAKE_SYSTEM_PROCESSOR}")
  set(${prefix}_sanitize "${DAVINCIRUN_SANITIZE}")
endmacro()

# Writes this build's facts for later module builds.
function(davincirun_write_core_build_facts)
  davincirun_core_build_facts(prebuilt)
  set(text "# Written by cmake/core_build_facts.cmake.\n")
  foreach(fact IN LISTS davincirun_core_build_facts)
    string(APPEND text "set(prebuilt_${fact} \"${prebuilt_${fact}}\")\n")
  endforeach()
  file(WRITE "${CMAKE_BINARY_DIR}/davincirun_core_build.cmake" "${text}")
endfunction()
