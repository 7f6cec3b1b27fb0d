#include "python_script.hpp"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string_view>
#include <vector>

#include "davincirun/process.hpp"
#include "process/command_lookup.hpp"

namespace davincirun::cli {

namespace {

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

}  // namespace

std::optional<std::string> python_interpreter(const Environment& env, const std::string& self_exe,
                                              const std::string& versioned_name) {
  if (auto chosen = env.get("DAVINCIRUN_PYTHON"); chosen && !chosen->empty()) return chosen;
  std::vector<std::string> names;
  if (!versioned_name.empty()) names.push_back(versioned_name);
  names.emplace_back("python3");
  if (const auto slash = self_exe.rfind('/'); slash != std::string::npos) {
    const std::string dir = self_exe.substr(0, slash);
    for (const std::string& name : names) {
      std::string candidate = dir + "/" + name;
      if (detail::is_executable_file(candidate)) return candidate;
    }
  }
  names.emplace_back("python");  // last, and only in PATH: an old system's `python` may be Python 2
  const std::string path_list = env.get("PATH").value_or(default_search_path);
  for (const std::string& name : names) {
    int error = 0;
    if (auto found = find_executable(name, path_list, error)) return found;
  }
  return std::nullopt;
}

bool is_unexecutable_python_script(const std::vector<std::string>& command, const std::string& work_dir) {
  if (command.empty() || !ends_with(command[0], ".py")) return false;
  const std::string& script = command[0];
  const std::string path = script[0] == '/' ? script : (work_dir.empty() ? "." : work_dir) + "/" + script;
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) != 0;
}

std::string self_executable() {
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  return n > 0 ? std::string(self, static_cast<std::size_t>(n)) : std::string();
}

}  // namespace davincirun::cli
