// How a Supervisor is asked to stop, and what it does with the requests
// once its event loop sees them (supervisor.hpp). Requests may come from
// any thread and from signal handlers: each only sets an atomic and writes
// to an eventfd. The first request names the stop; only a person's second
// request (request_stop() while a stop is under way) kills before the
// grace period is over, so that an engine signalling every process at once
// (Slurm's srun, mpirun) makes one stop.
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include "common/text.hpp"
#include "davincirun/supervisor.hpp"

namespace davincirun {

void Supervisor::note_cause(StopCause cause) noexcept {
  int none = static_cast<int>(StopCause::none);
  first_cause_.compare_exchange_strong(none, static_cast<int>(cause));
}

void Supervisor::wake_for_stop() noexcept {
  const std::uint64_t one = 1;
  const ssize_t ignored = ::write(stop_fd_.get(), &one, sizeof one);
  (void)ignored;
}

void Supervisor::request_stop() noexcept {
  note_cause(StopCause::request);
  requests_.fetch_add(1);
  wake_for_stop();
}

void Supervisor::request_stop_by_signal(int signal) noexcept {
  int none = 0;
  stop_signal_.compare_exchange_strong(none, signal);  // the first signal names the stop
  note_cause(StopCause::signal);
  wake_for_stop();
}

void Supervisor::request_stop_orphaned() noexcept {
  orphaned_.store(true);
  note_cause(StopCause::orphaned);
  wake_for_stop();
}

void Supervisor::request_stop_by_peer(StopReason reason, PeerStop stop) {
  {
    const std::lock_guard<std::mutex> lock(peer_mutex_);
    if (peer_stop_) return;
    peer_reason_ = reason;
    peer_stop_ = std::move(stop);
  }
  note_cause(StopCause::peer);
  wake_for_stop();
}

void Supervisor::request_kill_dropped() noexcept {
  dropped_.store(true);
  request_kill();
}

void Supervisor::request_kill() noexcept {
  kill_requested_.store(true);
  wake_for_stop();
}

void Supervisor::post_notice(std::string text) {
  {
    const std::lock_guard<std::mutex> lock(peer_mutex_);
    posted_notices_.push_back(std::move(text));
  }
  const std::uint64_t one = 1;
  const ssize_t ignored = ::write(signal_fd_.get(), &one, sizeof one);  // the loop's other wake-up
  (void)ignored;
}

void Supervisor::flush_posted_notices() {
  std::vector<std::string> notices;
  {
    const std::lock_guard<std::mutex> lock(peer_mutex_);
    notices.swap(posted_notices_);
  }
  for (const auto& text : notices) log_notice(text);
}

std::uint64_t Supervisor::silent_ms() const noexcept {
  using namespace std::chrono;
  const std::int64_t last = last_output_ns_.load(std::memory_order_relaxed);
  const auto since = last != 0 ? steady_clock::time_point(nanoseconds(last)) : run_started_;
  const auto ms = duration_cast<milliseconds>(steady_clock::now() - since).count();
  return ms < 0 ? 0 : static_cast<std::uint64_t>(ms);
}

void Supervisor::handle_stop_requests() {
  std::uint64_t count = 0;
  const ssize_t ignored = ::read(stop_fd_.get(), &count, sizeof count);
  (void)ignored;
  if (kill_requested_.exchange(false)) {
    log_notice(dropped_.load() ? "the job was dropped (its handle destroyed) before it ended: killing every rank now"
                               : "kill requested: killing every rank now");
    if (stop_reason_ == StopReason::none) stop_reason_ = requested_reason();
    kill_remaining();
    return;
  }
  const std::uint64_t requests = requests_.load();
  const auto cause = static_cast<StopCause>(first_cause_.load());
  if (stop_reason_ == StopReason::none && cause != StopCause::none) {
    // The first request names the stop; a person's request that began it is spent.
    requests_seen_ = cause == StopCause::request ? 1 : 0;
    switch (cause) {
      case StopCause::signal: {
        const int sig = stop_signal_.load();
        const char* name = detail::signal_name(sig);
        begin_stop(StopReason::signaled, std::nullopt,
                   fmt::format("the job supervisor got signal {} (SIG{})", sig, name ? name : "?"));
        break;
      }
      case StopCause::peer: {
        StopReason reason = StopReason::peer_lost;
        std::string why;
        {
          const std::lock_guard<std::mutex> lock(peer_mutex_);
          reason = peer_reason_;
          why = peer_stop_ ? describe(reason, *peer_stop_) : std::string();
        }
        begin_stop(reason, std::nullopt, why);
        break;
      }
      case StopCause::orphaned: begin_stop(StopReason::launcher_gone, std::nullopt, "the launcher is gone"); break;
      case StopCause::request:
      case StopCause::none: begin_stop(requested_reason(), std::nullopt, "stop requested"); break;
    }
  }
  if (requests > requests_seen_) {
    // A person asking (again) while the job stops, for whatever reason.
    requests_seen_ = requests;
    log_notice("stop requested again: killing every rank now");
    if (stop_reason_ == StopReason::none) stop_reason_ = requested_reason();
    kill_remaining();
  }
}

std::string describe(StopReason reason, const PeerStop& stop) {
  switch (reason) {
    case StopReason::peer_failed:
      if (stop.status) {
        return fmt::format("{} on server {} failed with {}", process_name(stop.role, stop.rank), stop.server_id,
                           stop.status->describe());
      }
      return fmt::format("the job was stopped on server {}: {}", stop.server_id, stop.detail);
    case StopReason::stalled: return fmt::format("the job stalled: {}", stop.detail);
    default: return fmt::format("server {} was lost: {}", stop.server_id, stop.detail);
  }
}

}  // namespace davincirun
