// child_signal: prints what it inherited: its SigBlk and SigIgn lines from
// /proc/self/status, "pid N", "pgid N", "stdin <target of fd 0>" and
// "fds a b c" (its open descriptors), then exits 0.
#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

int main() {
  {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("SigBlk:", 0) == 0 || line.rfind("SigIgn:", 0) == 0) std::printf("%s\n", line.c_str());
    }
  }
  std::printf("pid %d\npgid %d\n", static_cast<int>(::getpid()), static_cast<int>(::getpgrp()));
  char target[4096] = {};
  const ssize_t n = ::readlink("/proc/self/fd/0", target, sizeof target - 1);
  std::printf("stdin %s\n", n > 0 ? target : "?");
  std::string fds;
  DIR* dir = ::opendir("/proc/self/fd");
  while (const dirent* entry = dir ? ::readdir(dir) : nullptr) {
    if (entry->d_name[0] == '.' || std::atoi(entry->d_name) == ::dirfd(dir)) continue;
    fds += std::string(" ") + entry->d_name;
  }
  if (dir) ::closedir(dir);
  std::printf("fds%s\n", fds.c_str());
  return 0;
}
