#include "stack_dump.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "davincirun/process.hpp"

extern char** environ;

namespace davincirun::detail {

namespace {

constexpr std::chrono::seconds dump_budget{10};

std::string file_label(const std::string& label) {
  std::string out = label;
  std::replace(out.begin(), out.end(), ' ', '_');
  return out;
}

}  // namespace

std::string dump_python_stacks(const std::vector<pid_t>& pids, const std::vector<std::string>& labels,
                               const std::string& dir) {
  const char* path = ::getenv("PATH");
  int lookup_error = 0;
  const std::optional<std::string> py_spy = find_executable("py-spy", path ? path : "", lookup_error);
  if (!py_spy) return "no Python stacks: py-spy is not on PATH (pip install py-spy)";
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return fmt::format("no Python stacks: cannot create {}", dir);
  std::vector<pid_t> dumpers;
  for (std::size_t i = 0; i < pids.size(); ++i) {
    const std::string out = fmt::format("{}/{}.stacks.txt", dir, file_label(i < labels.size() ? labels[i] : "process"));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const std::string pid_text = std::to_string(pids[i]);
    std::vector<char*> argv{const_cast<char*>(py_spy->c_str()), const_cast<char*>("dump"), const_cast<char*>("--pid"),
                            const_cast<char*>(pid_text.c_str()), nullptr};
    pid_t child = 0;
    if (::posix_spawn(&child, py_spy->c_str(), &actions, nullptr, argv.data(), environ) == 0) {
      dumpers.push_back(child);
    }
    posix_spawn_file_actions_destroy(&actions);
  }
  // The supervisor may reap them first (it reaps every child of this
  // process): ECHILD means done.
  std::size_t ok = 0;
  const auto deadline = std::chrono::steady_clock::now() + dump_budget;
  for (const pid_t child : dumpers) {
    for (;;) {
      int status = 0;
      const pid_t got = ::waitpid(child, &status, WNOHANG);
      if (got == child) {
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) ++ok;
        break;
      }
      if (got < 0 && errno != EINTR) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        ::kill(child, SIGKILL);
        continue;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  if (dumpers.empty()) return fmt::format("no Python stacks: {} could not be started", *py_spy);
  return fmt::format(
      "Python stacks of {} process(es) in {}/ (py-spy dump{})", dumpers.size(), dir,
      ok < dumpers.size()
          ? fmt::format("; {} failed: see the files, ptrace may be refused to a non-root user", dumpers.size() - ok)
          : "");
}

}  // namespace davincirun::detail
