#include "common/proc.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
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

// Fields 48 and 49 of /proc/self/stat bound the argument strings (proc(5)).
void rename_command_line(const char* name) noexcept {
  char stat[1024];
  const int fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  const ssize_t n = ::read(fd, stat, sizeof stat - 1);
  ::close(fd);
  if (n <= 0) return;
  stat[n] = '\0';
  const char* field = std::strrchr(stat, ')');  // after the name, which may hold spaces
  for (int spaces = 0; field != nullptr && spaces < 46; ++spaces) field = std::strchr(field + 1, ' ');
  unsigned long bounds[2] = {0, 0};  // NOLINT(google-runtime-int): the kernel's unsigned long
  if (field == nullptr || std::sscanf(field, " %lu %lu", &bounds[0], &bounds[1]) != 2) return;
  if (bounds[0] == 0 || bounds[1] <= bounds[0]) return;
  char* area = reinterpret_cast<char*>(bounds[0]);  // NOLINT(performance-no-int-to-ptr): the kernel's address
  const std::size_t size = bounds[1] - bounds[0];
  const std::size_t kept = std::min(std::strlen(name), size - 1);
  std::copy_n(name, kept, area);
  std::memset(area + kept, 0, size - kept);
}

}  // namespace davincirun::detail
