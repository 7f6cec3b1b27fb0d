#include "process/rank_set.hpp"

#include <signal.h>

namespace davincirun::detail {

std::vector<RunningRank> RankSet::running() const {
  std::vector<RunningRank> out;
  for (const auto& r : ranks) {
    if (!r.exited) out.push_back({r.result.role, r.result.rank, r.result.pid});
  }
  return out;
}

std::vector<pid_t> RankSet::pids() const {
  std::vector<pid_t> out;
  for (const auto& r : ranks) out.push_back(r.result.pid);
  return out;
}

std::vector<pid_t> RankSet::running_pids() const {
  std::vector<pid_t> out;
  for (const auto& r : ranks) {
    if (!r.exited) out.push_back(r.result.pid);
  }
  return out;
}

RankSet::Reached RankSet::terminate_running() {
  Reached reached;
  for (Rank& r : ranks) {
    if (r.exited) continue;
    r.child.signal_group(SIGTERM);
    r.result.terminated_by_launcher = true;
    if (r.result.role == ProcessRole::scheduler) {
      reached.scheduler = true;
    } else {
      ++reached.ranks;
    }
  }
  return reached;
}

void RankSet::kill_running() {
  for (Rank& r : ranks) {
    if (r.exited) continue;
    r.child.signal_group(SIGKILL);
    r.result.terminated_by_launcher = true;
    r.result.killed_by_launcher = true;
  }
}

void RankSet::signal_running(int signal) {
  for (Rank& r : ranks) {
    if (!r.exited) r.child.signal_group(signal);
  }
}

}  // namespace davincirun::detail
