# `cmake --install` for C++ consumers: headers, the static core library and a
# package config, so that another launcher can do
#   find_package(davincirun) ... target_link_libraries(x PRIVATE davincirun::davincirun)
# Not part of the Python wheel, which carries the module and the two programs.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set_target_properties(davincirun_core PROPERTIES EXPORT_NAME davincirun)
target_include_directories(davincirun_core PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
add_library(davincirun::davincirun ALIAS davincirun_core)

install(TARGETS davincirun_core EXPORT davincirunTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY cpp/include/davincirun DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS davincirun RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS davincirun-supervisor RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/davincirun)

set(config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/davincirun)
install(EXPORT davincirunTargets NAMESPACE davincirun:: DESTINATION ${config_dir})
configure_package_config_file(cmake/davincirunConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/davincirunConfig.cmake INSTALL_DESTINATION ${config_dir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/davincirunConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/davincirunConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/davincirunConfigVersion.cmake
        DESTINATION ${config_dir})
