// The lifeline's framing (job/lifeline_frames.hpp): frames are written whole, with
// their little-endian length, survive a stream that delivers them one byte
// at a time, and a peer that goes away never kills the writer.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string>

#include "davincirun/errors.hpp"
#include "helpers/awkward_bytes.hpp"
#include "helpers/pattern.hpp"
#include "job/job_protocol.hpp"
#include "job/lifeline_frames.hpp"
#include "test_support.hpp"

using namespace davincirun;
using namespace davincirun::detail;
using namespace davincirun_test;

namespace {

using namespace std::string_literals;

class SocketPair {
 public:
  SocketPair() {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
    a = fds[0];
    b = fds[1];
  }
  ~SocketPair() {
    close_a();
    close_b();
  }
  SocketPair(const SocketPair&) = delete;
  SocketPair& operator=(const SocketPair&) = delete;
  void close_a() {
    if (a >= 0) ::close(a);
    a = -1;
  }
  void close_b() {
    if (b >= 0) ::close(b);
    b = -1;
  }
  int a = -1;
  int b = -1;
};

// The documented wire format: type byte, 32-bit little-endian length, payload.
std::string frame_bytes(Frame type, const std::string& payload) {
  std::string out(1, static_cast<char>(type));
  const auto n = static_cast<std::uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + payload;
}

// No Catch2 assertions in here: some tests call these from a second thread.
bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Everything until the end of the stream; nullopt on a read error.
std::optional<std::string> receive_all(int fd) {
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

}  // namespace

TEST_CASE("write_frame writes the type byte, the little-endian length and the payload", "[job_protocol]") {
  SocketPair pair;
  const std::string small = with_nul + bad_utf8;
  const std::string large = pattern_bytes(300'000);  // above 4096: header and payload sent apart
  std::optional<std::string> received;
  {
    // Read concurrently: the large frame exceeds the socket buffer.
    Joined reader([&] { received = receive_all(pair.b); });
    CHECK(write_frame(pair.a, Frame::notice, small));
    CHECK(write_frame(pair.a, Frame::lines, large));
    CHECK(write_frame(pair.a, Frame::result, ""));
    pair.close_a();
  }
  const std::string expected =
      frame_bytes(Frame::notice, small) + frame_bytes(Frame::lines, large) + frame_bytes(Frame::result, "");
  REQUIRE(received);
  CHECK(received->size() == expected.size());
  CHECK((*received == expected));
  CHECK(received->substr(0, 5) == "N"s + static_cast<char>(small.size()) + "\0\0\0"s);
}

TEST_CASE("FrameReader reassembles frames that arrive one byte at a time, then sees a clean end", "[job_protocol]") {
  SocketPair pair;
  const std::vector<std::pair<Frame, std::string>> frames{
      {Frame::spec, with_nul + bad_utf8 + newlines},
      {Frame::started, ""},
      {Frame::lines, all_bytes},
      {Frame::error, "\0"s},
      {Frame::result, std::string(70'000, 'r')},  // bigger than one read() of the reader
  };
  std::string stream;
  for (const auto& [type, payload] : frames) stream += frame_bytes(type, payload);
  std::vector<std::pair<Frame, std::string>> got;
  bool clean_end = false;
  bool sent = true;
  {
    Joined writer([&] {
      // Byte by byte for the first frames, so the reader sees every split
      // (inside the header, inside the payload); then in large pieces.
      const std::size_t bytewise = stream.size() - frames.back().second.size() - 5;
      for (std::size_t i = 0; i < bytewise; ++i) {
        sent = sent && send_all(pair.a, std::string_view(stream).substr(i, 1));
        if (i % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      sent = sent && send_all(pair.a, std::string_view(stream).substr(bytewise, 3));  // a split header
      std::this_thread::sleep_for(1ms);
      sent = sent && send_all(pair.a, std::string_view(stream).substr(bytewise + 3));
      pair.close_a();
    });
    FrameReader reader(pair.b);
    Frame type{};
    std::string payload;
    while (reader.next(type, payload)) got.emplace_back(type, payload);
    clean_end = true;
    CHECK(reader.take_buffered().empty());
  }
  CHECK(sent);
  CHECK(clean_end);
  REQUIRE(got.size() == frames.size());
  for (std::size_t i = 0; i < frames.size(); ++i) {
    INFO("frame " << i);
    CHECK(got[i].first == frames[i].first);
    CHECK((got[i].second == frames[i].second));
  }
}

TEST_CASE("FrameReader: a stream cut inside a frame throws SystemError", "[job_protocol]") {
  SocketPair pair;
  std::string partial;
  SECTION("inside the header") { partial = frame_bytes(Frame::notice, "hello").substr(0, 3); }
  SECTION("inside the payload") { partial = frame_bytes(Frame::notice, "hello").substr(0, 7); }
  SECTION("after a whole frame, inside the next header") {
    partial = frame_bytes(Frame::notice, "hello") + frame_bytes(Frame::lines, "x").substr(0, 1);
  }
  REQUIRE(send_all(pair.a, partial));
  pair.close_a();
  FrameReader reader(pair.b);
  Frame type{};
  std::string payload;
  if (partial.size() > 10) {
    REQUIRE(reader.next(type, payload));
    CHECK(payload == "hello");
  }
  try {
    reader.next(type, payload);
    FAIL("no error for a stream cut inside a frame");
  } catch (const SystemError& e) {
    CHECK(e.os_errno() == EPIPE);
  }
}

TEST_CASE("FrameReader: an empty stream is a clean end, bytes after a frame are handed over", "[job_protocol]") {
  SocketPair pair;
  FrameReader reader(pair.b);
  Frame type{};
  std::string payload;
  SECTION("nothing at all") {
    pair.close_a();
    CHECK_FALSE(reader.next(type, payload));
  }
  SECTION("a spec frame followed by one-byte commands in the same write") {
    const std::string commands{command_stop, command_forward, static_cast<char>(SIGUSR1)};
    REQUIRE(send_all(pair.a, frame_bytes(Frame::spec, "spec") + commands));
    REQUIRE(reader.next(type, payload));
    CHECK(type == Frame::spec);
    CHECK(payload == "spec");
    CHECK(reader.take_buffered() == commands);
    CHECK(reader.take_buffered().empty());
  }
}

TEST_CASE("FrameReader refuses a length beyond max_frame_bytes", "[job_protocol]") {
  SocketPair pair;
  std::string header(1, static_cast<char>(Frame::lines));
  const std::uint32_t n = max_frame_bytes + 1;
  for (int i = 0; i < 4; ++i) header += static_cast<char>((n >> (8 * i)) & 0xff);
  REQUIRE(send_all(pair.a, header));
  FrameReader reader(pair.b);
  Frame type{};
  std::string payload;
  try {
    reader.next(type, payload);
    FAIL("accepted a length of " << n);
  } catch (const SystemError& e) {
    CHECK(e.os_errno() == EPROTO);
  }
}

TEST_CASE("write_frame to a closed peer returns false, and SIGPIPE does not kill the process", "[job_protocol]") {
  SignalDisposition default_sigpipe(SIGPIPE, SIG_DFL);  // a SIGPIPE would end this test binary
  SocketPair pair;
  SECTION("peer closed before a small frame") {
    pair.close_b();
    CHECK_FALSE(write_frame(pair.a, Frame::notice, "hello"));
  }
  SECTION("peer closed before a large frame") {
    pair.close_b();
    CHECK_FALSE(write_frame(pair.a, Frame::lines, pattern_bytes(100'000)));
  }
  SECTION("peer closes while a large frame is blocked in send()") {
    bool written = true;
    {
      Joined closer([&] {
        std::this_thread::sleep_for(50ms);
        pair.close_b();
      });
      written = write_frame(pair.a, Frame::lines, pattern_bytes(8 << 20));
    }
    CHECK_FALSE(written);
  }
  CHECK_FALSE(write_frame(pair.a, Frame::result, ""));  // and again, on the dead socket
}
