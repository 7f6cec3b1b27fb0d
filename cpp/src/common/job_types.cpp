// How the job types read as words and numbers: a process's name, an exit
// status described, a job's verdict and exit code (job_types.hpp).
#include "davincirun/job_types.hpp"

#include <signal.h>

#include <fmt/format.h>

#include "common/text.hpp"

namespace davincirun {

std::string process_name(ProcessRole role, int rank) {
  return role == ProcessRole::scheduler || rank < 0 ? std::string("scheduler") : "rank " + std::to_string(rank);
}

std::string ExitStatus::describe() const {
  if (kind == Kind::exited) return fmt::format("exit code {}", value);
  if (kind == Kind::unknown) return "unknown exit status (SIGCHLD is ignored by the launching process)";
  if (const char* name = detail::signal_name(value)) return fmt::format("signal {} (SIG{})", value, name);
  return fmt::format("signal {}", value);
}

double seconds_since_epoch(std::chrono::system_clock::time_point t) noexcept {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

bool JobResult::success() const noexcept {
  if (stop_reason != StopReason::none) return false;
  for (const auto& r : ranks) {
    if (!r.status.success()) return false;
  }
  return true;
}

int JobResult::exit_code() const noexcept {
  if (first_failure) return ranks[*first_failure].status.shell_code();
  if (stop_reason == StopReason::requested) return 128 + SIGINT;
  if (stop_reason == StopReason::signaled) return 128 + stop_signal;
  if (stop_reason == StopReason::timed_out) return 124;
  if (stop_reason == StopReason::launcher_gone) return 128 + SIGHUP;
  if (stop_reason == StopReason::peer_failed) {
    return peer_stop && peer_stop->status && !peer_stop->status->success() ? peer_stop->status->shell_code() : 1;
  }
  if (stop_reason == StopReason::peer_stopped || stop_reason == StopReason::peer_lost) return 1;
  if (stop_reason == StopReason::stalled) return 124;
  for (const auto& r : ranks) {
    if (!r.status.success()) return r.status.shell_code();
  }
  return 0;
}

}  // namespace davincirun
