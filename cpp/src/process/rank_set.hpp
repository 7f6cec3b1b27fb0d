// The ranks of one Supervisor and what is known of each: its process, its
// output, its result so far. The loop (supervisor.cpp) watches them; the
// life cycle (supervisor_states.cpp) signals them through these helpers.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <unordered_map>
#include <vector>

#include "davincirun/log_streamer.hpp"
#include "davincirun/process.hpp"
#include "davincirun/supervisor.hpp"
#include "process/stop_notice.hpp"

namespace davincirun::detail {

struct RankSet {
  struct Rank {
    ChildProcess child;
    RankLog log;
    RankResult result;
    bool exited = false;
    std::optional<std::chrono::steady_clock::time_point> drain_deadline;
  };
  std::vector<Rank> ranks;
  std::unordered_map<pid_t, std::size_t> by_pid;  // for reaping by SIGCHLD
  std::size_t live = 0;                           // ranks not yet exited
  std::size_t open_logs = 0;                      // ranks whose output is still read
  std::size_t draining = 0;                       // exited ranks whose output is still read

  /// Those not exited yet, for messages.
  std::vector<RunningRank> running() const;
  std::vector<pid_t> pids() const;
  std::vector<pid_t> running_pids() const;

  /// How many processes a stop reached: ranks, and whether the scheduler.
  struct Reached {
    std::size_t ranks = 0;
    bool scheduler = false;
    bool none() const noexcept { return ranks == 0 && !scheduler; }
  };
  /// SIGTERM to every rank still running, each marked as stopped by us.
  Reached terminate_running();
  /// SIGKILL to every rank still running, each marked as killed by us.
  void kill_running();
  /// Sends `signal` to every running rank's process group.
  void signal_running(int signal);
};

}  // namespace davincirun::detail
