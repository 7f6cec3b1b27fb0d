// The peer channel's bytes: the authenticated frames the agents of one job
// exchange over TCP (peer_agent.hpp says who talks to whom, and when).
//
// A frame is an 8-byte header ("DVRP", version, type, 16-bit big-endian
// payload length), the payload (at most max_peer_payload bytes: a message's
// field list encoded by common/wire.hpp, every value typed) and a 32-byte
// HMAC-SHA-256 tag over a direction byte, the frame's 64-bit sequence number
// in its direction, the header and the payload's SHA-256 (a payload sent to
// every member, the joined record, is hashed once, not once per member).
// Sequence numbers are not sent: TCP keeps the order, so a frame dropped,
// replayed, reordered or reflected back fails its tag.
//
// Keys: the challenge is tagged with the job key; every later frame with a
// session key, HMAC(job key, "session" || hub nonce || member nonce), fresh
// for every connection, so frames recorded from one connection are useless
// in another. What this protects against, and what not, is in
// docs/multi-server.md ("The peer channel").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "common/sha256.hpp"
#include "davincirun/enum_names.hpp"
#include "davincirun/fields.hpp"
#include "davincirun/job_types.hpp"

namespace davincirun::detail {

/// Bumped whenever a frame's meaning or bytes change; agents of another
/// version are refused with a message naming both. 3: every value typed;
/// 4: attempts (a member's `over` replaces `done`; the hub's `decided`;
/// the welcome names the job's attempt); 5: heartbeats carry wall-clock
/// times (the record's clock alignment), members send their record part
/// and the hub sends the joined record back; 6: the tag covers the
/// payload's SHA-256, not the payload.
inline constexpr std::uint8_t peer_protocol_version = 6;
inline constexpr std::size_t peer_header_bytes = 8;
inline constexpr std::size_t peer_tag_bytes = 32;
/// Longest payload: a failure report with its root cause fits easily.
inline constexpr std::size_t max_peer_payload = 8192;
inline constexpr std::size_t peer_nonce_bytes = 16;

enum class PeerFrame : std::uint8_t {
  challenge = 1,  ///< hub → member: the hub's nonce (job key)
  hello = 2,      ///< member → hub: PeerHello (session key from here on)
  welcome = 3,    ///< hub → member: joined (PeerWelcome)
  heartbeat = 4,  ///< both ways: PeerHeartbeat
  event = 5,      ///< member → hub: something happened here; hub → member: stop (PeerEvent)
  over = 6,       ///< member → hub: that server's attempt is over (PeerAttemptOver)
  refused = 7,    ///< hub → member: why it may not join (its server joined already); then the hub closes
  decided = 8,    ///< hub → member: the job restarts, or ends, after an attempt that failed (PeerDecision)
  part = 9,       ///< member → hub: a piece of its server's part of the job record (PeerPartChunk), before `over`
  record = 10,    ///< hub → member: a piece of the whole job's record (PeerPartChunk), once the job ended
};
DAVINCIRUN_ENUM_NAMES_FROM(PeerFrame, 1, "challenge", "hello", "welcome", "heartbeat", "event", "over", "refused",
                           "decided", "part", "record");

/// What happened, in a PeerEvent.
enum class PeerEventKind : std::uint8_t {
  rank_failed = 1,   ///< a rank (or the scheduler) failed: role, rank, status
  stopped = 2,       ///< the job was stopped there for another reason (Ctrl-C, a signal, its timeout)
  lost = 3,          ///< an agent, host or link was lost after it joined (hub → members only)
  stalled = 4,       ///< no output from any rank for the stall timeout (hub → members only)
  never_joined = 5,  ///< a server's agent did not join within the wait timeout (hub → members only)
  unreachable = 6,   ///< a member could not reach the hub within the wait timeout (never sent)
};
DAVINCIRUN_ENUM_NAMES_FROM(PeerEventKind, 1, "rank_failed", "stopped", "lost", "stalled", "never_joined",
                           "unreachable");

/// One event, as a member reports it or the hub orders every server to stop for it.
struct PeerEvent {
  PeerEventKind kind = PeerEventKind::rank_failed;
  std::string server_id;  ///< where it happened
  ProcessRole role = ProcessRole::rank;
  int rank = 0;
  ExitStatus status;
  /// rank_failed: the root cause from the rank's log (root_cause.hpp);
  /// otherwise why, in words ("stop requested", "no heartbeat for 30.0 s").
  std::string detail;
};
constexpr auto fields_of(const PeerEvent*) {
  using E = PeerEvent;
  return std::make_tuple(field("kind", &E::kind), field("server_id", &E::server_id), field("role", &E::role),
                         field("rank", &E::rank), field("status", &E::status), field("detail", &E::detail));
}

struct PeerHello {
  std::string nonce;  ///< peer_nonce_bytes random bytes
  std::uint32_t server_index = 0;
  std::string server_id;
  std::uint32_t pid = 0;    ///< the agent's, for the hub's messages
  bool sends_part = false;  ///< it sends its part of the job record before its `over` (PeerConfig::sends_part)
};
constexpr auto fields_of(const PeerHello*) {
  using H = PeerHello;
  return std::make_tuple(field("nonce", &H::nonce), field("server_index", &H::server_index),
                         field("server_id", &H::server_id), field("pid", &H::pid), field("sends_part", &H::sends_part));
}

/// A heartbeat also carries the clocks that put every server's record on
/// rank 0's server's clock (peer_clock.hpp): the sender's wall clock when
/// it sent it, and the other side's last `sent_us` with how long it was held.
struct PeerHeartbeat {
  /// Milliseconds since any process on the sender's server last wrote
  /// output; UINT64_MAX when none has yet (the stall watchdog).
  std::uint64_t silent_ms = UINT64_MAX;
  std::uint64_t sent_us = 0;  ///< the sender's wall clock, microseconds since the Unix epoch
  std::uint64_t echo_us = 0;  ///< `sent_us` of the last heartbeat heard from the other side; 0: none yet
  std::uint64_t held_us = 0;  ///< microseconds between hearing that one and sending this one
  bool want_echo = false;     ///< answer at once (the hub has no clock sample of this member yet)
  /// How far the sender's ranks are, in thousandths of a step (its ranks'
  /// upper median; from the hub: the job's, the upper median of every
  /// server's); -1: none known. The slow ranks' rule, output/slow_ranks.hpp.
  std::int64_t pace_milli = -1;
  std::vector<std::string> slow;  ///< a member's slow ranks ("rank 9"), at most max_slow_in_heartbeat
};
inline constexpr std::size_t max_slow_in_heartbeat = 32;
constexpr auto fields_of(const PeerHeartbeat*) {
  using B = PeerHeartbeat;
  return std::make_tuple(field("silent_ms", &B::silent_ms), field("sent_us", &B::sent_us),
                         field("echo_us", &B::echo_us), field("held_us", &B::held_us),
                         field("want_echo", &B::want_echo), field("pace_milli", &B::pace_milli),
                         field("slow", &B::slow));
}

/// A piece of a member server's part of the job record (JSON text), sent
/// before its `over`; the hub joins the pieces in order. The hub sends the
/// whole record back in the same pieces (PeerFrame::record); an empty last
/// piece alone says it sends none (PeerAgent::share_record).
struct PeerPartChunk {
  std::uint32_t attempt = 1;  ///< the attempt whose `over` follows
  bool last = false;          ///< the part is complete with this piece
  std::string bytes;          ///< at most max_part_chunk_bytes
};
constexpr auto fields_of(const PeerPartChunk*) {
  using C = PeerPartChunk;
  return std::make_tuple(field("attempt", &C::attempt), field("last", &C::last), field("bytes", &C::bytes));
}
/// A piece fits a frame with its fields around it.
inline constexpr std::size_t max_part_chunk_bytes = max_peer_payload - 64;

/// The hub's welcome: where the job is, for a member that (re)joins a job
/// that restarts and starts its ranks only once it knows.
struct PeerWelcome {
  std::uint32_t attempt = 1;  ///< the job's attempt
  /// That attempt is over (or ending) and the job decides what follows: a
  /// member (re)joining starts nothing until the hub's PeerDecision.
  bool deciding = false;
};
constexpr auto fields_of(const PeerWelcome*) {
  return std::make_tuple(field("attempt", &PeerWelcome::attempt), field("deciding", &PeerWelcome::deciding));
}

/// A server's attempt is over: every process of it has exited and its
/// output is drained (a member sends it; the hub has its own).
struct PeerAttemptOver {
  std::uint32_t attempt = 1;  ///< 1, then 2 after the first restart...
  bool success = false;       ///< every process exited 0 and nothing stopped the job
  /// A job that restarts (max_restarts > 0): this server's judge would not
  /// restart the attempt (restart_policy.hpp), and `decision` says why.
  bool refuses_restart = false;
  std::string decision;    ///< JobAttempt::decision, as this server's judge gave it
  std::string root_cause;  ///< this server's first failure's, or ""
};
constexpr auto fields_of(const PeerAttemptOver*) {
  using O = PeerAttemptOver;
  return std::make_tuple(field("attempt", &O::attempt), field("success", &O::success),
                         field("refuses_restart", &O::refuses_restart), field("decision", &O::decision),
                         field("root_cause", &O::root_cause));
}

/// The hub's word on an attempt that failed, once every server's is over
/// (a job that restarts only): every server restarts, or the job ends.
struct PeerDecision {
  std::uint32_t attempt = 1;  ///< the attempt decided on
  bool restart = false;
  std::string decision;    ///< JobAttempt::decision, the same on every server
  std::string root_cause;  ///< the first failure's, from its server
};
constexpr auto fields_of(const PeerDecision*) {
  using D = PeerDecision;
  return std::make_tuple(field("attempt", &D::attempt), field("restart", &D::restart), field("decision", &D::decision),
                         field("root_cause", &D::root_cause));
}

/// Why the hub refuses a member (PeerFrame::refused).
struct PeerRefusal {
  std::string reason;  ///< "server 10.0.0.12 has joined already"
};
constexpr auto fields_of(const PeerRefusal*) { return std::make_tuple(field("reason", &PeerRefusal::reason)); }

std::string encode_event(const PeerEvent& event);
PeerEvent decode_event(std::string_view payload);
std::string encode_hello(const PeerHello& hello);
PeerHello decode_hello(std::string_view payload);
std::string encode_heartbeat(const PeerHeartbeat& heartbeat);
PeerHeartbeat decode_heartbeat(std::string_view payload);
std::string encode_refusal(const PeerRefusal& refusal);
PeerRefusal decode_refusal(std::string_view payload);
std::string encode_welcome(const PeerWelcome& welcome);
PeerWelcome decode_welcome(std::string_view payload);
std::string encode_over(const PeerAttemptOver& over);
PeerAttemptOver decode_over(std::string_view payload);
std::string encode_decision(const PeerDecision& decision);
PeerDecision decode_decision(std::string_view payload);
std::string encode_part_chunk(const PeerPartChunk& chunk);
PeerPartChunk decode_part_chunk(std::string_view payload);

/// A frame that is malformed (bad magic, version, type or length) or fails
/// its tag: the connection is closed, with this message in the log.
class PeerProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One frame as read, before its tag is checked.
struct RawPeerFrame {
  PeerFrame type = PeerFrame::challenge;
  std::string header;   ///< the 8 header bytes
  std::string payload;  ///< at most max_peer_payload bytes
  std::string tag;      ///< peer_tag_bytes
};

/// Splits a byte stream into frames. feed() then next() until it returns
/// nullopt (more bytes needed). Throws PeerProtocolError on a bad header,
/// before reading a payload the header announces: a stranger talking
/// another protocol costs at most 8 bytes of reading.
class PeerFrameParser {
 public:
  void feed(std::string_view bytes) { buffer_.append(bytes); }
  std::optional<RawPeerFrame> next();
  std::size_t buffered() const noexcept { return buffer_.size() - start_; }

 private:
  std::string buffer_;
  std::size_t start_ = 0;
};

/// The tags of one connection: which key, and the sequence numbers of
/// both directions. `sender` is 'H' at the hub and 'M' at a member.
class PeerSeal {
 public:
  PeerSeal(std::string key, char sender) : key_(std::move(key)), sender_(sender) {}
  /// The complete frame: header, payload, tag. Throws PeerProtocolError
  /// when the payload is longer than max_peer_payload.
  std::string seal(PeerFrame type, std::string_view payload);
  /// The same for a payload whose sha256() is `payload_digest` (one
  /// payload sealed for many connections is hashed once).
  std::string seal(PeerFrame type, std::string_view payload, const Digest& payload_digest);
  /// Checks the tag of the next frame from the other side; throws
  /// PeerProtocolError("authentication failed ...") when it is wrong.
  void open(const RawPeerFrame& frame);
  /// Switches both directions to `key`, keeping the sequence numbers.
  void rekey(std::string key) { key_ = std::move(key); }

 private:
  Digest tag(char direction, std::uint64_t seq, std::string_view header, const Digest& payload_digest) const;
  std::string key_;
  char sender_;
  std::uint64_t sent_ = 0;
  std::uint64_t received_ = 0;
};

/// The session key of one connection (see the top of this file).
std::string peer_session_key(std::string_view job_key, std::string_view hub_nonce, std::string_view member_nonce);

/// peer_nonce_bytes from the kernel's random source (getrandom, else /dev/urandom).
std::string random_nonce();

}  // namespace davincirun::detail
