// How a job ended, in words and numbers: StopReason's names and
// JobResult's verdict and exit code (supervisor.hpp).
#include <signal.h>

#include "davincirun/supervisor.hpp"

namespace davincirun {

double seconds_since_epoch(std::chrono::system_clock::time_point t) noexcept {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

const char* to_string(StopReason reason) noexcept {
  switch (reason) {
    case StopReason::none: return "none";
    case StopReason::rank_failed: return "rank_failed";
    case StopReason::requested: return "requested";
    case StopReason::timed_out: return "timed_out";
    case StopReason::signaled: return "signaled";
    case StopReason::launcher_gone: return "launcher_gone";
    case StopReason::peer_failed: return "peer_failed";
    case StopReason::peer_stopped: return "peer_stopped";
    case StopReason::peer_lost: return "peer_lost";
    case StopReason::stalled: return "stalled";
  }
  return "none";
}

const char* to_string(SignalReceiver receiver) noexcept {
  switch (receiver) {
    case SignalReceiver::none: return "none";
    case SignalReceiver::launcher: return "launcher";
    case SignalReceiver::supervisor: return "supervisor";
  }
  return "none";
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
