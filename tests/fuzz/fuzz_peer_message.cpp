// libFuzzer target for the peer channel's bytes (peers/peer_message.hpp):
// what a stranger on the network can send to an agent, and what an agent
// holding the job key can send to another.
//
// Contract under test. Mode 0 (first byte even): the rest is a byte stream
// from a stranger, fed to a PeerFrameParser in pieces whose sizes the input
// also picks; the hub then does what it does with a first frame: decodes a
// hello, derives the session key from it and checks the tag. Mode 1 (odd):
// the rest is (type, length, payload) records that an agent with the key
// seals; the other side parses, opens and decodes each. Either way nothing
// but PeerProtocolError may be thrown; a frame that opens must decode the
// same after encoding again; anything else (another exception, a crash, a
// leak, undefined behaviour) is a finding: the target prints it and aborts.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "peers/peer_message.hpp"

namespace {

using namespace davincirun::detail;

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "FINDING: %s\n", what.c_str());
  std::abort();
}

const std::string job_key = "fuzzing job key";

// Decodes `f`'s payload as its type says; PeerProtocolError is an answer.
void decode(const RawPeerFrame& f) {
  try {
    switch (f.type) {
      case PeerFrame::hello: {
        const PeerHello h = decode_hello(f.payload);
        if (decode_hello(encode_hello(h)).server_id != h.server_id) finding("hello does not round-trip");
        break;
      }
      case PeerFrame::heartbeat: {
        const PeerHeartbeat h = decode_heartbeat(f.payload);
        if (decode_heartbeat(encode_heartbeat(h)).silent_ms != h.silent_ms) finding("heartbeat does not round-trip");
        break;
      }
      case PeerFrame::event: {
        const PeerEvent e = decode_event(f.payload);
        const PeerEvent again = decode_event(encode_event(e));
        if (again.detail != e.detail || again.rank != e.rank || again.kind != e.kind)
          finding("event does not round-trip");
        break;
      }
      case PeerFrame::refused: {
        const PeerRefusal r = decode_refusal(f.payload);
        if (decode_refusal(encode_refusal(r)).reason != r.reason) finding("refusal does not round-trip");
        break;
      }
      case PeerFrame::welcome: {
        if (f.payload.empty()) break;  // the challenge's answer may come without one
        const PeerWelcome w = decode_welcome(f.payload);
        const PeerWelcome again = decode_welcome(encode_welcome(w));
        if (again.attempt != w.attempt || again.deciding != w.deciding) finding("welcome does not round-trip");
        break;
      }
      case PeerFrame::over: {
        const PeerAttemptOver o = decode_over(f.payload);
        const PeerAttemptOver again = decode_over(encode_over(o));
        if (again.attempt != o.attempt || again.decision != o.decision || again.refuses_restart != o.refuses_restart)
          finding("attempt over does not round-trip");
        break;
      }
      case PeerFrame::decided: {
        const PeerDecision d = decode_decision(f.payload);
        const PeerDecision again = decode_decision(encode_decision(d));
        if (again.attempt != d.attempt || again.restart != d.restart || again.decision != d.decision)
          finding("decision does not round-trip");
        break;
      }
      default: break;
    }
  } catch (const PeerProtocolError&) {}
}

void stranger(std::string_view bytes, std::string_view steps) {
  PeerFrameParser parser;
  std::size_t pos = 0;
  std::size_t step = 0;
  try {
    while (pos < bytes.size()) {
      const std::size_t n = steps.empty() ? bytes.size() : 1 + static_cast<unsigned char>(steps[step++ % steps.size()]);
      parser.feed(bytes.substr(pos, n));
      pos += n;
      while (auto f = parser.next()) {
        if (f->payload.size() > max_peer_payload || f->tag.size() != peer_tag_bytes) finding("oversized frame");
        decode(*f);
        // The hub's handling of a first frame: its nonce, its key, its tag.
        PeerSeal seal(job_key, 'H');
        try {
          const PeerHello h = decode_hello(f->payload);
          seal.rekey(peer_session_key(job_key, std::string(peer_nonce_bytes, 'h'), h.nonce));
          seal.open(*f);
        } catch (const PeerProtocolError&) {}
      }
    }
  } catch (const PeerProtocolError&) {}
}

void keyed(std::string_view records) {
  PeerSeal sender(job_key, 'M');
  PeerSeal receiver(job_key, 'H');
  PeerFrameParser parser;
  std::size_t pos = 0;
  while (pos + 3 <= records.size()) {
    const auto type =
        static_cast<PeerFrame>(1 + static_cast<unsigned char>(records[pos]) % davincirun::enum_count<PeerFrame>());
    const std::size_t length = (std::size_t{static_cast<unsigned char>(records[pos + 1])} << 8 |
                                static_cast<unsigned char>(records[pos + 2])) %
                               (max_peer_payload + 1);
    pos += 3;
    const std::string_view payload = records.substr(pos, length);
    pos += payload.size();
    std::string frame;
    try {
      frame = sender.seal(type, payload);
    } catch (const PeerProtocolError&) {
      finding("sealing a payload within the limit failed");
    }
    parser.feed(frame);
    std::optional<RawPeerFrame> f;
    try {
      f = parser.next();
    } catch (const PeerProtocolError& e) {
      finding(std::string("a sealed frame does not parse: ") + e.what());
    }
    if (!f || f->payload != payload) finding("a sealed frame came back different");
    try {
      receiver.open(*f);
    } catch (const PeerProtocolError&) {
      finding("a frame sealed with the key does not open");
    }
    decode(*f);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if ((data[0] & 1) == 0) {
    // Byte 1 says how many of the next bytes choose the feeding steps.
    const std::size_t steps = size > 1 ? static_cast<unsigned char>(input[1]) % 8 : 0;
    const std::string_view rest = input.substr(std::min<std::size_t>(size, 2 + steps));
    stranger(rest, input.substr(std::min<std::size_t>(size, 2), steps));
  } else {
    keyed(input.substr(1));
  }
  return 0;
}
