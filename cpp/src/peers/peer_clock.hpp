// How the job record puts every server's times on one clock, rank 0's
// server's: the hub measures each member's clock offset from the peer
// channel's heartbeats, the way NTP does (RFC 5905, section 8), and keeps
// the sample with the shortest round trip.
//
// A member's heartbeat says when it was sent (member clock), and echoes the
// hub's last heartbeat it heard with how long it held it. With t1 the
// hub's send time, t2 the hub's receive time (hub clock), m_r = sent -
// held and m_s = sent (member clock):
//   delay  = (t2 - t1) - held
//   member clock - hub clock = ((m_r - t1) + (m_s - t2)) / 2
// Whatever the paths' asymmetry, the true offset lies within delay / 2 of
// that: the error the record states.
#pragma once

#include <cstdint>
#include <optional>

#include "peers/peer_message.hpp"

namespace davincirun::detail {

struct ClockSample {
  /// Seconds to add to the member's wall-clock times to put them on the hub's clock.
  double offset_s = 0;
  /// The most the offset can be wrong by, seconds: half the round trip.
  double error_s = 0;
};

/// This machine's wall clock, microseconds since the Unix epoch.
std::uint64_t wall_clock_us() noexcept;

/// The sample a member's heartbeat gives the hub, heard at `received_us`
/// (hub clock); nullopt when it echoes nothing, or its times cannot be
/// (a round trip shorter than the time held: not a heartbeat we sent).
std::optional<ClockSample> clock_sample(const PeerHeartbeat& beat, std::uint64_t received_us) noexcept;

/// Keeps the better of `kept` and `sample`: the smaller error.
void keep_best(std::optional<ClockSample>& kept, const ClockSample& sample) noexcept;

}  // namespace davincirun::detail
