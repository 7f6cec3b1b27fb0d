// What other threads ask of a Supervisor (supervisor.hpp): each request goes
// to its RequestInbox and wakes the loop, which looks it up in the life
// cycle's table. Only a person's second request (request_stop() while a
// stop is under way) kills before the grace period is over, so that an
// engine signalling every process at once (Slurm's srun, mpirun) makes one
// stop.
#include <fmt/format.h>

#include "davincirun/supervisor.hpp"
#include "process/rank_set.hpp"
#include "process/request_inbox.hpp"
#include "process/supervisor_event.hpp"

namespace davincirun {

void Supervisor::request_stop() noexcept { inbox_->stop(); }
void Supervisor::request_stop_orphaned() noexcept { inbox_->stop_orphaned(); }
void Supervisor::request_kill() noexcept { inbox_->kill(false); }
void Supervisor::request_kill_dropped() noexcept { inbox_->kill(true); }
void Supervisor::request_stop_by_signal(int signal, const SignalOrigin& origin) noexcept {
  inbox_->stop_by_signal(signal, origin);
}
void Supervisor::request_stop_by_peer(JobEvent event, PeerStop stop) { inbox_->peer(event, std::move(stop)); }
void Supervisor::servers_done() noexcept { inbox_->servers_done(); }
void Supervisor::servers_decided(ServersDecision decision) { inbox_->decided(std::move(decision)); }
void Supervisor::forward_signal(int signal) noexcept { inbox_->forward(signal); }
void Supervisor::post_notice(std::string text, bool info) { inbox_->post(std::move(text), info); }
void Supervisor::set_server_link(ServerLink link) { link_ = std::move(link); }
void Supervisor::set_restarts(Restarts restarts) { restarts_ = std::move(restarts); }

std::uint64_t Supervisor::silent_ms() const noexcept {
  using namespace std::chrono;
  const std::int64_t last = last_output_ns_.load(std::memory_order_relaxed);
  const auto since = last != 0 ? steady_clock::time_point(nanoseconds(last)) : run_started_;
  const auto ms = duration_cast<milliseconds>(steady_clock::now() - since).count();
  return ms < 0 ? 0 : static_cast<std::uint64_t>(ms);
}

std::string describe(StopReason reason, const PeerStop& stop) {
  switch (reason) {
    case StopReason::peer_failed:
      if (stop.status) {
        return fmt::format("{} on server {} failed with {}", process_name(stop.role, stop.rank), stop.server_id,
                           stop.status->describe());
      }
      return fmt::format("server {} failed: {}", stop.server_id, stop.detail);
    case StopReason::peer_stopped: return fmt::format("server {} was stopped ({})", stop.server_id, stop.detail);
    case StopReason::stalled: return fmt::format("the job stalled: {}", stop.detail);
    default: return fmt::format("server {} {}", stop.server_id, stop.detail);
  }
}

}  // namespace davincirun
