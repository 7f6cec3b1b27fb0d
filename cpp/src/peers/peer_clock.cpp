#include "peers/peer_clock.hpp"

#include <chrono>

namespace davincirun::detail {

std::uint64_t wall_clock_us() noexcept {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(now).count());
}

std::optional<ClockSample> clock_sample(const PeerHeartbeat& beat, std::uint64_t received_us) noexcept {
  if (beat.echo_us == 0 || beat.sent_us < beat.held_us || received_us < beat.echo_us) return std::nullopt;
  const auto t1 = static_cast<double>(beat.echo_us);
  const auto t2 = static_cast<double>(received_us);
  const auto held = static_cast<double>(beat.held_us);
  const double delay = (t2 - t1) - held;
  if (delay < 0) return std::nullopt;
  const auto m_s = static_cast<double>(beat.sent_us);
  const double m_r = m_s - held;
  const double member_ahead = ((m_r - t1) + (m_s - t2)) / 2;
  return ClockSample{-member_ahead / 1e6, delay / 2 / 1e6};
}

void keep_best(std::optional<ClockSample>& kept, const ClockSample& sample) noexcept {
  if (!kept || sample.error_s < kept->error_s) kept = sample;
}

}  // namespace davincirun::detail
