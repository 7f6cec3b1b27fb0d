#include "python_script.hpp"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string_view>

#include "davincirun/process.hpp"

namespace davincirun::cli {

namespace {

bool is_executable_file(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// Splits off the last path component: "a/b/c" -> ("a/b", "c").
std::pair<std::string, std::string> split_last(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return {"", path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

// The interpreter of the installation scheme holding `self_exe` (the
// prefix/venv layout of Python's sysconfig "posix_prefix" scheme, where
// scripts go to <base>/bin), or "".
std::string installation_python(const std::string& self_exe) {
  constexpr std::string_view tail = "/davincirunsdk/bin/davincirun";
  if (!ends_with(self_exe, tail)) return "";
  const auto [lib_version, packages] = split_last(self_exe.substr(0, self_exe.size() - tail.size()));
  if (packages != "site-packages" && packages != "dist-packages") return "";
  const auto [lib, version] = split_last(lib_version);  // "python3.11", or Debian's "python3"
  const auto [base, lib_name] = split_last(lib);
  if ((lib_name != "lib" && lib_name != "lib64") || version.rfind("python3", 0) != 0) return "";
  // A venv made by CPython 3.7 has bin/python3 but no bin/python3.7.
  for (const std::string& name : {version, std::string("python3")}) {
    const std::string candidate = base + "/bin/" + name;
    if (is_executable_file(candidate)) return candidate;
  }
  return "";
}

}  // namespace

std::optional<std::string> python_interpreter(const Environment& env, const std::string& self_exe) {
  if (auto chosen = env.get("DAVINCIRUN_PYTHON"); chosen && !chosen->empty()) return chosen;
  if (std::string installed = installation_python(self_exe); !installed.empty()) return installed;
  const std::string path_list = env.get("PATH").value_or("/usr/local/bin:/usr/bin:/bin");
  for (const char* name : {"python3", "python"}) {
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
