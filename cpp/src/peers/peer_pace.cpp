// The job's pace across servers (output/slow_ranks.hpp): each member's
// heartbeats carry its ranks' median position and its slow ranks; the hub
// takes the upper median of every server's and sends it back in its own,
// so that every server compares its ranks with the whole job's, and names
// the members' slow ranks in its notices.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "peers/peer_agent.hpp"
#include "peers/peer_connection.hpp"

namespace davincirun::detail {

namespace {

std::int64_t milli(std::optional<double> position) {
  return position && *position >= 0 ? static_cast<std::int64_t>(std::llround(*position * 1000.0)) : -1;
}

std::optional<double> from_milli(std::int64_t value) {
  return value >= 0 ? std::optional<double>(static_cast<double>(value) / 1000.0) : std::nullopt;
}

}  // namespace

void PeerAgent::put_pace(PeerHeartbeat& beat) {
  if (config_.hub) {
    beat.pace_milli = milli(job_pace_);
    return;
  }
  if (!pace_probe_) return;
  ServerPace pace = pace_probe_();
  beat.pace_milli = milli(pace.position);
  if (pace.slow.size() > max_slow_in_heartbeat) pace.slow.resize(max_slow_in_heartbeat);
  beat.slow = std::move(pace.slow);
}

void PeerAgent::heard_pace(Connection& c, const PeerHeartbeat& beat) {
  if (!config_.hub) {
    job_pace_ = from_milli(beat.pace_milli);
    if (on_pace_) on_pace_(job_pace_);
    return;
  }
  const std::uint32_t i = c.server_index;
  member_pace_.at(i) = from_milli(beat.pace_milli);
  // A member's ranks newly slow are named here too: rank 0's server's console is the one read first.
  for (const auto& label : beat.slow) {
    const auto& before = member_slow_.at(i);
    if (std::find(before.begin(), before.end(), label) == before.end()) {
      on_notice_(
          fmt::format("{} on {} is slow (its server's console and record say how far behind)", label, server_name(i)),
          false);
    }
  }
  member_slow_[i] = beat.slow;
}

void PeerAgent::hub_update_pace() {
  std::vector<double> paces;
  if (pace_probe_) {
    if (const auto own = pace_probe_().position) paces.push_back(*own);
  }
  for (std::uint32_t i = 0; i < member_pace_.size(); ++i) {
    const std::optional<double>& pace = member_pace_[i];
    if (i != config_.server_index && pace.has_value()) paces.push_back(pace.value());
  }
  job_pace_.reset();
  if (paces.size() >= 2) {
    const auto middle = paces.begin() + static_cast<std::ptrdiff_t>(paces.size() / 2);
    std::nth_element(paces.begin(), middle, paces.end());
    job_pace_ = *middle;
  }
  if (on_pace_) on_pace_(job_pace_);
}

}  // namespace davincirun::detail
