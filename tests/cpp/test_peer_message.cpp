// The peer channel's bytes (common/sha256.hpp, peers/peer_message.hpp):
// SHA-256 and HMAC against their published test vectors, frames that
// survive any split of the stream, and tags that refuse a wrong key, a
// replayed, reordered or reflected frame and a changed byte.
#include <catch2/catch.hpp>

#include <string>

#include <fmt/format.h>

#include "common/sha256.hpp"
#include "common/sha256_blocks.hpp"
#include "peers/peer_message.hpp"

using namespace davincirun;
using namespace davincirun::detail;

namespace {

std::string hex(const Digest& d) {
  std::string out;
  for (const unsigned char b : d) out += fmt::format("{:02x}", b);
  return out;
}

std::string unhex(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i + 1 < text.size(); i += 2) {
    out += static_cast<char>(std::stoi(std::string(text.substr(i, 2)), nullptr, 16));
  }
  return out;
}

// Feeds `bytes` to a parser in pieces of `step` and collects the frames.
std::vector<RawPeerFrame> parse_in_steps(const std::string& bytes, std::size_t step) {
  PeerFrameParser parser;
  std::vector<RawPeerFrame> frames;
  for (std::size_t i = 0; i < bytes.size(); i += step) {
    parser.feed(std::string_view(bytes).substr(i, step));
    while (auto f = parser.next()) frames.push_back(*f);
  }
  return frames;
}

PeerHeartbeat silent_for(std::uint64_t ms) {
  PeerHeartbeat beat;
  beat.silent_ms = ms;
  return beat;
}

}  // namespace

TEST_CASE("SHA-256 gives the FIPS 180-4 example digests", "[peers]") {
  CHECK(hex(sha256("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(hex(sha256("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 million;
  const std::string a(1000, 'a');
  for (int i = 0; i < 1000; ++i) million.update(a);
  CHECK(hex(million.finish()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("SHA-256's two block engines agree on every block, and input in any pieces hashes the same", "[peers]") {
  // Pseudo-random blocks (a fixed seed: a failure repeats); the CPU engine
  // only where this CPU has it, which the test says.
  std::uint64_t x = 0x9E3779B97F4A7C15ull;
  std::string bytes(64 * 257, '\0');
  for (auto& c : bytes) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x);
  }
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  Sha256State portable{1, 2, 3, 4, 5, 6, 7, 0xffffffffu};
  Sha256State cpu = portable;
  sha256_blocks_portable(portable, p, 257);
  if (sha256_cpu_engine()) {
    sha256_blocks_cpu(cpu, p, 257);
    CHECK(cpu == portable);
    for (std::size_t n = 0; n < 4; ++n) {  // one block at a time as well
      Sha256State a{}, b{};
      sha256_blocks_portable(a, p + 64 * n, 1);
      sha256_blocks_cpu(b, p + 64 * n, 1);
      CHECK(a == b);
    }
  } else {
    WARN("this CPU has no SHA instructions: only the portable engine runs");
  }
  // Lengths around the block size, fed whole and in uneven pieces.
  for (std::size_t size : {0u, 1u, 55u, 56u, 63u, 64u, 65u, 119u, 128u, 1000u, 16448u}) {
    const std::string_view text(bytes.data(), size);
    Sha256 pieces;
    for (std::size_t at = 0, step = 1; at < size; at += step, step = step * 3 % 71 + 1) {
      pieces.update(text.substr(at, step));
    }
    CHECK(pieces.finish() == sha256(text));
  }
}

TEST_CASE("HMAC-SHA-256 gives the RFC 4231 test case results", "[peers]") {
  // Case 1: a 20-byte key; case 2: a short key; case 6: a key longer than the block.
  CHECK(hex(hmac_sha256(std::string(20, '\x0b'), {"Hi There"})) ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(hex(hmac_sha256("Jefe", {"what do ya want ", "for nothing?"})) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(hex(hmac_sha256(std::string(131, '\xaa'), {"Test Using Larger Than Block-Size Key - Hash Key First"})) ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  CHECK(unhex("0b0c") == "\x0b\x0c");
}

TEST_CASE("peer frames survive a stream split at every byte and keep their order", "[peers]") {
  PeerSeal hub("job key", 'H');
  PeerEvent event;
  event.kind = PeerEventKind::rank_failed;
  event.server_id = "10.0.0.12";
  event.rank = 5;
  event.status = {ExitStatus::Kind::signaled, 9};
  event.detail = "RuntimeError: boom\n";
  // One statement each: the operands of + are evaluated in no set order.
  std::string stream = hub.seal(PeerFrame::challenge, std::string(peer_nonce_bytes, 'n'));
  stream += hub.seal(PeerFrame::event, encode_event(event));
  stream += hub.seal(PeerFrame::heartbeat, "");
  for (const std::size_t step : {std::size_t{1}, std::size_t{7}, stream.size()}) {
    const auto frames = parse_in_steps(stream, step);
    REQUIRE(frames.size() == 3);
    PeerSeal member("job key", 'M');
    for (const auto& f : frames) member.open(f);
    CHECK(frames[0].type == PeerFrame::challenge);
    const PeerEvent back = decode_event(frames[1].payload);
    CHECK(back.server_id == "10.0.0.12");
    CHECK(back.rank == 5);
    CHECK(back.status.kind == ExitStatus::Kind::signaled);
    CHECK(back.status.value == 9);
    CHECK(back.detail == event.detail);
  }
}

TEST_CASE("a peer frame with a wrong key, replayed, reordered, reflected or changed fails its tag", "[peers]") {
  PeerSeal hub("job key", 'H');
  const std::string first = hub.seal(PeerFrame::heartbeat, encode_heartbeat(silent_for(5)));
  const std::string second = hub.seal(PeerFrame::heartbeat, encode_heartbeat(silent_for(6)));
  auto one = [](const std::string& bytes) { return parse_in_steps(bytes, bytes.size()).at(0); };

  PeerSeal stranger("another job's key", 'M');
  CHECK_THROWS_WITH(stranger.open(one(first)), Catch::Contains("authentication failed"));

  PeerSeal member("job key", 'M');
  CHECK_THROWS_AS(member.open(one(second)), PeerProtocolError);  // reordered: its sequence number is 1
  PeerSeal replayed("job key", 'M');
  replayed.open(one(first));
  CHECK_THROWS_AS(replayed.open(one(first)), PeerProtocolError);  // the same frame again

  PeerSeal hub_again("job key", 'H');
  CHECK_THROWS_AS(hub_again.open(one(first)), PeerProtocolError);  // reflected back to its sender

  std::string changed = first;
  changed[peer_header_bytes] ^= 1;
  PeerSeal fresh("job key", 'M');
  CHECK_THROWS_AS(fresh.open(one(changed)), PeerProtocolError);
}

TEST_CASE("a session key differs per connection and per side's nonce", "[peers]") {
  const std::string a = peer_session_key("k", "hub-nonce-000001", "member-nonce-001");
  CHECK(a.size() == 32);
  CHECK(a != peer_session_key("k", "hub-nonce-000002", "member-nonce-001"));
  CHECK(a != peer_session_key("k", "hub-nonce-000001", "member-nonce-002"));
  CHECK(a != peer_session_key("k2", "hub-nonce-000001", "member-nonce-001"));
  CHECK(random_nonce() != random_nonce());
}

TEST_CASE("the peer frame parser refuses a stranger's bytes before reading a payload", "[peers]") {
  PeerFrameParser http;
  http.feed("GET / HTTP/1.1\r\n\r\n");
  CHECK_THROWS_WITH(http.next(), Catch::Contains("not a davincirun agent"));

  PeerFrameParser old;
  old.feed(std::string("DVRP\x09\x04\x00\x00", 8));
  CHECK_THROWS_WITH(old.next(), Catch::Contains("version 9"));

  const std::string magic_and_version = std::string("DVRP") + static_cast<char>(peer_protocol_version);
  PeerFrameParser huge;
  huge.feed(magic_and_version + std::string("\x04\xff\xff", 3));
  CHECK_THROWS_WITH(huge.next(), Catch::Contains("too long"));

  PeerFrameParser unknown;
  unknown.feed(magic_and_version + std::string("\x63\x00\x00", 3));
  CHECK_THROWS_WITH(unknown.next(), Catch::Contains("unknown frame type 99"));

  PeerSeal seal("k", 'H');
  CHECK_THROWS_AS(seal.seal(PeerFrame::event, std::string(max_peer_payload + 1, 'x')), PeerProtocolError);
}

TEST_CASE("a heartbeat carries its server's pace and slow ranks, within bounds", "[peers]") {
  PeerHeartbeat beat = silent_for(3);
  beat.pace_milli = 120'500;
  beat.slow = {"rank 9", "rank 11"};
  const PeerHeartbeat back = decode_heartbeat(encode_heartbeat(beat));
  CHECK(back.pace_milli == 120'500);
  CHECK(back.slow == beat.slow);
  CHECK(decode_heartbeat(encode_heartbeat(silent_for(3))).pace_milli == -1);  // none known
  beat.slow.assign(max_slow_in_heartbeat + 1, "rank 1");
  CHECK_THROWS_AS(decode_heartbeat(encode_heartbeat(beat)), PeerProtocolError);
  beat.slow.clear();
  beat.pace_milli = -2;
  CHECK_THROWS_AS(decode_heartbeat(encode_heartbeat(beat)), PeerProtocolError);
}

TEST_CASE("malformed peer payloads are protocol errors, never crashes", "[peers]") {
  CHECK_THROWS_AS(decode_event(""), PeerProtocolError);
  CHECK_THROWS_AS(decode_event(std::string(8, '\x07')), PeerProtocolError);  // kind 7 does not exist
  CHECK_THROWS_AS(decode_hello(encode_heartbeat(silent_for(1))), PeerProtocolError);
  PeerHello hello;
  hello.nonce = "short";
  CHECK_THROWS_AS(decode_hello(encode_hello(hello)), PeerProtocolError);
  CHECK_THROWS_AS(decode_heartbeat(encode_heartbeat(silent_for(1)) + "x"), PeerProtocolError);
  CHECK_THROWS_AS(decode_over(encode_heartbeat(silent_for(1))), PeerProtocolError);
  CHECK_THROWS_AS(decode_decision(""), PeerProtocolError);
  CHECK_THROWS_AS(decode_welcome(encode_welcome({2, true}) + "x"), PeerProtocolError);
}

TEST_CASE("the attempts' messages keep every field across the wire", "[peers][restarts]") {
  const PeerAttemptOver over{3, false, true, "not restarted: it failed as attempt 2 did", "ValueError: bad"};
  const PeerAttemptOver o = decode_over(encode_over(over));
  CHECK(o.attempt == 3);
  CHECK_FALSE(o.success);
  CHECK(o.refuses_restart);
  CHECK(o.decision == over.decision);
  CHECK(o.root_cause == over.root_cause);
  const PeerDecision d = decode_decision(encode_decision({2, true, "restarted (2 of 5 restarts)", "OSError: link"}));
  CHECK(d.attempt == 2);
  CHECK(d.restart);
  CHECK(d.decision == "restarted (2 of 5 restarts)");
  CHECK(d.root_cause == "OSError: link");
  const PeerWelcome w = decode_welcome(encode_welcome({4, true}));
  CHECK(w.attempt == 4);
  CHECK(w.deciding);
}
