#include "peers/peer_message.hpp"

#include <fmt/format.h>

#include "common/random_bytes.hpp"
#include "common/wire.hpp"

namespace davincirun::detail {

namespace {

constexpr std::string_view magic = "DVRP";

// Decoding errors of wire.hpp's Reader are SystemError(EPROTO); on the
// network they are the sender's fault, reported as such.
template <typename T>
T decoded(const char* what, std::string_view payload) {
  try {
    return decode<T>(payload);
  } catch (const std::exception&) {
    throw PeerProtocolError(fmt::format("malformed {} message", what));
  }
}

}  // namespace

std::string encode_event(const PeerEvent& e) { return encode(e); }

PeerEvent decode_event(std::string_view payload) {
  PeerEvent e = decoded<PeerEvent>("event", payload);
  // Members report what happened on their server; nobody is told a member could not reach the hub.
  if (e.kind == PeerEventKind::unreachable) throw PeerProtocolError("malformed event message");
  return e;
}

std::string encode_hello(const PeerHello& h) { return encode(h); }

PeerHello decode_hello(std::string_view payload) {
  PeerHello h = decoded<PeerHello>("hello", payload);
  if (h.nonce.size() != peer_nonce_bytes) throw PeerProtocolError("malformed hello message");
  return h;
}

std::string encode_heartbeat(const PeerHeartbeat& h) { return encode(h); }

PeerHeartbeat decode_heartbeat(std::string_view payload) {
  PeerHeartbeat b = decoded<PeerHeartbeat>("heartbeat", payload);
  if (b.slow.size() > max_slow_in_heartbeat || b.pace_milli < -1)
    throw PeerProtocolError("malformed heartbeat message");
  return b;
}

std::string encode_refusal(const PeerRefusal& r) { return encode(r); }

PeerRefusal decode_refusal(std::string_view payload) { return decoded<PeerRefusal>("refusal", payload); }

std::string encode_welcome(const PeerWelcome& w) { return encode(w); }

PeerWelcome decode_welcome(std::string_view payload) { return decoded<PeerWelcome>("welcome", payload); }

std::string encode_over(const PeerAttemptOver& o) { return encode(o); }

PeerAttemptOver decode_over(std::string_view payload) { return decoded<PeerAttemptOver>("attempt over", payload); }

std::string encode_decision(const PeerDecision& d) { return encode(d); }

std::string encode_part_chunk(const PeerPartChunk& c) { return encode(c); }

PeerPartChunk decode_part_chunk(std::string_view payload) {
  PeerPartChunk c = decoded<PeerPartChunk>("record part", payload);
  if (c.bytes.size() > max_part_chunk_bytes) throw PeerProtocolError("malformed record part message");
  return c;
}

PeerDecision decode_decision(std::string_view payload) { return decoded<PeerDecision>("decision", payload); }

std::optional<RawPeerFrame> PeerFrameParser::next() {
  if (buffered() < peer_header_bytes) return std::nullopt;
  const std::string_view head(buffer_.data() + start_, peer_header_bytes);
  if (head.substr(0, 4) != magic) {
    throw PeerProtocolError("not a davincirun agent (no DVRP header): another program on this port?");
  }
  const auto version = static_cast<std::uint8_t>(head[4]);
  if (version != peer_protocol_version) {
    throw PeerProtocolError(
        fmt::format("peer protocol version {}, this agent speaks {}: use the same davincirunsdk "
                    "release on every server",
                    version, peer_protocol_version));
  }
  const auto type = static_cast<std::uint8_t>(head[5]);
  if (!enum_valid<PeerFrame>(type)) {
    throw PeerProtocolError(fmt::format("unknown frame type {}", type));
  }
  const std::size_t length =
      (std::size_t{static_cast<unsigned char>(head[6])} << 8) | static_cast<unsigned char>(head[7]);
  if (length > max_peer_payload) throw PeerProtocolError(fmt::format("frame of {} bytes is too long", length));
  if (buffered() < peer_header_bytes + length + peer_tag_bytes) return std::nullopt;
  RawPeerFrame frame;
  frame.type = static_cast<PeerFrame>(type);
  frame.header.assign(head);
  frame.payload.assign(buffer_, start_ + peer_header_bytes, length);
  frame.tag.assign(buffer_, start_ + peer_header_bytes + length, peer_tag_bytes);
  start_ += peer_header_bytes + length + peer_tag_bytes;
  if (start_ == buffer_.size()) {
    buffer_.clear();
    start_ = 0;
  } else if (start_ > 65536) {
    buffer_.erase(0, start_);
    start_ = 0;
  }
  return frame;
}

Digest PeerSeal::tag(char direction, std::uint64_t seq, std::string_view header, const Digest& payload_digest) const {
  char seq_bytes[8];
  for (int i = 0; i < 8; ++i) seq_bytes[i] = static_cast<char>(seq >> (56 - 8 * i));
  return hmac_sha256(
      key_, {std::string_view(&direction, 1), std::string_view(seq_bytes, 8), header, as_view(payload_digest)});
}

std::string PeerSeal::seal(PeerFrame type, std::string_view payload) { return seal(type, payload, sha256(payload)); }

std::string PeerSeal::seal(PeerFrame type, std::string_view payload, const Digest& payload_digest) {
  if (payload.size() > max_peer_payload) {
    throw PeerProtocolError(fmt::format("message of {} bytes is too long to send", payload.size()));
  }
  std::string frame;
  frame.reserve(peer_header_bytes + payload.size() + peer_tag_bytes);
  frame += magic;
  frame += static_cast<char>(peer_protocol_version);
  frame += static_cast<char>(type);
  frame += static_cast<char>(payload.size() >> 8);
  frame += static_cast<char>(payload.size() & 0xff);
  const Digest t = tag(sender_, sent_++, frame, payload_digest);
  frame.append(payload);
  frame.append(as_view(t));
  return frame;
}

void PeerSeal::open(const RawPeerFrame& frame) {
  const char other = sender_ == 'H' ? 'M' : 'H';
  const Digest expected = tag(other, received_, frame.header, sha256(frame.payload));
  if (frame.tag.size() != peer_tag_bytes ||
      !digests_equal(expected.data(), reinterpret_cast<const unsigned char*>(frame.tag.data()), peer_tag_bytes)) {
    throw PeerProtocolError(
        "authentication failed: the other agent has another job key (another job, or DAVINCIRUN_JOB_KEY differs)");
  }
  ++received_;
}

std::string peer_session_key(std::string_view job_key, std::string_view hub_nonce, std::string_view member_nonce) {
  return std::string(as_view(hmac_sha256(job_key, {"session", hub_nonce, member_nonce})));
}

std::string random_nonce() { return random_bytes(peer_nonce_bytes); }

}  // namespace davincirun::detail
