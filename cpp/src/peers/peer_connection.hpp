// One connection of a peer agent (peer_agent.hpp), shared by the files
// that implement the agent: its state, its bytes in and out, its clocks.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "davincirun/unique_fd.hpp"
#include "peers/peer_agent.hpp"
#include "peers/peer_message.hpp"

namespace davincirun::detail {

/// A member tries to reach the hub again after first_reconnect_delay while
/// nobody listens (the hub is starting); one the hub answered and let go
/// before it joined (refused, cut off) waits twice as long each time, up to
/// max_reconnect_delay: never a busy loop against the hub.
inline constexpr std::chrono::milliseconds first_reconnect_delay{200};
inline constexpr std::chrono::milliseconds max_reconnect_delay{5'000};
/// The agent's loop wakes at least this often to check the clocks, so a
/// loss is seen within peer_timeout plus this.
inline constexpr std::chrono::milliseconds tick_period{100};

/// "2.0 s": a duration in the agent's messages.
inline std::string seconds_text(std::chrono::milliseconds ms) {
  return fmt::format("{:.1f} s", static_cast<double>(ms.count()) / 1000.0);
}

struct PeerAgent::Connection {
  enum class State { connecting, handshake, welcoming, joined };
  UniqueFd fd;
  State state = State::handshake;
  PeerFrameParser parser;
  PeerSeal seal;
  std::string hub_nonce;
  std::uint32_t server_index = UINT32_MAX;  // the hub's side, once joined
  std::string peer;                         // "address:port" for messages
  std::chrono::steady_clock::time_point opened = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_heard = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point joined_at = std::chrono::steady_clock::now();
  std::uint64_t silent_ms = UINT64_MAX;  // as its last heartbeat said; none yet: UINT64_MAX
  std::string unsent;
  // The other side's last heartbeat (its sent_us, and when it came): echoed in ours.
  std::uint64_t heard_sent_us = 0;
  std::chrono::steady_clock::time_point heard_beat_at{};
  std::string part;  // hub: a member's record part, as its pieces come
  bool done = false;
  bool leaving = false;  // hub: the member said it leaves the job (its launcher is gone)
  bool closed = false;
  std::uint32_t watched = 0;  // the epoll events registered for fd; 0: not yet

  Connection(UniqueFd f, std::string key, char sender, std::string name)
      : fd(std::move(f)), seal(std::move(key), sender), peer(std::move(name)) {}
};

}  // namespace davincirun::detail
