// What the peer channel carries for the job record (record/job_record.hpp):
// heartbeats with wall-clock times, from which the hub measures each
// member's clock (peer_clock.hpp), and each member's part of the record,
// in pieces before its `over`, which the hub keeps for the job's end.
#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "peers/peer_agent.hpp"
#include "peers/peer_connection.hpp"

namespace davincirun::detail {

using Clock = std::chrono::steady_clock;

void PeerAgent::send_heartbeat(Connection& c, bool want_echo) {
  PeerHeartbeat beat;
  beat.silent_ms = silence_ ? silence_() : 0;
  beat.sent_us = wall_clock_us();
  if (c.heard_sent_us != 0) {
    beat.echo_us = c.heard_sent_us;
    beat.held_us = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - c.heard_beat_at).count());
  }
  beat.want_echo = want_echo;
  send(c, PeerFrame::heartbeat, encode_heartbeat(beat));
}

void PeerAgent::heard_heartbeat(Connection& c, const PeerHeartbeat& beat) {
  const std::uint64_t received = wall_clock_us();
  c.heard_sent_us = beat.sent_us;
  c.heard_beat_at = Clock::now();
  if (!config_.hub) {
    if (beat.want_echo) send_heartbeat(c, false);  // the hub times the round trip
    return;
  }
  c.silent_ms = beat.silent_ms;
  if (const auto sample = clock_sample(beat, received)) keep_best(member_clock_.at(c.server_index), *sample);
}

// A member's part goes in pieces just before its over, on the same
// connection: the hub has the whole part when it hears the over.
void PeerAgent::send_part(Connection& c) {
  // (The owner keeps its part within the bound: past it the hub would refuse the connection.)
  if (local_part_.empty() || local_part_.size() > max_record_part_bytes) return;
  PeerPartChunk chunk;
  chunk.attempt = attempt_;
  for (std::size_t at = 0; at < local_part_.size() && !c.closed; at += max_part_chunk_bytes) {
    chunk.bytes = local_part_.substr(at, max_part_chunk_bytes);
    chunk.last = at + max_part_chunk_bytes >= local_part_.size();
    send(c, PeerFrame::part, encode_part_chunk(chunk));
  }
}

void PeerAgent::hub_part_chunk(Connection& c, const PeerPartChunk& chunk) {
  if (c.part.size() + chunk.bytes.size() > max_record_part_bytes) {
    throw PeerProtocolError(fmt::format("its part of the job record is over {} bytes", max_record_part_bytes));
  }
  c.part += chunk.bytes;
  // A job that restarts sends one with every attempt: the last one counts.
  if (chunk.last) member_part_.at(c.server_index) = std::exchange(c.part, std::string());
}

// After a stop, members that send a part send it once their ranks have
// ended: the hub waits for them (not for those gone), for a while.
bool PeerAgent::awaiting_parts(Clock::time_point now) const {
  if (now - stopped_at_ >= config_.gather_timeout) return false;
  for (std::uint32_t i = 0; i < member_joined_.size(); ++i) {
    if (i == config_.server_index || !member_joined_[i] || !member_sends_part_[i]) continue;
    if (!member_over_[i] && member_left_[i].empty()) return true;
  }
  return false;
}

std::vector<GatheredServer> PeerAgent::gathered() const {
  std::vector<GatheredServer> servers;
  if (!config_.hub) return servers;
  for (std::uint32_t i = 0; i < config_.server_ids.size(); ++i) {
    if (i == config_.server_index) continue;
    GatheredServer s;
    s.server_index = i;
    s.part = member_part_[i];
    s.clock = member_clock_[i];
    if (s.part.empty()) {
      s.why = !member_left_[i].empty() ? "was lost: " + member_left_[i]
              : !member_joined_[i]     ? "never joined the job"
              : !member_sends_part_[i] ? "its agent sends none"
                                       : "its part did not arrive before the job ended";
    }
    servers.push_back(std::move(s));
  }
  return servers;
}

}  // namespace davincirun::detail
