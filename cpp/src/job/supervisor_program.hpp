// Finding the davincirun-supervisor executable a Job starts.
#pragma once

#include <string>

namespace davincirun::detail {

/// `configured` (LaunchOptions::supervisor_program) when not empty, else
/// the DAVINCIRUN_SUPERVISOR variable of this process, else
/// `davincirun-supervisor` next to this process's executable, else, in a
/// build for `cmake --install`, the one installed with the library: first
/// relative to this executable (`<bin>/../libexec/davincirun/`,
/// DAVINCIRUN_LIBEXEC_FROM_BIN), then in the configured prefix
/// (DAVINCIRUN_LIBEXEC_DIR). Throws ConfigError naming what was tried when
/// none is an executable file.
std::string find_supervisor_program(const std::string& configured);

}  // namespace davincirun::detail
