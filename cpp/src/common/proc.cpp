#include "common/proc.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/text.hpp"
#include "davincirun/unique_fd.hpp"

namespace davincirun::detail {

std::optional<ProcStat> read_proc_stat(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  char buf[512];
  const ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
  if (n <= 0) return std::nullopt;
  buf[n] = '\0';
  const char* close_paren = std::strrchr(buf, ')');
  if (!close_paren || close_paren[1] != ' ' || close_paren[2] == '\0' || close_paren[3] != ' ') return std::nullopt;
  char* end = nullptr;
  const long ppid = std::strtol(close_paren + 4, &end, 10);
  if (end == close_paren + 4) return std::nullopt;
  return ProcStat{static_cast<pid_t>(ppid), close_paren[2]};
}

std::string command_name(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/comm";
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return {};
  char buf[64];
  const ssize_t n = ::read(fd.get(), buf, sizeof buf);
  if (n <= 0) return {};
  std::string name(buf, static_cast<std::size_t>(n));
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return printable(name);
}

std::vector<pid_t> list_processes() {
  std::vector<pid_t> pids;
  const std::unique_ptr<DIR, int (*)(DIR*)> proc(::opendir("/proc"), ::closedir);
  if (!proc) return pids;
  while (const dirent* entry = ::readdir(proc.get())) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (*end == '\0' && pid > 0) pids.push_back(static_cast<pid_t>(pid));
  }
  return pids;
}

}  // namespace davincirun::detail
