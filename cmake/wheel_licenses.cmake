# The licenses of what a wheel has compiled in, installed beside the
# package's own LICENSE (<name>.dist-info/licenses/third_party/): fmt and
# nlohmann/json when the bundled copies were used (cmake/dependencies.cmake),
# and the C++ runtime zig links in statically (libc++, libc++abi, libunwind,
# and zig's compiler_rt) when built with cmake/toolchains/zig-*.cmake.
set(destination "${SKBUILD_METADATA_DIR}/licenses/third_party")
get_property(bundled GLOBAL PROPERTY DAVINCIRUN_BUNDLED_LICENSES)
foreach(file IN LISTS bundled)
  get_filename_component(dir "${file}" DIRECTORY)
  get_filename_component(name "${dir}" NAME)
  install(FILES "${file}" DESTINATION "${destination}" RENAME "${name}.txt")
endforeach()
if(DAVINCIRUN_ZIG_LIB_DIR)
  foreach(part libcxx libcxxabi libunwind)
    if(NOT EXISTS "${DAVINCIRUN_ZIG_LIB_DIR}/${part}/LICENSE.TXT")
      message(FATAL_ERROR "zig's ${part} has no license file at ${DAVINCIRUN_ZIG_LIB_DIR}/${part}/LICENSE.TXT")
    endif()
    install(FILES "${DAVINCIRUN_ZIG_LIB_DIR}/${part}/LICENSE.TXT" DESTINATION "${destination}" RENAME "${part}.txt")
  endforeach()
  # compiler_rt is zig's own code, under zig's license (beside lib/ in the
  # ziglang package and zig's release archives).
  if(EXISTS "${DAVINCIRUN_ZIG_LIB_DIR}/../LICENSE")
    install(FILES "${DAVINCIRUN_ZIG_LIB_DIR}/../LICENSE" DESTINATION "${destination}" RENAME "zig_compiler_rt.txt")
  endif()
endif()
