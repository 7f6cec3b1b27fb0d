# fmt (used header-only) and nlohmann/json: the system's first (find_package:
# Debian libfmt-dev, nlohmann-json3-dev, or any install on CMAKE_PREFIX_PATH),
# else the copies bundled into the sdist under third_party/ when it is made
# (scripts/bundle_deps.sh). Never downloaded at build time.
# CMAKE_DISABLE_FIND_PACKAGE_fmt / _nlohmann_json=ON skip the system's.
set(DAVINCIRUN_THIRD_PARTY_DIR "${PROJECT_SOURCE_DIR}/third_party")

# The bundled copy of `name`, as the imported target `target`: header-only,
# its headers under third_party/<name>/include, its license beside them.
function(davincirun_bundled name target header)
  set(dir "${DAVINCIRUN_THIRD_PARTY_DIR}/${name}")
  if(NOT EXISTS "${dir}/include/${header}")
    message(FATAL_ERROR
      "${name} was not found. Provide it in one of two ways:\n"
      "  1. install it where CMake finds it (Debian/Ubuntu: apt install ${ARGN}; or set "
      "CMAKE_PREFIX_PATH to its install prefix), unless CMAKE_DISABLE_FIND_PACKAGE_${name} is set;\n"
      "  2. build from the sdist (pip install davincirunsdk-*.tar.gz), which bundles it in third_party/ "
      "(in a checkout: bash scripts/bundle_deps.sh, on a machine that has it).\n"
      "Missing: ${dir}/include/${header}")
  endif()
  add_library(${target} INTERFACE IMPORTED GLOBAL)
  set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${dir}/include")
  set_property(GLOBAL APPEND PROPERTY DAVINCIRUN_BUNDLED_LICENSES "${dir}/copyright")
  file(READ "${dir}/VERSION" version)
  string(STRIP "${version}" version)
  message(STATUS "${name}: the bundled copy ${version} (${dir})")
endfunction()

find_package(nlohmann_json 3.10 QUIET)
if(NOT nlohmann_json_FOUND)
  davincirun_bundled(nlohmann_json nlohmann_json::nlohmann_json nlohmann/json.hpp nlohmann-json3-dev)
endif()
find_package(fmt 8 QUIET)
if(NOT fmt_FOUND)
  davincirun_bundled(fmt fmt::fmt-header-only fmt/format.h libfmt-dev)
  set_target_properties(fmt::fmt-header-only PROPERTIES INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY=1)
endif()

# simdjson reads rank tables (a 65,536-rank table in a few milliseconds:
# docs/rank-table.md). Always compiled from its one-file amalgamation into
# the core (never the system's shared libsimdjson), so neither the programs,
# the wheel's module nor the installed static core need one at run time.
# scripts/bundle_deps.sh puts it in third_party/simdjson (scripts/setup.sh
# runs it; the sdist carries it).
set(simdjson_dir "${DAVINCIRUN_THIRD_PARTY_DIR}/simdjson")
if(NOT EXISTS "${simdjson_dir}/src/simdjson.cpp")
  message(FATAL_ERROR
    "simdjson was not found. In a checkout run: bash scripts/bundle_deps.sh simdjson (it downloads "
    "Debian's source of simdjson 3.0.1 and checks its SHA-256); an sdist carries it.\n"
    "Missing: ${simdjson_dir}/src/simdjson.cpp")
endif()
add_library(davincirun_simdjson OBJECT "${simdjson_dir}/src/simdjson.cpp")
target_include_directories(davincirun_simdjson PRIVATE "${simdjson_dir}/include")
# Errors as codes, which the reader checks (the core, cpp/CMakeLists.txt, too).
target_compile_definitions(davincirun_simdjson PRIVATE SIMDJSON_EXCEPTIONS=0)
set_property(GLOBAL APPEND PROPERTY DAVINCIRUN_BUNDLED_LICENSES "${simdjson_dir}/copyright")
file(READ "${simdjson_dir}/VERSION" simdjson_version)
string(STRIP "${simdjson_version}" simdjson_version)
message(STATUS "simdjson: ${simdjson_version}")
