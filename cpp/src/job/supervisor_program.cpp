#include "job/supervisor_program.hpp"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "davincirun/errors.hpp"
#include "process/command_lookup.hpp"

namespace davincirun::detail {

std::string find_supervisor_program(const std::string& configured) {
  if (!configured.empty()) {
    if (!is_executable_file(configured)) {
      throw ConfigError(fmt::format("the job supervisor program '{}' is not an executable file", configured));
    }
    return configured;
  }
  if (const char* env = ::getenv("DAVINCIRUN_SUPERVISOR"); env && *env) {
    if (!is_executable_file(env)) {
      throw ConfigError(fmt::format("DAVINCIRUN_SUPERVISOR='{}' is not an executable file", env));
    }
    return env;
  }
  // In this order, each path tried once: next to this executable (a wheel's
  // scripts directory holds both programs); where `cmake --install` puts it
  // relative to its bin directory, so that a prefix given only at install
  // time (`cmake --install --prefix`) or a moved tree still works; where it
  // put it for the prefix configured, for a program installed elsewhere
  // that links the library.
  std::vector<std::string> tried;
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string dir(self, static_cast<std::size_t>(n));
    dir.resize(dir.rfind('/'));
    tried.push_back(dir + "/davincirun-supervisor");
#ifdef DAVINCIRUN_LIBEXEC_FROM_BIN
    std::string relative = DAVINCIRUN_LIBEXEC_FROM_BIN;  // e.g. "../libexec/davincirun"
    while (relative.rfind("../", 0) == 0 && !dir.empty()) {
      dir.resize(dir.rfind('/'));
      relative.erase(0, 3);
    }
    tried.push_back(dir + "/" + relative + "/davincirun-supervisor");
#endif
  }
#ifdef DAVINCIRUN_LIBEXEC_DIR
  tried.push_back(std::string(DAVINCIRUN_LIBEXEC_DIR) + "/davincirun-supervisor");
#endif
  tried.erase(std::unique(tried.begin(), tried.end()), tried.end());
  for (const auto& path : tried) {
    if (is_executable_file(path)) return path;
  }
  throw ConfigError(
      fmt::format("cannot find the davincirun-supervisor program (tried {}); set "
                  "DAVINCIRUN_SUPERVISOR to its path",
                  fmt::join(tried, ", ")));
}

}  // namespace davincirun::detail
