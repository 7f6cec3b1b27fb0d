// Shared by the supervisor tests: the supervision modes every test runs in,
// rank launches from the helper programs, run() under a deadline, and the
// checks that prove nothing a test started is left behind.
#pragma once

#include <catch2/catch.hpp>

#include <sys/prctl.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "davincirun/supervisor.hpp"
#include "test_support.hpp"

namespace davincirun_test {

/// One way of supervising ranks: how exits are observed, and whether the
/// supervisor owns every child of this process (the davincirun-supervisor
/// process's way: signalfd for SIGCHLD, orphans reaped, leftovers swept).
struct SupervisionMode {
  const char* name;
  davincirun::ProcessTracking tracking;
  bool owns_all_children;

  /// `base` with this mode's tracking and ownership.
  davincirun::SupervisorOptions options(davincirun::SupervisorOptions base = {}) const {
    base.tracking = tracking;
    base.owns_all_children = owns_all_children;
    return base;
  }
};

enum class Modes { all, owning, not_owning };

/// The supervision modes this kernel supports (the pidfd ones need Linux >= 5.4),
/// all of them or only those that do / do not own every child.
inline std::vector<SupervisionMode> supervision_modes(Modes which = Modes::all) {
  using davincirun::ProcessTracking;
  const SupervisionMode every[] = {
      {"pidfd, not owning", ProcessTracking::pidfd, false},
      {"pidfd, owns_all_children", ProcessTracking::pidfd, true},
      {"sigchld, owns_all_children", ProcessTracking::sigchld, true},
  };
  std::vector<SupervisionMode> out;
  for (const auto& mode : every) {
    if (mode.tracking == ProcessTracking::pidfd && !davincirun::pidfd_supported()) continue;
    if (which == Modes::owning && !mode.owns_all_children) continue;
    if (which == Modes::not_owning && mode.owns_all_children) continue;
    out.push_back(mode);
  }
  return out;
}

}  // namespace davincirun_test

/// Runs the rest of the test case (every SECTION in it included) once per
/// supervision mode that `which` selects (Modes::all, Modes::owning or
/// Modes::not_owning), declaring `mode`; every failure names the mode. Put it before the first
/// SECTION (Catch2 generators must precede the sections they multiply).
#define FOR_EACH_SUPERVISION_MODE(mode, which)                                              \
  const ::davincirun_test::SupervisionMode mode =                                           \
      GENERATE(from_range(::davincirun_test::supervision_modes(::davincirun_test::which))); \
  INFO("supervision mode: " << mode.name)

namespace davincirun_test {

inline davincirun::RankLaunch launch(const TempDir& dir, int rank, std::vector<std::string> argv) {
  davincirun::RankLaunch l;
  l.rank = rank;
  l.process.argv = std::move(argv);
  l.process.env = {"PATH=/usr/bin:/bin"};
  l.log_path = dir / ("rank_" + std::to_string(rank) + ".log");
  l.label = "rank " + std::to_string(rank);
  return l;
}

struct Outcome {
  davincirun::JobResult result;
  std::chrono::steady_clock::duration elapsed;
};

/// run() under a deadline: past it, the watchdog kills every rank (and the test fails).
inline Outcome run_with_deadline(davincirun::Supervisor& sup, std::chrono::milliseconds deadline = 30s) {
  Watchdog dog(deadline, [&sup] {
    sup.request_stop();
    sup.request_stop();
  });
  const auto start = std::chrono::steady_clock::now();
  davincirun::JobResult result = sup.run();
  const auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK_FALSE(dog.fired());
  return {std::move(result), elapsed};
}

inline void check_nothing_left(const davincirun::JobResult& result) {
  for (const auto& r : result.ranks) {
    INFO("rank " << r.rank << " pid " << r.pid);
    CHECK(reaped(r.pid));
  }
  CHECK(no_children_left());
}

inline void check_status(const davincirun::ExitStatus& status, davincirun::ExitStatus::Kind kind, int value) {
  INFO("status: " << status.describe());
  CHECK(status.kind == kind);
  CHECK(status.value == value);
}

/// Makes this process a child subreaper (PR_SET_CHILD_SUBREAPER) for its
/// lifetime, as davincirun-supervisor is: orphans below it are re-parented to
/// it instead of to init. Reap or kill every such orphan before it ends.
class ChildSubreaper {
 public:
  ChildSubreaper() { REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0); }
  ~ChildSubreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0); }
  ChildSubreaper(const ChildSubreaper&) = delete;
  ChildSubreaper& operator=(const ChildSubreaper&) = delete;
};

/// SIGKILLs a process the test started indirectly when the test ends, and
/// reaps it if it became this process's child (re-parented to a subreaper).
class KillAndReapOnExit {
 public:
  void set(pid_t pid) noexcept { pid_ = pid; }
  void clear() noexcept { pid_ = -1; }
  ~KillAndReapOnExit() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {}
  }

 private:
  pid_t pid_ = -1;
};

/// The parent pid in /proc/<pid>/stat; -1 when the process does not exist.
inline pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return -1;
  const auto paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 4 >= stat.size()) return -1;
  return static_cast<pid_t>(std::strtol(stat.c_str() + paren + 4, nullptr, 10));
}

/// Polls reaped() (kill(pid, 0) says ESRCH: not even a zombie is left) until `timeout`.
inline bool wait_reaped(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!reaped(pid)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

}  // namespace davincirun_test
