#include "process/descendants.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>

#include "common/proc.hpp"
#include "davincirun/unique_fd.hpp"

namespace davincirun::detail {

std::vector<pid_t> live_descendants(pid_t root) {
  std::unordered_multimap<pid_t, pid_t> children;  // ppid -> pid
  std::unordered_map<pid_t, bool> zombie;
  for_each_process([&](pid_t pid, const ProcStat& stat) {
    children.emplace(stat.ppid, pid);
    zombie[pid] = stat.zombie();
  });

  std::vector<pid_t> out;
  std::vector<pid_t> todo{root};
  while (!todo.empty()) {
    const pid_t parent = todo.back();
    todo.pop_back();
    auto range = children.equal_range(parent);
    for (auto it = range.first; it != range.second; ++it) {
      if (!zombie[it->second]) out.push_back(it->second);
      todo.push_back(it->second);
    }
  }
  return out;
}

std::size_t reap_zombie_children() {
  std::size_t reaped = 0;
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      ++reaped;
      continue;
    }
    if (pid < 0 && errno == EINTR) continue;
    return reaped;  // 0: children left, none exited; -1/ECHILD: no children
  }
}

std::size_t kill_all_descendants(std::chrono::milliseconds budget, const std::vector<pid_t>& known_groups) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  const pid_t self = ::getpid();
  std::set<pid_t> signalled;
  for (;;) {
    reap_zombie_children();
    // No child at all, live or zombie, means no descendant: the scan of
    // every process in /proc (~1 ms on a busy server) is spared at the end
    // of nearly every job.
    siginfo_t info{};
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 && errno == ECHILD) break;
    const std::vector<pid_t> found = live_descendants(self);
    if (found.empty() || std::chrono::steady_clock::now() >= deadline) break;
    for (pid_t pid : found) {
      const pid_t group = ::getpgid(pid);
      const bool known = std::find(known_groups.begin(), known_groups.end(), group) != known_groups.end();
      if (::kill(pid, SIGKILL) == 0 && !known) signalled.insert(pid);
    }
    // The kernel needs a moment to tear them down and re-parent their
    // children to us; then the next pass catches what was forked meanwhile.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // The last pass skipped zombies, which may be our children: reap them.
  reap_zombie_children();
  return signalled.size();
}

}  // namespace davincirun::detail

namespace davincirun::detail {

namespace {

bool environment_holds(pid_t pid, const std::string& entry) {
  const std::string path = "/proc/" + std::to_string(pid) + "/environ";
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return false;  // gone, or another user's
  std::string env;
  char buf[16 * 1024];
  ssize_t n;
  while ((n = ::read(fd.get(), buf, sizeof buf)) > 0 && env.size() < (4U << 20)) {
    env.append(buf, static_cast<std::size_t>(n));
  }
  std::size_t start = 0;
  while (start < env.size()) {
    std::size_t end = env.find('\0', start);
    if (end == std::string::npos) end = env.size();
    if (env.compare(start, end - start, entry) == 0) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

std::size_t kill_tagged_processes(const std::string& entry, std::chrono::milliseconds budget,
                                  const std::vector<pid_t>& known_groups) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  std::set<pid_t> signalled;
  for (;;) {
    std::vector<pid_t> found;
    for_each_process([&](pid_t pid, const ProcStat& stat) {
      if (pid != ::getpid() && !stat.zombie() && environment_holds(pid, entry)) found.push_back(pid);
    });
    if (found.empty() || std::chrono::steady_clock::now() >= deadline) break;
    for (pid_t pid : found) {
      const bool known = std::find(known_groups.begin(), known_groups.end(), ::getpgid(pid)) != known_groups.end();
      if (::kill(pid, SIGKILL) == 0 && !known) signalled.insert(pid);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return signalled.size();
}

int become_child_subreaper() noexcept { return ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 ? 0 : errno; }

bool is_child_subreaper() noexcept {
  int value = 0;
  return ::prctl(PR_GET_CHILD_SUBREAPER, &value, 0, 0, 0) == 0 && value != 0;
}

}  // namespace davincirun::detail
